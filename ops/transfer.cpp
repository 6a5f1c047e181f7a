// Transfer family: to_device. The one op whose output lives on another device than its input;
// its forward copies through the host-visible side of whichever backend is not the CPU.
#include "transfer.hpp"

#include <vector>

#include "../core/graph.hpp"

namespace vt {

namespace {

Device device_in(const Attrs& a, std::size_t at) { return {static_cast<DeviceKind>(a.ints[at]), static_cast<int>(a.ints[at + 1])}; }

// Attrs: ints = [target kind, target index, source kind, source index]; k.backend is the target's.
void transfer_forward(const KernelArgs& k) {
  const Device to = device_in(k.attrs, 0), from = device_in(k.attrs, 2);
  const std::size_t bytes = static_cast<std::size_t>(numel(k.out.shape)) * size_of(k.out.dtype);
  if (bytes == 0) return;
  Backend& source = backend_for(from);
  if (from.kind == DeviceKind::cpu) {
    k.backend.from_host(k.out.data, k.in[0].data, bytes);
  } else if (to.kind == DeviceKind::cpu) {
    source.to_host(k.out.data, k.in[0].data, bytes);
  } else {  // between two devices, staged through the host
    std::vector<char> host(bytes);
    source.to_host(host.data(), k.in[0].data, bytes);
    k.backend.from_host(k.out.data, host.data(), bytes);
  }
}

const OpDef to_device_op{.name = "to_device",
                         .infer = [](const std::vector<TypeInfo>& in, const Attrs&) { return in[0]; },
                         .forward = transfer_forward,
                         .adjoint = [](const Node& n, const Tensor&, const Tensor& g, const std::vector<bool>&) {
                           return std::vector<Tensor>{to_device(g, n.inputs[0].device())};
                         },
                         .moves_device = true};

}  // namespace

Tensor to_device(const Tensor& x, Device device) {
  if (!x.defined()) fail("to_device: undefined tensor");
  if (x.device() == device) return x;
  if (x.is_symbolic())
    fail("to_device: cannot move a traced tensor from {} to {}: a jit plan runs on one device, so move the "
         "arguments before calling the jitted function",
         to_string(x.device()), to_string(device));
  backend_for(device);  // raises now, naming the device, if it is not available
  return apply(to_device_op, {x},
               Attrs{{static_cast<std::int64_t>(device.kind), device.index, static_cast<std::int64_t>(x.device().kind),
                      x.device().index},
                     {}});
}

}  // namespace vt
