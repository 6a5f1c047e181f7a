#include <algorithm>

#include "graph.hpp"

namespace vt {

namespace {
thread_local OpCounter* active_counter = nullptr;
thread_local bool per_example = false;
}  // namespace

PerExampleScope::PerExampleScope() : previous_(per_example) { per_example = true; }
PerExampleScope::~PerExampleScope() { per_example = previous_; }
bool PerExampleScope::active() { return per_example; }

OpCounter::OpCounter() : previous_(active_counter) { active_counter = this; }
OpCounter::~OpCounter() { active_counter = previous_; }
OpCounter* OpCounter::active() { return active_counter; }
int OpCounter::forward(std::string_view op) const {
  const auto it = forwards.find(op);
  return it == forwards.end() ? 0 : it->second;
}
int OpCounter::adjoint(std::string_view op) const {
  const auto it = adjoints.find(op);
  return it == adjoints.end() ? 0 : it->second;
}

Value infer_output(const OpDef& op, const std::vector<Value>& in, const Attrs& attrs) {
  std::vector<TypeInfo> types;
  types.reserve(in.size());
  bool batched = false;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!op.mixed_dtypes && in[i].dtype != in[0].dtype)
      fail("{}: dtype mismatch ({} and {})", op.name, name_of(in[0].dtype), name_of(in[i].dtype));
    batched |= in[i].batched;
    types.push_back({in[i].dtype, in[i].shape});
  }
  TypeInfo type = op.infer(types, attrs);
  (void)checked_numel(type.shape, op.name, size_of(type.dtype));  // no negative or overflowing shape leaves a rule
  return {type.dtype, std::move(type.shape), batched && !op.reduces_batch, nullptr};
}

namespace {
// The physical view of a value: [B, ...shape] when batched; an unbatched input of a batched op
// gets a leading axis of stride 0, broadcasting it across the batch without a copy.
View physical(const Value& v, std::int64_t batch, bool lead) {
  View view{v.dtype, v.data, v.shape, contiguous_strides(v.shape)};
  if (lead) {
    view.shape.insert(view.shape.begin(), batch);
    view.strides.insert(view.strides.begin(), v.batched ? numel(v.shape) : 0);
  }
  return view;
}
}  // namespace

void run_forward(const OpDef& op, const Attrs& attrs, const std::vector<Value>& in, const Value& out,
                 std::int64_t batch, Backend& backend) {
  // Nothing to compute: kernels never see an empty output, whose other dimensions may be huge
  // (a stack of 0 matrices of 2^32 x 2^32 has n * n overflow in any kernel's arithmetic).
  if (numel(out.shape) == 0 || (out.batched && batch == 0)) return;
  bool batched = false;
  for (const Value& v : in) batched |= v.batched;
  std::vector<View> views;
  views.reserve(in.size());
  for (const Value& v : in) views.push_back(physical(v, batch, batched));
  const View out_view = physical(out, batch, out.batched);
  op.forward(KernelArgs{op.name, backend, views, out_view, attrs, batched, batch});
}

Tensor apply(const OpDef& op, std::vector<Tensor> inputs, Attrs attrs) {
  std::vector<Value> values;
  values.reserve(inputs.size());
  bool symbolic = false, tracked = false, batched = false;
  std::int64_t batch = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("{}: input {} is an undefined tensor", op.name, i);
    if (t.device() != inputs[0].device())
      fail("{}: inputs are on different devices ({} and {})", op.name, to_string(inputs[0].device()),
           to_string(t.device()));
    symbolic |= t.is_symbolic();
    tracked |= t.impl().tracked;
    if (t.is_batched() && !t.is_symbolic()) {
      if (batched && t.impl().batch != batch)
        fail("{}: batched inputs have different batch sizes ({} and {})", op.name, batch, t.impl().batch);
      batched = true;
      batch = t.impl().batch;
    }
    values.push_back({t.dtype(), t.shape(), t.is_batched(), t.is_symbolic() ? nullptr : const_cast<void*>(t.raw_data())});
  }
  Value out = infer_output(op, values, attrs);
  if (active_counter) ++active_counter->forwards[std::string(op.name)];

  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = out.dtype;
  impl->shape = out.shape;
  impl->batched = out.batched;
  impl->batch = out.batched ? batch : 0;
  impl->device = op.moves_device ? Device{static_cast<DeviceKind>(attrs.ints[0]), static_cast<int>(attrs.ints[1])}
                 : inputs.empty()  ? Device{}
                                   : inputs[0].device();
  impl->tracked = tracked && op.adjoint != nullptr;

  if (!symbolic && op.aliases_input) {
    impl->storage = inputs[0].impl().storage;
    impl->offset = inputs[0].impl().offset;
  } else if (!symbolic) {
    const std::int64_t count = checked_numel(impl->shape, op.name, size_of(impl->dtype), out.batched ? batch : 1);
    impl->storage = std::make_shared<Storage>(impl->device, static_cast<std::size_t>(count) * size_of(impl->dtype));
    out.data = impl->storage->data;
    Backend& backend = backend_for(impl->device);
    try {
      run_forward(op, attrs, values, out, batch, backend);
    } catch (...) {
      backend.raise_deferred();  // a failure deferred earlier on this thread came first
      throw;
    }
    backend.raise_deferred();  // an eager op's errors surface before its result is returned
  }
  if (impl->tracked || symbolic)
    impl->node = std::make_shared<Node>(Node{&op, std::move(attrs), std::move(inputs)});
  return Tensor(std::move(impl));
}

View expand_view(const View& in, const View& out, bool batched) {
  const std::size_t lead = batched ? 1 : 0;
  const std::size_t rank = out.shape.size(), in_rank = in.shape.size();
  View v{in.dtype, in.data, out.shape, Shape(rank, 0)};
  if (batched) v.strides[0] = in.strides[0];
  for (std::size_t i = lead; i < in_rank; ++i) {
    const std::size_t d = rank - (in_rank - i);  // right-aligned
    v.strides[d] = in.shape[i] == out.shape[d] ? in.strides[i] : 0;
  }
  return v;
}

View reshaped_view(const View& v, const Shape& shape) {
  return View{v.dtype, v.data, shape, contiguous_strides(shape)};
}

}  // namespace vt
