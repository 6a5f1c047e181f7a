#include <algorithm>

#include "graph.hpp"

namespace vt {

namespace {
thread_local OpCounter* active_counter = nullptr;
}

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

Tensor apply(const OpDef& op, std::vector<Tensor> inputs, Attrs attrs) {
  std::vector<TypeInfo> types;
  types.reserve(inputs.size());
  bool batched = false, symbolic = false, tracked = false;
  std::int64_t batch = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("{}: input {} is an undefined tensor", op.name, i);
    if (t.device() != inputs[0].device())
      fail("{}: inputs are on different devices ({} and {})", op.name, to_string(inputs[0].device()),
           to_string(t.device()));
    if (!op.mixed_dtypes && t.dtype() != inputs[0].dtype())
      fail("{}: dtype mismatch ({} and {})", op.name, name_of(inputs[0].dtype()), name_of(t.dtype()));
    symbolic |= t.is_symbolic();
    tracked |= t.impl().tracked;
    if (t.is_batched()) {
      if (batched && !symbolic && t.impl().batch != batch)
        fail("{}: batched inputs have different batch sizes ({} and {})", op.name, batch, t.impl().batch);
      batched = true;
      batch = t.impl().batch;
    }
    types.push_back({t.dtype(), t.shape()});
  }
  TypeInfo type = op.infer(types, attrs);
  if (active_counter) ++active_counter->forwards[std::string(op.name)];

  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = type.dtype;
  impl->shape = std::move(type.shape);
  impl->batched = batched;
  impl->batch = batch;
  impl->device = inputs.empty() ? Device{} : inputs[0].device();
  impl->tracked = tracked && op.adjoint != nullptr;

  if (!symbolic && op.aliases_input) {
    impl->storage = inputs[0].impl().storage;
    impl->offset = inputs[0].impl().offset;
  } else if (!symbolic) {
    Backend& be = backend_for(impl->device);
    const std::int64_t count = vt::numel(impl->shape) * (batched ? batch : 1);
    impl->storage = std::make_shared<Storage>(impl->device, static_cast<std::size_t>(count) * size_of(impl->dtype));
    Tensor out(impl);
    std::vector<View> views;
    views.reserve(inputs.size());
    for (const Tensor& t : inputs) {
      View v = view_of(t);
      if (batched && !t.is_batched()) {  // broadcast an unbatched input across the batch
        v.shape.insert(v.shape.begin(), batch);
        v.strides.insert(v.strides.begin(), 0);
      }
      views.push_back(std::move(v));
    }
    const View out_view = view_of(out);
    op.forward(KernelArgs{op.name, be, views, out_view, attrs, batched, batch});
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
