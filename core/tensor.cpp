#include "tensor.hpp"

#include <functional>

namespace vt {

Storage::Storage(Device device, std::size_t bytes)
    : device(device), data(backend_for(device).allocate(bytes)), bytes(bytes) {}
Storage::Storage(Device device, void* data, std::size_t bytes, std::shared_ptr<void> owner)
    : device(device), data(data), bytes(bytes), owner(std::move(owner)), owned(false) {}
Storage::~Storage() {
  if (owned) backend_for(device).deallocate(data, bytes);
}

// The last tensor of a long chain of recorded ops (a trace, a tape) owns the chain through the nodes: each node holds
// its inputs, whose nodes hold theirs. Freed by the members' destructors, it would recurse one frame per op and run
// out of stack; so while a thread frees nodes, the nodes its freed tensors held join a list that the outermost
// destructor empties.
TensorImpl::~TensorImpl() {
  thread_local std::vector<std::shared_ptr<Node>>* freeing = nullptr;  // trivially destructible: safe at exit
  if (!node) return;
  if (freeing) {
    freeing->push_back(std::move(node));
    return;
  }
  std::vector<std::shared_ptr<Node>> pending;
  freeing = &pending;
  node.reset();  // where this held the node last, its inputs go, and their nodes join `pending`
  while (!pending.empty()) {
    std::shared_ptr<Node> next = std::move(pending.back());
    pending.pop_back();
    next.reset();
  }
  freeing = nullptr;
}

void Tensor::undefined() { throw Error("vtape: use of an undefined (default-constructed) tensor"); }

std::int64_t Tensor::shape(std::int64_t axis) const { return impl().shape[normalize_axis(axis, ndim(), "shape")]; }

std::int64_t Tensor::batch_size() const {
  if (!is_batched()) fail("batch_size: the tensor is not batched");
  if (is_symbolic() && !impl().deferred)
    fail("batch_size: the batch size is a run-time value under jit and cannot be read while tracing");
  return impl().batch;
}

const void* Tensor::raw_data() const {
  if (impl().deferred) detail::materialize(*this);
  if (is_symbolic())
    fail("a traced tensor has no values while jit traces (item, at, to_vector, data and as_eigen need a value)");
  return static_cast<const char*>(impl().storage->data) + impl().offset * size_of(dtype());
}

View view_of(const Tensor& t) {
  // raw_data raises for a traced tensor, which has no data
  return batched_view(t.dtype(), const_cast<void*>(t.raw_data()), t.shape(), t.is_batched(), t.impl().batch,
                      t.is_batched());
}

namespace detail {

Tensor allocate(const Shape& shape, DType dtype, Device device, std::string_view op) {
  const std::int64_t count = checked_numel(shape, op, size_of(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->device = device;
  impl->storage = std::make_shared<Storage>(device, static_cast<std::size_t>(count) * size_of(dtype));
  return Tensor(std::move(impl));
}

Tensor filled(const Shape& shape, double value, DType dtype, Device device, std::string_view op) {
  Tensor out = allocate(shape, dtype, device, op);
  backend_for(device).fill(view_of(out), value);
  return out;
}

Tensor uploaded(const Tensor& host, Device device) {
  if (host.device() != Device{} || host.is_batched())
    fail("upload: needs an unbatched tensor on the CPU, got one on {}{} (internal error)", to_string(host.device()),
         host.is_batched() ? ", batched" : "");
  if (device == Device{}) return host;
  Tensor out = allocate(host.shape(), host.dtype(), device, "upload");
  copy_bytes(device, const_cast<void*>(out.raw_data()), Device{}, host.raw_data(),
             static_cast<std::size_t>(host.numel()) * size_of(host.dtype()));
  return out;
}

}  // namespace detail

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return detail::allocate(shape, dtype, device, "empty");
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  if (static_cast<std::int64_t>(values.size()) != checked_numel(shape, "from_vector"))
    fail("from_vector: {} values do not fill shape {}", values.size(), to_string(shape));
  Tensor src = Tensor::from_blob(const_cast<double*>(values.data()), shape, DType::f64);
  Tensor out = Tensor::empty(shape, dtype);
  backend_for(Device{}).copy(view_of(src), view_of(out));
  return detail::uploaded(out, device);
}

Tensor Tensor::from_ints(const std::vector<std::int64_t>& values, const Shape& shape, DType dtype, Device device) {
  if (is_floating(dtype))
    fail("from_ints: makes int32, int64 or bool tensors, not {}; use from_vector for floats", name_of(dtype));
  if (static_cast<std::int64_t>(values.size()) != checked_numel(shape, "from_ints"))
    fail("from_ints: {} values do not fill shape {}", values.size(), to_string(shape));
  if (dtype == DType::i32)
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i] != static_cast<std::int32_t>(values[i]))
        fail("from_ints: value {} (index {}) does not fit int32", values[i], i);
  Tensor src = Tensor::from_blob(const_cast<std::int64_t*>(values.data()), shape, DType::i64);
  Tensor out = Tensor::empty(shape, dtype);
  backend_for(Device{}).copy(view_of(src), view_of(out));
  return detail::uploaded(out, device);
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return detail::filled({}, value, dtype, device, "scalar");
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  const std::int64_t count = checked_numel(shape, "from_blob", size_of(dtype));
  if (data == nullptr && count > 0) fail("from_blob: null data for shape {}", to_string(shape));
  impl->storage =
      std::make_shared<Storage>(Device{}, data, static_cast<std::size_t>(count) * size_of(dtype), std::move(owner));
  return Tensor(std::move(impl));
}

namespace detail {
// The elements of `v` (on `device`) as `as`, row-major into host memory at `out`: converted by the
// device's backend, then one copy to the host.
void read_to_host(Device device, const View& v, DType as, void* out) {
  Backend& backend = backend_for(device);
  const Shape strides = contiguous_strides(v.shape);
  if (device.kind == DeviceKind::cpu) {
    backend.copy(v, View{as, out, v.shape, strides});
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(vt::numel(v.shape)) * size_of(as);
  const Storage staged(device, bytes);
  backend.copy(v, View{as, staged.data, v.shape, strides});
  copy_bytes(Device{}, out, device, staged.data, bytes);
}
}  // namespace detail

std::int64_t Tensor::stored_numel() const {
  const View v = view_of(*this);
  return vt::numel(v.shape);
}

namespace detail {
std::string batch_description(const Tensor& t) {
  const std::string examples =
      t.is_symbolic() && !t.impl().deferred ? "B (a run-time size under jit)" : std::to_string(t.impl().batch);
  return fmt::format("a batch of {} examples of shape {}", examples, to_string(t.shape()));
}
}  // namespace detail

void Tensor::read_all(DType as, void* out) const { detail::read_to_host(device(), view_of(*this), as, out); }

void Tensor::read_one(DType as, void* out) const {
  if (is_batched() && !(numel() == 1 && impl().batch == 1))
    fail(
        "item: needs one element, but the tensor is {}; read one example's value with unbatch(x) and at({{b, ...}}), "
        "reduce over the batch (batch_mean, sum), or read every value with to_vector (batch first)",
        detail::batch_description(*this));
  if (numel() != 1) fail("item: needs a tensor with one element, got shape {}", to_string(shape()));
  View element = view_of(*this);
  element.shape.assign(element.shape.size(), 1);
  detail::read_to_host(device(), element, as, out);
}

void Tensor::read_at(DType as, std::initializer_list<std::int64_t> index, void* out) const {
  if (is_batched())
    fail(
        "at: the tensor is {}; index the plain [B, ...] tensor instead, unbatch(x).at({{b, ...}}) (b the example), or "
        "read every value with to_vector (batch first)",
        detail::batch_description(*this));
  if (index.size() != ndim())
    fail("at: index of {} entries for a tensor of shape {}", index.size(), to_string(shape()));
  std::int64_t flat = 0, i = 0;
  const Shape strides = contiguous_strides(shape());
  for (auto k : index) {
    if (k < 0 || k >= shape()[i]) fail("at: index {} out of range for axis {} of shape {}", k, i, to_string(shape()));
    flat += k * strides[i++];
  }
  View element = view_of(*this);
  element.data = static_cast<char*>(element.data) + flat * size_of(dtype());
  element.shape = {};
  element.strides = {};
  detail::read_to_host(device(), element, as, out);
}

}  // namespace vt
