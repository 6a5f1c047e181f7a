#include "grad.hpp"

#include <atomic>
#include <utility>

#include "../core/graph.hpp"
#include "../ops/tangent.hpp"
#include "../ops/batch.hpp"
#include "../ops/creation.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/layout.hpp"
#include "../ops/reduce.hpp"
#include "vmap.hpp"

namespace vt {

namespace {

// watch's op: the variable is its input's alias, its cotangent passes through.
const OpDef identity_op{.name = "identity",
                        .inputs = 1,
                        .infer = same_type,
                        .forward = nullptr,
                        .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                                      const AdjointContext&) { return std::vector<Tensor>{g}; },
                        .tangent = linear_tangent,
                        .aliases_input = true};

// Tracked tensors reachable from `outputs`, inputs before the tensors computed from them.
std::vector<Tensor> topological_order(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  PointerSet seen;
  std::vector<std::pair<Tensor, bool>> stack;  // (tensor, inputs already pushed)
  for (const Tensor& o : outputs) stack.emplace_back(o, false);
  while (!stack.empty()) {
    auto [t, expanded] = stack.back();
    stack.pop_back();
    const TensorImpl* p = t.impl_ptr().get();
    if (expanded) {
      order.push_back(t);
      continue;
    }
    if (!t.impl().tracked || !seen.insert(p)) continue;
    stack.emplace_back(t, true);
    if (t.impl().node)
      for (const Tensor& in : t.impl().node->inputs) stack.emplace_back(in, false);
  }
  return order;
}

thread_local int open_transforms = 0;

// The tensors of `order` (inputs first) computed from a variable in `wrt`, the variables included: where a sweep's
// cotangents or tangents flow.
PointerSet relevant_to(const std::vector<Tensor>& order, const std::vector<Tensor>& wrt) {
  PointerSet relevant;
  for (const Tensor& w : wrt) relevant.insert(w.impl_ptr().get());
  for (const Tensor& t : order) {
    if (relevant.contains(t.impl_ptr().get()) || !t.impl().node) continue;
    for (const Tensor& in : t.impl().node->inputs)
      if (relevant.contains(in.impl_ptr().get())) {
        relevant.insert(t.impl_ptr().get());
        break;
      }
  }
  return relevant;
}

// A cotangent batched like its primal. A batched primal whose cotangent is the same for every
// example gets copies. An unbatched primal used by every example receives the sum of their
// cotangents when the differentiated outputs are unbatched (a loss over the batch); when they are
// per example (grad inside vmap), each example keeps its own cotangent.
Tensor match_batching(const Tensor& g, const Tensor& primal, bool per_example_outputs) {
  if (g.is_batched() && !primal.is_batched() && !per_example_outputs) return batch_sum(g);
  if (!g.is_batched() && primal.is_batched()) return broadcast_to_batch(g, primal);
  return g;
}

}  // namespace

std::vector<Tensor> backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                             const std::vector<Tensor>& wrt, bool differentiable) {
  PerExampleScope per_example;  // adjoints are per example, like the ops they differentiate
  // A backward pass recorded into a function (a loop's body) may be differentiated when the function is replayed
  // under a transform, whatever transforms are open now.
  differentiable |= CaptureScope::active() != nullptr;
  if (!cotangents.empty() && cotangents.size() != outputs.size())
    fail("backward: {} cotangents for {} outputs", cotangents.size(), outputs.size());
  // Per example: batched outputs (grad inside vmap), or a batch of cotangents for unbatched outputs
  // (a pullback under vmap: the rows of a Jacobian), each of which keeps its own result.
  bool per_example_outputs = false;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    per_example_outputs |= outputs[i].is_batched() || (!cotangents.empty() && cotangents[i].is_batched());
  const std::vector<Tensor> order = topological_order(outputs);
  const PointerSet relevant = relevant_to(order, wrt);
  // A batch of cotangents for an unbatched result that is itself a reduction over a batch, of values the cotangents
  // flow through, cannot be kept apart from the batch it reduces (both would be the one batch axis).
  for (std::size_t i = 0; i < cotangents.size(); ++i)
    if (cotangents[i].is_batched() && !outputs[i].is_batched())
      for (const Tensor& t : order)
        if (t.is_batched() && relevant.contains(t.impl_ptr().get()))
          fail(
              "vjp: a batch of cotangents (a pullback under vmap) for an unbatched result computed from batched "
              "values (a reduction over their batch): the two batches would share one axis; pull back one "
              "cotangent at a time");

  PointerMap<Tensor> cot;
  auto accumulate = [&](const Tensor& t, const Tensor& g) {
    if (g.impl().no_cotangent) return;
    auto [sum, fresh] = cot.try_emplace(t.impl_ptr().get(), g);
    if (!fresh) *sum = add(*sum, g);
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor seed =
        cotangents.empty() ? ones(outputs[i].shape(), outputs[i].dtype(), outputs[i].device()) : cotangents[i];
    if (seed.shape() != outputs[i].shape())
      fail("vjp: cotangent of shape {} for an output of shape {}", to_string(seed.shape()),
           to_string(outputs[i].shape()));
    if (seed.dtype() != outputs[i].dtype())
      fail("vjp: cotangent dtype {} does not match the output dtype {}", name_of(seed.dtype()),
           name_of(outputs[i].dtype()));
    accumulate(outputs[i], match_batching(seed, outputs[i], per_example_outputs));
  }

  // Who reads what, gathered on an adjoint's first question: the readers of the tensor numbered i (in the order first
  // read) are reader[first_reader[i], first_reader[i + 1]), an undefined one for a result of the program.
  PointerMap<int> read_index;
  std::vector<std::size_t> first_reader;
  std::vector<Tensor> reader;
  const auto for_each_read = [&](const auto& f) {
    for (const Tensor& o : outputs) f(o, Tensor());
    for (const Tensor& t : order)
      if (t.impl().node)
        for (const Tensor& in : t.impl().node->inputs) f(in, t);
  };
  const std::function<std::vector<Tensor>(const Tensor&)> readers = [&](const Tensor& x) {
    if (first_reader.empty()) {
      for_each_read([&](const Tensor& read, const Tensor&) {
        const auto [i, fresh] = read_index.try_emplace(read.impl_ptr().get(), static_cast<int>(first_reader.size()));
        if (fresh) first_reader.push_back(0);
        ++first_reader[static_cast<std::size_t>(*i)];
      });
      std::size_t start = 0;
      for (std::size_t& n : first_reader) start += std::exchange(n, start);
      first_reader.push_back(start);
      reader.resize(start);
      std::vector<std::size_t> filled(first_reader.begin(), first_reader.end() - 1);
      for_each_read([&](const Tensor& read, const Tensor& by) {
        reader[filled[static_cast<std::size_t>(read_index.at(read.impl_ptr().get()))]++] = by;
      });
    }
    const int* i = read_index.find(x.impl_ptr().get());
    if (!i) return std::vector<Tensor>{};
    return std::vector<Tensor>(
        reader.begin() + static_cast<std::ptrdiff_t>(first_reader[static_cast<std::size_t>(*i)]),
        reader.begin() + static_cast<std::ptrdiff_t>(first_reader[static_cast<std::size_t>(*i) + 1]));
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Tensor& t = *it;
    const Tensor* found = cot.find(t.impl_ptr().get());
    if (!found || !t.impl().node || !relevant.contains(t.impl_ptr().get())) continue;
    const Node& node = *t.impl().node;
    AdjointContext context{.needs = std::vector<bool>(node.inputs.size()),
                           .differentiated = differentiable,
                           .sums_over_batch = !per_example_outputs,
                           .readers = &readers};
    for (std::size_t i = 0; i < node.inputs.size(); ++i)
      context.needs[i] = relevant.contains(node.inputs[i].impl_ptr().get());
    if (OpCounter* counter = OpCounter::active()) ++counter->adjoints[std::string(node.op->name)];
    const std::vector<Tensor> grads = node.op->adjoint(node, t, *found, context);  // before cot grows
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!context.needs[i] || !grads[i].defined()) continue;
      if (grads[i].shape() != node.inputs[i].shape())
        fail("{}: internal error, adjoint gives shape {} for input {} of shape {}", node.op->name,
             to_string(grads[i].shape()), i, to_string(node.inputs[i].shape()));
      accumulate(node.inputs[i], match_batching(grads[i], node.inputs[i], per_example_outputs));
    }
  }

  std::vector<Tensor> result;
  for (const Tensor& w : wrt) {
    const Tensor* found = cot.find(w.impl_ptr().get());
    result.push_back(match_batching(found ? *found : zeros(w.shape(), w.dtype(), w.device()), w, per_example_outputs));
  }
  return result;
}

std::vector<Tensor> push_forward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& wrt,
                                 const std::vector<Tensor>& tangents) {
  PerExampleScope per_example;  // tangent rules are per example, like the ops they differentiate
  if (tangents.size() != wrt.size()) fail("jvp: {} tangents for {} variables", tangents.size(), wrt.size());
  const std::vector<Tensor> order = topological_order(outputs);
  PointerMap<Tensor> tangent;
  bool directions = false;  // a batch of tangents for an unbatched variable: one J v per tangent
  for (std::size_t i = 0; i < wrt.size(); ++i) {
    if (!tangents[i].defined()) continue;
    *tangent.try_emplace(wrt[i].impl_ptr().get()).first = tangents[i];
    directions |= tangents[i].is_batched() && !wrt[i].is_batched();
  }
  // A batch of tangents for an unbatched primal meets the batched values its tangents flow through example by
  // example: right in a vmap body, whose batched values are all the one vmap's examples, unless a value reduces over
  // that batch; elsewhere the tangents' batch and the values' would share one axis.
  if (directions) {
    const PointerSet relevant = relevant_to(order, wrt);
    const bool one_batch = detail::in_vmap_body();
    for (const Tensor& t : order)
      if (t.is_batched() && relevant.contains(t.impl_ptr().get()) &&
          (!one_batch || (t.impl().node && t.impl().node->op->reduces_batch)))
        fail(
            "jvp: a batch of tangents (a jvp under vmap) for an unbatched primal that meets batched values: the two "
            "batches would share one axis; push one tangent at a time");
  }

  for (const Tensor& t : order) {
    if (!t.impl().node || tangent.contains(t.impl_ptr().get()) || !is_floating(t.dtype())) continue;
    const Node& node = *t.impl().node;
    std::vector<Tensor> in(node.inputs.size());
    bool any = false;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (const Tensor* found = tangent.find(node.inputs[i].impl_ptr().get())) {
        in[i] = *found;
        any = true;
      }
    if (!any || !node.op->adjoint) continue;  // no gradient flows through the op: no tangent either
    if (!node.op->tangent) fail("{}: internal error, the op has an adjoint but no tangent rule", node.op->name);
    if (OpCounter* counter = OpCounter::active()) ++counter->tangents[std::string(node.op->name)];
    Tensor out = node.op->tangent(node, t, in);
    if (!out.defined()) continue;
    if (out.dtype() != t.dtype())
      fail("{}: internal error, tangent rule gives {} for an output of {}", node.op->name, name_of(out.dtype()),
           name_of(t.dtype()));
    if (out.shape() != t.shape()) out = broadcast_to(out, t.shape());           // an input's tangent, unbroadcast
    if (t.is_batched() && !out.is_batched()) out = broadcast_to_batch(out, t);  // the same for every example
    *tangent.try_emplace(t.impl_ptr().get()).first = out;
  }

  std::vector<Tensor> result;
  for (const Tensor& o : outputs) {
    const Tensor* found = tangent.find(o.impl_ptr().get());
    Tensor r = found ? *found : zeros(o.shape(), o.dtype(), o.device());
    if (o.is_batched() && !r.is_batched()) r = broadcast_to_batch(r, o);
    result.push_back(r);
  }
  return result;
}

namespace detail {

bool differentiating() { return open_transforms > 0; }

IsolatedTrace::IsolatedTrace() : open_transforms_(open_transforms) { open_transforms = 0; }
IsolatedTrace::~IsolatedTrace() { open_transforms = open_transforms_; }

namespace {
std::atomic<std::uint64_t> transforms_made{0};
thread_local std::uint64_t innermost_transform = 0;
}  // namespace

TransformScope::TransformScope() : nested(open_transforms > 0), id(++transforms_made), previous_(innermost_transform) {
  ++open_transforms;
  innermost_transform = id;
}
TransformScope::~TransformScope() {
  --open_transforms;
  innermost_transform = previous_;
}

bool TransformScope::differentiated_by_older(const std::vector<Tensor>& results) const {
  for (const Tensor& r : results)
    if (r.defined() && r.impl().tracked && r.impl().tracked_since < id) return true;
  return false;
}

Tensor no_cotangent(const Tensor& x) {
  Tensor z = zeros(x.shape(), x.dtype(), x.device());
  z.impl().no_cotangent = true;
  return z;
}

Tensor watch(const Tensor& x) {
  Tensor w = apply(identity_op, {x});
  if (!w.impl().tracked) w.impl().tracked_since = innermost_transform ? innermost_transform : ++transforms_made;
  w.impl().tracked = true;
  return w;
}

Tensor release(const Tensor& result, bool keep) {
  // Inside a capture scope the result is part of a function being recorded (a loop's body): its replay needs the
  // graph, and may be differentiated.
  if (keep || result.is_symbolic() || !result.impl().node || CaptureScope::active()) return result;
  auto impl = std::make_shared<TensorImpl>(result.impl());
  impl->node = nullptr;
  impl->tracked = false;
  impl->tracked_since = 0;
  return Tensor(std::move(impl));
}

Tensor scalar_output(const Tensor& out, const char* transform) {
  if (out.is_batched() && !PerExampleScope::active())
    fail(
        "{}: the function returns a batch of scalars; reduce it over the batch (mean, sum, batch_mean) or take "
        "per-example gradients with vmap(grad(f))",
        transform);
  if (!is_floating(out.dtype()))
    fail("{}: the function returns a scalar of dtype {}, which has no gradient; return a floating-point value",
         transform, name_of(out.dtype()));
  if (out.numel() != 1 || out.ndim() != 0)
    fail("{}: the function must return a scalar, got shape {}; use vjp with a cotangent for other shapes", transform,
         to_string(out.shape()));
  return out;
}

void check_differentiable(const Tensor& x, int argnum, const char* transform) {
  if (!is_floating(x.dtype()))
    fail(
        "{}: argument {} is {}, which has no gradient; differentiate with respect to floating-point arguments "
        "(leave it out of argnums, or convert it with astype)",
        transform, argnum, name_of(x.dtype()));
}

std::vector<int> check_argnums(const std::vector<int>& argnums, std::size_t arity, const char* transform) {
  if (argnums.empty()) fail("{}: argnums is empty", transform);
  for (int i : argnums)
    if (i < 0 || static_cast<std::size_t>(i) >= arity)
      fail("{}: argnum {} is out of range for a function of {} arguments", transform, i, arity);
  return argnums;
}

std::vector<Tensor> watch_arguments(std::vector<Tensor>& in, const std::vector<int>& argnums, const char* transform,
                                    bool& outer) {
  std::vector<Tensor> wrt;
  for (int k : check_argnums(argnums, in.size(), transform)) {
    check_differentiable(in[k], k, transform);
    outer |= in[k].impl().tracked;
    in[k] = watch(in[k]);
    wrt.push_back(in[k]);
  }
  return wrt;
}

std::pair<Tensor, std::vector<Tensor>> value_and_grad_flat(const FlatFunction& f, std::vector<Tensor> in,
                                                           const std::vector<int>& argnums) {
  check_argnums(argnums, in.size(), "value_and_grad");
  TransformScope scope;
  bool outer = scope.nested;
  const std::vector<Tensor> wrt = watch_arguments(in, argnums, "grad", outer);
  const std::vector<Tensor> results = f(in);
  if (results.size() != 1) fail("grad: the function returns {} results; it must return one scalar", results.size());
  const Tensor out = scalar_output(results[0], "grad");
  outer |= scope.differentiated_by_older({out});
  std::vector<Tensor> grads = backward({out}, {}, wrt, outer);
  for (Tensor& g : grads) g = release(g, outer);
  return {release(out, outer), std::move(grads)};
}

std::pair<std::vector<Tensor>, FlatPullback> vjp_flat(const FlatFunction& f, std::vector<Tensor> in) {
  TransformScope scope;
  bool outer = scope.nested;
  for (Tensor& x : in) {
    outer |= x.impl().tracked;
    if (is_floating(x.dtype())) x = watch(x);  // an integer primal gets a zero cotangent
  }
  const std::vector<Tensor> out = f(in);
  outer |= scope.differentiated_by_older(out);
  FlatPullback pullback = [out, wrt = in, outer](const std::vector<Tensor>& cotangents) {
    if (cotangents.size() != out.size())
      fail("vjp: the pullback takes one cotangent per result of the function: {} for {}", cotangents.size(),
           out.size());
    TransformScope pull;
    bool keep = outer || pull.nested;
    for (std::size_t i = 0; i < cotangents.size(); ++i) {
      if (!cotangents[i].defined()) fail("vjp: cotangent {} is empty", i);
      keep = keep || cotangents[i].impl().tracked;
    }
    std::vector<Tensor> grads = backward(out, cotangents, wrt, keep);
    for (Tensor& g : grads) g = release(g, keep);
    return grads;
  };
  return {out, std::move(pullback)};
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(identity_op, "identity");

}  // namespace detail
}  // namespace vt
