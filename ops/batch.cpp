// Batch family: as_batch / unbatch (aliases), batch_sum / batch_mean / batch_max (reduce over the
// batch axis), broadcast_to_batch (its adjoint). Shape rules are per example, so B never appears.
#include "batch.hpp"

#include <optional>

#include "../core/graph.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

// Multiplies a view in place by 1/B (B known only when the kernel runs): the whole call's B, also
// when the kernel sees a chunk of its examples (a partial mean, which the chunks' sum completes).
void divide_by_batch(const KernelArgs& k, const View& v) {
  Storage factor(k.backend.device(), size_of(v.dtype));
  const View scalar{v.dtype, factor.data, {}, {}};
  k.backend.fill(scalar, 1.0 / static_cast<double>(k.whole_batch));
  k.backend.binary(BinaryKind::mul, v, expand_view(scalar, v, false), v);
}

template <ReduceKind Kind, bool Mean>
void batch_reduce_forward(const KernelArgs& k) {
  Shape kept = k.out.shape;
  kept.insert(kept.begin(), 1);
  const View out = reshaped_view(k.out, kept);
  k.backend.reduce(Kind, k.in[0], out);
  if (Mean) divide_by_batch(k, out);
}

// broadcast_to_batch's attribute: divide by B (the adjoint of batch_mean) or not (of batch_sum).
struct SpreadAttrs {
  bool mean;
  auto fields() { return std::tie(mean); }
};

const OpDef broadcast_to_batch_op{
    .name = "broadcast_to_batch",
    .inputs = 2,
    .infer = same_type,
    .forward =
        [](const KernelArgs& k) {
          k.backend.copy(k.in[0], k.out);
          if (unpack_attrs<SpreadAttrs>(k.attrs).mean) divide_by_batch(k, k.out);
        },
    // A value every example shares gets the sum of their cotangents where the differentiated outputs are summed over
    // the batch; where they are per example (grad inside vmap), each example keeps its own, as backward keeps them
    // for an unbatched variable (the value may be per example where it was recorded: a loop body's).
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& context) {
          if (unpack_attrs<SpreadAttrs>(n.attrs).mean) return std::vector<Tensor>{batch_mean(g), Tensor()};
          return std::vector<Tensor>{context.sums_over_batch ? batch_sum(g) : g, Tensor()};
        },
    // Linear in x; `like` only gives the batch.
    .tangent =
        [](const Node& n, const Tensor&, const std::vector<Tensor>& t) {
          return t[0].defined() ? apply(*n.op, {t[0], n.inputs[1]}, n.attrs) : Tensor();
        },
    .mixed_dtypes = true,
    .handle_inputs = 0b10,
    .integers = true,
    .booleans = true};

const OpDef batch_sum_op{
    .name = "batch_sum",
    .inputs = 1,
    .infer = same_type,
    .forward = batch_reduce_forward<ReduceKind::sum, false>,
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{broadcast_to_batch(g, n.inputs[0])}; },
    .tangent = linear_tangent,
    .reduces_batch = true,
    .integers = true};

const OpDef batch_mean_op{
    .name = "batch_mean",
    .inputs = 1,
    .infer = same_type,
    .forward = batch_reduce_forward<ReduceKind::sum, true>,
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
          return std::vector<Tensor>{apply(broadcast_to_batch_op, {g, n.inputs[0]}, pack_attrs(SpreadAttrs{true}))};
        },
    .tangent = linear_tangent,
    .reduces_batch = true};

const OpDef batch_max_op{.name = "batch_max",
                         .inputs = 1,
                         .infer = same_type,
                         .forward = batch_reduce_forward<ReduceKind::max, false>,
                         .adjoint =
                             [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext&) {
                               const Tensor& x = n.inputs[0];
                               const Tensor hit = astype(equal(x, broadcast_to_batch(y, x)), x.dtype());
                               return std::vector<Tensor>{broadcast_to_batch(g / batch_sum(hit), x) * hit};
                             },
                         // The maximal examples' tangents, averaged where several tie.
                         .tangent =
                             [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
                               const Tensor hit =
                                   astype(equal(n.inputs[0], broadcast_to_batch(y, n.inputs[0])), y.dtype());
                               return batch_sum(t[0] * hit) / batch_sum(hit);
                             },
                         .reduces_batch = true,
                         .batch_partials = ReduceKind::max,
                         .integers = true};

// as_batch and unbatch see the same storage with the batch axis inside or outside the shape.
// They are eager-only aliases, recorded (for gradients) without going through apply.
Tensor realias(Tensor x, Shape shape, bool batched, std::int64_t batch, const OpDef& op);

const OpDef as_batch_op{
    .name = "as_batch",
    .inputs = 1,
    .infer = nullptr,
    .forward = nullptr,
    .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{unbatch(g)}; },
    .tangent = [](const Node&, const Tensor&, const std::vector<Tensor>& t) { return as_batch(t[0]); },
    .reapply = [](const std::vector<Tensor>& in, const Attrs&) { return as_batch(in[0]); }};
const OpDef unbatch_op{
    .name = "unbatch",
    .inputs = 1,
    .infer = nullptr,
    .forward = nullptr,
    .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{g.is_batched() ? g : as_batch(g)}; },
    .tangent = [](const Node&, const Tensor&, const std::vector<Tensor>& t) { return unbatch(t[0]); },
    .reapply = [](const std::vector<Tensor>& in, const Attrs&) { return unbatch(in[0]); }};

Tensor realias(Tensor x, Shape shape, bool batched, std::int64_t batch, const OpDef& op) {
  std::vector<Tensor> read{std::move(x)};
  CaptureScope::read(read);  // inside a function being recorded, or a cond's branch (which may replace x)
  x = std::move(read[0]);
  auto impl = std::make_shared<TensorImpl>(x.impl());
  impl->shape = std::move(shape);
  impl->batched = batched;
  impl->batch = batched ? batch : 0;
  impl->node = nullptr;
  Tensor result(std::move(impl));
  // Recorded for gradients, and inside a capture scope for the replay of the function recorded there.
  if (CaptureScope::wrote(result) || x.impl().tracked) result.impl().node = std::make_shared<Node>(Node{&op, {}, {x}});
  return result;
}

// as_batch and unbatch of a traced tensor, while jit traces: a plain tensor's leading axis becomes
// the batch (or back). Its size is in jit's cache key (a plain argument's whole shape is), so the
// plan records it and runs at that batch size only. Aliases, recorded for the plan and for gradients.
struct FixedBatchAttrs {
  std::int64_t batch;
  auto fields() { return std::tie(batch); }
};

Tensor traced_alias(Tensor x, Shape shape, bool batched, std::int64_t batch, const OpDef& op) {
  std::vector<Tensor> read{std::move(x)};
  CaptureScope::read(read);
  x = std::move(read[0]);
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = x.dtype();
  impl->shape = std::move(shape);
  impl->batched = batched;
  impl->batch = batched ? batch : 0;  // known while tracing: see known_batch_size
  impl->device = x.device();
  impl->tracked = x.impl().tracked;
  impl->tracked_since = x.impl().tracked_since;
  impl->node = std::make_shared<Node>(Node{&op, pack_attrs(FixedBatchAttrs{batch}), {x}});
  Tensor result(std::move(impl));
  CaptureScope::wrote(result);
  return result;
}

Tensor traced_as_batch(const Tensor& x);
Tensor traced_unbatch(const Tensor& x, std::int64_t batch);

const OpDef traced_as_batch_op{
    .name = "as_batch",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs&) {
          return ExampleType{in[0].dtype, Shape(in[0].shape.begin() + 1, in[0].shape.end())};
        },
    .forward = nullptr,
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
          const std::int64_t batch = unpack_attrs<FixedBatchAttrs>(n.attrs).batch;
          return std::vector<Tensor>{g.is_symbolic() && !g.impl().deferred ? traced_unbatch(g, batch) : unbatch(g)};
        },
    .tangent = [](const Node&, const Tensor&, const std::vector<Tensor>& t) { return as_batch(t[0]); },
    .aliases_input = true,
    .reapply = [](const std::vector<Tensor>& in, const Attrs&) { return as_batch(in[0]); }};

const OpDef traced_unbatch_op{
    .name = "unbatch",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          Shape shape = in[0].shape;
          shape.insert(shape.begin(), unpack_attrs<FixedBatchAttrs>(a).batch);
          return ExampleType{in[0].dtype, shape};
        },
    .forward = nullptr,
    .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{g.is_batched() ? g : as_batch(g)}; },
    .tangent = [](const Node& n, const Tensor&,
                  const std::vector<Tensor>& t) { return detail::unbatch_like(t[0], n.inputs[0]); },
    .aliases_input = true,
    .reapply =
        [](const std::vector<Tensor>& in, const Attrs& a) {
          const Tensor& x = in[0];
          return x.is_symbolic() && !x.impl().deferred ? traced_unbatch(x, unpack_attrs<FixedBatchAttrs>(a).batch)
                                                       : unbatch(x);
        }};

Tensor traced_as_batch(const Tensor& x) {
  return traced_alias(x, Shape(x.shape().begin() + 1, x.shape().end()), true, x.shape(0), traced_as_batch_op);
}
Tensor traced_unbatch(const Tensor& x, std::int64_t batch) {
  Shape shape = x.shape();
  shape.insert(shape.begin(), batch);
  return traced_alias(x, shape, false, batch, traced_unbatch_op);
}

Tensor check_batched(const Tensor& x, const char* op) {
  if (!x.is_batched()) fail("{}: the tensor of shape {} is not batched", op, to_string(x.shape()));
  return x;
}

}  // namespace

Tensor as_batch(const Tensor& x) {
  if (x.is_batched()) fail("as_batch: the tensor is already batched (nested batches are not supported)");
  if (x.ndim() == 0) fail("as_batch: a scalar has no leading axis to use as the batch");
  detail::materialize(x);  // computed from constants while jit traces: its values, now
  if (x.is_symbolic()) return traced_as_batch(x);
  return realias(x, Shape(x.shape().begin() + 1, x.shape().end()), true, x.shape(0), as_batch_op);
}

Tensor unbatch(const Tensor& x) {
  check_batched(x, "unbatch");
  detail::materialize(x);
  if (x.is_symbolic()) {
    if (const std::optional<std::int64_t> batch = detail::known_batch_size(x)) return traced_unbatch(x, *batch);
    fail(
        "unbatch: a batched argument of a jitted function has a run-time batch size, so its plain [B, ...] form "
        "cannot be traced; reduce over the batch (batch_mean, mean, ...) or return the batched tensor instead, or "
        "pass the argument plain ([B, ...], mapped by vmap inside the function: one trace per batch size)");
  }
  Shape shape = x.shape();
  shape.insert(shape.begin(), x.batch_size());
  return realias(x, shape, false, 0, unbatch_op);
}

namespace detail {

std::int64_t fixed_batch(const OpDef& op, const Attrs& attrs) {
  return &op == &traced_as_batch_op || &op == &traced_unbatch_op ? unpack_attrs<FixedBatchAttrs>(attrs).batch : -1;
}

std::optional<std::int64_t> known_batch_size(const Tensor& x) {
  if (!x.is_batched()) return std::nullopt;
  if (!x.is_symbolic() || x.impl().deferred) return x.impl().batch;
  if (x.impl().node && &*x.impl().node->op == &traced_as_batch_op)
    return fixed_batch(*x.impl().node->op, x.impl().node->attrs);
  if (x.impl().batch > 0) return x.impl().batch;  // computed from as_batch of a plain argument (see apply)
  return std::nullopt;
}

Tensor unbatch_like(const Tensor& x, const Tensor& like) {
  check_batched(x, "unbatch");
  if (!x.is_symbolic() || x.impl().deferred) return unbatch(x);
  if (const std::optional<std::int64_t> batch = known_batch_size(like)) return traced_unbatch(x, *batch);
  return unbatch(x);  // raises, saying why
}

}  // namespace detail

Tensor batch_sum(const Tensor& x) {
  check_batched(x, "batch_sum");
  return apply(batch_sum_op, {is_boolean(x.dtype()) ? astype(x, DType::i64) : x});  // as sum: a count
}
Tensor batch_mean(const Tensor& x) {
  check_batched(x, "batch_mean");
  return apply(batch_mean_op, {is_floating(x.dtype()) ? x : astype(x, DType::f64)});  // as mean
}
Tensor batch_max(const Tensor& x) {
  check_batched(x, "batch_max");
  if (is_boolean(x.dtype()))
    return astype(apply(batch_max_op, {astype(x, DType::i32)}), DType::boolean);  // as max: any
  return apply(batch_max_op, {x});
}

Tensor broadcast_to_batch(const Tensor& x, const Tensor& like) {
  check_batched(like, "broadcast_to_batch");
  if (x.is_batched()) return x;
  return apply(broadcast_to_batch_op, {x, like}, pack_attrs(SpreadAttrs{false}));
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(broadcast_to_batch_op, "broadcast_to_batch", "mean");
VT_REGISTER_OP(batch_sum_op, "batch_sum");
VT_REGISTER_OP(batch_mean_op, "batch_mean");
VT_REGISTER_OP(batch_max_op, "batch_max");
VT_REGISTER_OP(as_batch_op, "as_batch");
VT_REGISTER_OP(unbatch_op, "unbatch");
VT_REGISTER_OP(traced_as_batch_op, "traced_as_batch", "batch");
VT_REGISTER_OP(traced_unbatch_op, "traced_unbatch", "batch");

}  // namespace vt
