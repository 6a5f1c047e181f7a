#include <algorithm>
#include <array>
#include <span>
#include <mutex>

#include "graph.hpp"

namespace vt {

namespace {
thread_local OpCounter* active_counter = nullptr;
thread_local bool per_example = false;
thread_local bool defer_constant_ops = false;
thread_local CaptureScope* active_capture = nullptr;
}  // namespace

CaptureScope::CaptureScope(Substitute substitute) : substitute_(std::move(substitute)), previous_(active_capture) {
  active_capture = this;
}
CaptureScope::~CaptureScope() { active_capture = previous_; }
CaptureScope* CaptureScope::active() { return active_capture; }

void CaptureScope::made(const Tensor& t) {
  for (CaptureScope* s = this; s; s = s->previous_) s->made_.insert(&t.impl());
}

void CaptureScope::see(std::vector<Tensor>& inputs) {
  for (Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (substitute_ && !made_.contains(&t.impl())) {
      if (const Tensor* found = substituted_.find(&t.impl())) {
        t = *found;
      } else {
        active_capture = previous_;  // the substitute is made outside this scope
        Tensor replaced;
        try {
          replaced = substitute_(t);
        } catch (...) {
          active_capture = this;
          throw;
        }
        active_capture = this;
        substituted_.try_emplace(&t.impl(), replaced);
        t = replaced;
      }
    }
    for (CaptureScope* s = this; s; s = s->previous_)
      if (!s->made_.contains(&t.impl()) && s->captured_set_.insert(&t.impl())) s->captured_.push_back(t);
  }
}

void CaptureScope::read(std::vector<Tensor>& inputs) {
  if (active_capture) active_capture->see(inputs);
}

bool CaptureScope::wrote(const Tensor& result) {
  if (!active_capture) return false;
  active_capture->made(result);
  return true;
}

SuspendCaptures::SuspendCaptures() : previous_(active_capture) { active_capture = nullptr; }
SuspendCaptures::~SuspendCaptures() { active_capture = previous_; }

DeferConstantOps::DeferConstantOps(bool on) : previous_(defer_constant_ops) { defer_constant_ops = on; }
DeferConstantOps::~DeferConstantOps() { defer_constant_ops = previous_; }
bool DeferConstantOps::active() { return defer_constant_ops; }

PerExampleScope::PerExampleScope(bool on) : previous_(per_example) { per_example = on; }
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
int OpCounter::tangent(std::string_view op) const {
  const auto it = tangents.find(op);
  return it == tangents.end() ? 0 : it->second;
}

namespace {
// n values of T, on the stack for the usual few (an op's inputs): apply runs once per traced op.
template <class T>
class FewOrMany {
 public:
  explicit FewOrMany(std::size_t n) : n_(n) {
    if (n > few_.size()) many_.resize(n);
  }
  std::span<T> span() { return {n_ > few_.size() ? many_.data() : few_.data(), n_}; }

 private:
  std::array<T, 4> few_;  // default-initialised: every entry used is assigned first
  std::vector<T> many_;
  std::size_t n_;
};
}  // namespace

Operand infer_output(const OpDef& op, std::span<const Operand> in, const Attrs& attrs) {
  if (op.inputs >= 0 && in.size() != static_cast<std::size_t>(op.inputs))
    fail("{}: takes {} input{}, got {}", op.name, op.inputs, op.inputs == 1 ? "" : "s", in.size());
  FewOrMany<ExampleType> storage(in.size());
  const std::span<ExampleType> types = storage.span();
  bool batched = false;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!op.integers && is_integer(in[i].dtype))
      fail("{}: takes floating-point tensors, got {} (input {}); convert it with astype", op.name, name_of(in[i].dtype),
           i);
    if (!op.booleans && is_boolean(in[i].dtype))
      fail("{}: takes {} tensors, got bool (input {}); convert it with astype", op.name,
           op.integers ? "numeric" : "floating-point", i);
    if (!op.mixed_dtypes && in[i].dtype != in[0].dtype)
      fail("{}: dtype mismatch ({} and {})", op.name, name_of(in[0].dtype), name_of(in[i].dtype));
    batched |= in[i].batched;
    types[i] = {in[i].dtype, in[i].shape};
  }
  ExampleType type = op.infer(types, attrs);
  (void)checked_numel(type.shape, op.name, size_of(type.dtype));  // no negative or overflowing shape leaves a rule
  return {type.dtype, std::move(type.shape), batched && !op.reduces_batch, nullptr};
}

KernelViews kernel_views(std::span<const Operand> in, const Operand& out, std::int64_t batch) {
  KernelViews views;
  for (const Operand& v : in) views.batched |= v.batched;
  views.in.reserve(in.size());
  for (const Operand& v : in)
    views.in.push_back(batched_view(v.dtype, v.data, v.shape, v.batched, batch, views.batched));
  views.out = batched_view(out.dtype, out.data, out.shape, out.batched, batch, out.batched);
  return views;
}

void run_kernel(const OpDef& op, const Attrs& attrs, const KernelViews& views, std::int64_t batch, Backend& backend,
                std::int64_t whole_batch, std::int64_t first_example) {
  // Nothing to compute: kernels never see an empty output, whose other dimensions may be huge
  // (a stack of 0 matrices of 2^32 x 2^32 has n * n overflow in any kernel's arithmetic).
  if (numel(views.out.shape) == 0) return;
  op.forward(KernelArgs{op.name, backend, views.in, views.out, attrs, views.batched, batch,
                        whole_batch < 0 ? batch : whole_batch, first_example});
}

namespace {
// A traced result's batch size where the trace knows it: every batched input has the same known
// size (one from as_batch of a plain argument, whose shape fixes the plan, or a constant's); 0
// (a run-time size) otherwise. It lets unbatch of a value computed from as_batch be traced.
std::int64_t traced_batch(const std::vector<Tensor>& inputs) {
  std::int64_t batch = 0;
  for (const Tensor& t : inputs) {
    if (!t.is_batched()) continue;
    if (t.impl().batch <= 0 || (batch != 0 && t.impl().batch != batch)) return 0;
    batch = t.impl().batch;
  }
  return batch;
}
}  // namespace

Tensor apply(const OpDef& op, std::vector<Tensor> inputs, Attrs attrs) {
  if (active_capture) active_capture->see(inputs);
  FewOrMany<Operand> storage(inputs.size());
  const std::span<Operand> values = storage.span();
  bool symbolic = false, traced = false, deferred_input = false, tracked = false, batched = false;
  std::uint64_t tracked_since = 0;
  std::int64_t batch = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("{}: input {} is an undefined tensor", op.name, i);
    if (t.device() != inputs[0].device())
      fail("{}: inputs are on different devices ({} and {})", op.name, to_string(inputs[0].device()),
           to_string(t.device()));
    symbolic |= t.is_symbolic();
    deferred_input |= t.is_symbolic() && t.impl().deferred;
    traced |= t.is_symbolic() && !t.impl().deferred;
    if (t.impl().tracked) {
      tracked_since = tracked ? std::min(tracked_since, t.impl().tracked_since) : t.impl().tracked_since;
      tracked = true;
    }
    if (t.is_batched() && (!t.is_symbolic() || t.impl().deferred)) {  // a known batch size
      if (batched && t.impl().batch != batch)
        fail("{}: batched inputs have different batch sizes ({} and {})", op.name, batch, t.impl().batch);
      batched = true;
      batch = t.impl().batch;
    }
    values[i] = {t.dtype(), t.shape(), t.is_batched(), t.is_symbolic() ? nullptr : const_cast<void*>(t.raw_data())};
  }
  Operand out = infer_output(op, values, attrs);
  if (active_counter) ++active_counter->forwards[std::string(op.name)];
  // On constants only, under a jit trace: recorded for the plan rather than computed (see
  // DeferConstantOps). A tracked input would lose its gradient in a plan constant, so it computes.
  const bool defer = !traced && !tracked && !inputs.empty() && !op.output_device &&
                     (deferred_input || (defer_constant_ops && !op.aliases_input));
  if (!traced && deferred_input && !defer) {  // a transfer or a tracked op computes now, from values
    for (const Tensor& t : inputs) detail::materialize(t);
    return apply(op, std::move(inputs), std::move(attrs));
  }
  symbolic |= defer;

  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = out.dtype;
  impl->shape = out.shape;
  impl->batched = out.batched;
  impl->batch = out.batched ? (traced ? traced_batch(inputs) : batch) : 0;
  impl->device = op.output_device ? op.output_device(attrs) : inputs.empty() ? Device{} : inputs[0].device();
  impl->tracked = tracked && op.adjoint != nullptr && is_floating(out.dtype);  // no gradient through integers
  impl->tracked_since = impl->tracked ? tracked_since : 0;
  impl->deferred = defer;

  if (!symbolic && op.aliases_input) {
    impl->storage = inputs[0].impl().storage;
    impl->offset = inputs[0].impl().offset;
  } else if (!symbolic) {
    const std::int64_t count = checked_numel(impl->shape, op.name, size_of(impl->dtype), out.batched ? batch : 1);
    impl->storage = std::make_shared<Storage>(impl->device, static_cast<std::size_t>(count) * size_of(impl->dtype));
    out.data = impl->storage->data;
    Backend& backend = backend_for(impl->device);
    try {
      run_kernel(op, attrs, kernel_views(values, out, batch), batch, backend);
    } catch (...) {
      backend.raise_deferred();  // a failure deferred earlier on this thread came first
      throw;
    }
    backend.raise_deferred();  // an eager op's errors surface before its result is returned
  }
  if (impl->tracked || symbolic || active_capture)
    impl->node = std::make_shared<Node>(Node{&op, std::move(attrs), std::move(inputs)});
  Tensor result(std::move(impl));
  if (active_capture) active_capture->made(result);
  return result;
}

Tensor reapply(const Node& node, std::vector<Tensor> inputs) {
  return node.op->reapply ? node.op->reapply(inputs, node.attrs) : apply(*node.op, std::move(inputs), node.attrs);
}

namespace detail {

void materialize(const Tensor& t) {
  if (!t.defined() || !t.impl().deferred) return;
  // Computed while a function is being recorded (a loop's body), a value keeps its node: a replay computes it again
  // from the replayed inputs, rather than reading this one's (a batch a vmap inside the body made, say) from outside.
  const bool recorded = CaptureScope::active() != nullptr;
  // A deferred tensor may escape its trace and be read from several threads at once: one computes
  // it, the others wait and then see its storage. Recursive: computing it reads its inputs, which
  // come back here.
  static std::recursive_mutex computing_deferred;
  const SuspendCaptures computing_is_not_the_function;
  const std::lock_guard<std::recursive_mutex> lock(computing_deferred);
  if (!t.is_symbolic()) return;
  // Inputs first, iteratively: a long chain of constant ops must not recurse as deep.
  std::vector<Tensor> stack{t};
  while (!stack.empty()) {
    const Tensor top = stack.back();
    TensorImpl& impl = top.impl();
    if (!top.is_symbolic()) {
      stack.pop_back();
      continue;
    }
    bool ready = true;
    for (const Tensor& in : impl.node->inputs)
      if (in.is_symbolic()) {  // deferred: a deferred tensor's inputs are never traced ones
        stack.push_back(in);
        ready = false;
      }
    if (!ready) continue;
    const DeferConstantOps computing(false);
    const Tensor value = apply(*impl.node->op, impl.node->inputs, impl.node->attrs);
    impl.storage = value.impl().storage;
    impl.offset = value.impl().offset;
    if (!recorded) impl.node.reset();  // a constant now: its inputs may go
    stack.pop_back();
  }
}

}  // namespace detail

}  // namespace vt
