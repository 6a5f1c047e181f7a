// Transfer family: to_device. The one op whose output lives on another device than its input;
// its forward copies through the host-visible side of whichever backend is not the CPU.
#include "transfer.hpp"

#include "../core/graph.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

struct TransferAttrs {
  Device to, from;
  auto fields() { return std::tie(to, from); }
};

void transfer_forward(const KernelArgs& k) {
  const auto [to, from] = unpack_attrs<TransferAttrs>(k.attrs);
  copy_bytes(to, k.out.data, from, k.in[0].data, static_cast<std::size_t>(numel(k.out.shape)) * size_of(k.out.dtype));
}

const OpDef to_device_op{
    .name = "to_device",
    .inputs = 1,
    .infer = same_type,
    .forward = transfer_forward,
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{to_device(g, n.inputs[0].device())}; },
    .tangent = linear_tangent,
    .output_device = [](const Attrs& a) { return unpack_attrs<TransferAttrs>(a).to; },
    .integers = true,
    .booleans = true};

}  // namespace

Tensor to_device(const Tensor& x, Device device) {
  if (!x.defined()) fail("to_device: undefined tensor");
  if (x.device() == device) return x;
  detail::materialize(x);  // computed from constants while jit traces: moved as a constant
  if (x.is_symbolic())
    fail(
        "to_device: cannot move a traced tensor from {} to {}: a jit plan runs on one device, so move the "
        "arguments before calling the jitted function",
        to_string(x.device()), to_string(device));
  backend_for(device);  // raises now, naming the device, if it is not available
  return apply(to_device_op, {x}, pack_attrs(TransferAttrs{device, x.device()}));
}

Tensor Tensor::to(Device d) const { return to_device(*this, d); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(to_device_op, "to_device", "to_kind to_index from_kind from_index");

}  // namespace vt
