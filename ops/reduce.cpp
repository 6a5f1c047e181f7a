// Reduction family: sum, mean, max, logsumexp, sum_to; and the scan cumsum.
#include "reduce.hpp"

#include "../core/graph.hpp"
#include "tangent.hpp"
#include <cmath>

#include "batch.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "stop_gradient.hpp"

namespace vt {

namespace {

// The reduced axes (sorted, unique) and whether they are kept with size 1.
struct ReduceAttrs {
  bool keepdims;
  Axes axes;
  auto fields() { return std::tie(keepdims, axes); }
};

// The input shape with the reduced axes set to 1.
Shape kept_shape(const Shape& in, const ReduceAttrs& a) {
  Shape s = in;
  for (auto axis : a.axes) s[static_cast<std::size_t>(axis)] = 1;
  return s;
}

ExampleType reduce_type(std::span<const ExampleType> in, const Attrs& attrs) {
  const ReduceAttrs a = unpack_attrs<ReduceAttrs>(attrs);
  Shape kept = kept_shape(in[0].shape, a);
  if (a.keepdims) return {in[0].dtype, kept};
  Shape s;
  for (std::size_t d = 0, k = 0; d < in[0].shape.size(); ++d) {
    if (k < a.axes.size() && a.axes[k] == static_cast<std::int64_t>(d)) ++k;
    else s.push_back(in[0].shape[d]);
  }
  return {in[0].dtype, s};
}

template <ReduceKind Kind>
void reduce_forward(const KernelArgs& k) {
  const ReduceAttrs a = unpack_attrs<ReduceAttrs>(k.attrs);
  Shape kept = kept_shape(Shape(k.in[0].shape.begin() + static_cast<std::ptrdiff_t>(k.lead()), k.in[0].shape.end()), a);
  if (k.batched) kept.insert(kept.begin(), k.batch);
  k.backend.reduce(Kind, k.in[0], reshaped_view(k.out, kept));
}

// The output cotangent broadcast back over the reduced axes.
Tensor spread(const Node& n, const Tensor& g) {
  const Shape& in = n.inputs[0].shape();
  return broadcast_to(reshape(g, kept_shape(in, unpack_attrs<ReduceAttrs>(n.attrs))), in);
}

}  // namespace
const OpDef sum_op{.name = "sum",
                   .inputs = 1,
                   .infer = reduce_type,
                   .forward = reduce_forward<ReduceKind::sum>,
                   .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                                 const AdjointContext&) { return std::vector<Tensor>{spread(n, g)}; },
                   .tangent = linear_tangent,
                   .integers = true};
namespace {
const OpDef max_op{.name = "max",
                   .inputs = 1,
                   .infer = reduce_type,
                   .forward = reduce_forward<ReduceKind::max>,
                   .adjoint =
                       [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext&) {
                         const Tensor& x = n.inputs[0];
                         const ReduceAttrs a = unpack_attrs<ReduceAttrs>(n.attrs);
                         const Tensor hit = astype(equal(x, spread(n, y)), x.dtype());
                         const Tensor count = spread(n, sum(hit, a.axes, a.keepdims));
                         return std::vector<Tensor>{spread(n, g) * hit / count};
                       },
                   // The maximal elements' tangents, averaged where several tie (as the adjoint shares).
                   .tangent =
                       [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
                         const Tensor hit = astype(equal(n.inputs[0], spread(n, y)), y.dtype());
                         return apply(sum_op, {t[0] * hit}, n.attrs) / apply(sum_op, {hit}, n.attrs);
                       },
                   .integers = true};

// ---------------------------------------------------------------- scans
// cumsum's axis (per example, normalised) and direction: `reverse` sums from the end back, which
// is cumsum's adjoint (and cumsum the reversed one's).
struct CumsumAttrs {
  std::int64_t axis;
  bool reverse;
  auto fields() { return std::tie(axis, reverse); }
};

Tensor scan(const Tensor& x, std::int64_t axis, bool reverse);

const OpDef cumsum_op{.name = "cumsum",
                      .inputs = 1,
                      .infer = same_type,
                      .forward =
                          [](const KernelArgs& k) {
                            const CumsumAttrs a = unpack_attrs<CumsumAttrs>(k.attrs);
                            k.backend.cumsum(k.in[0], k.out, static_cast<int>(k.lead()) + static_cast<int>(a.axis),
                                             a.reverse);
                          },
                      .adjoint =
                          [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
                            const CumsumAttrs a = unpack_attrs<CumsumAttrs>(n.attrs);
                            return std::vector<Tensor>{scan(g, a.axis, !a.reverse)};
                          },
                      .tangent = linear_tangent};

Tensor scan(const Tensor& x, std::int64_t axis, bool reverse) {
  return apply(cumsum_op, {x}, pack_attrs(CumsumAttrs{axis, reverse}));
}

Tensor reduce(const OpDef& op, const Tensor& x, const Axes& axes, bool keepdims) {
  ReduceAttrs a{keepdims, {}};
  for (int ax : normalize_axes(axes, x.ndim(), op.name)) a.axes.push_back(ax);
  return apply(op, {x}, pack_attrs(std::move(a)));
}

// Outside vmap, a reduction over all axes of a batched tensor includes the batch.
bool over_batch_too(const Tensor& x, const Axes& axes) {
  return axes.empty() && x.is_batched() && !PerExampleScope::active();
}

// The same reduction for each example (never over the batch).
template <class Reduction>
Tensor per_example(Reduction reduction) {
  PerExampleScope scope;
  return reduction();
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
  if (x.defined() && is_boolean(x.dtype())) return sum(astype(x, DType::i64), axes, keepdims);  // a count
  if (over_batch_too(x, axes)) return batch_sum(per_example([&] { return sum(x, axes, keepdims); }));
  return reduce(sum_op, x, axes, keepdims);
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
  if (!is_floating(x.dtype())) return mean(astype(x, DType::f64), axes, keepdims);  // as numpy: a float64 mean
  if (over_batch_too(x, axes)) return batch_mean(per_example([&] { return mean(x, axes, keepdims); }));
  if (x.numel() == 0) fail("mean: reduction over an empty tensor of shape {}", to_string(x.shape()));
  const Tensor s = sum(x, axes, keepdims);
  const std::int64_t count = x.numel() / std::max<std::int64_t>(s.numel(), 1);
  return s * (1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdims) {
  if (over_batch_too(x, axes)) return batch_max(per_example([&] { return max(x, axes, keepdims); }));
  for (int ax : normalize_axes(axes, x.ndim(), "max"))
    if (x.shape()[ax] == 0) fail("max: reduction over an empty axis {} of shape {}", ax, to_string(x.shape()));
  if (is_boolean(x.dtype())) return any(x, axes, keepdims);
  return reduce(max_op, x, axes, keepdims);
}

// Counts of the true elements, which are defined over no elements too (where max is not).
Tensor any(const Tensor& x, const Axes& axes, bool keepdims) {
  if (!x.defined()) fail("any: undefined tensor operand");
  return greater(sum(astype(x, DType::boolean), axes, keepdims), Tensor::from_ints({0}, {}, DType::i64, x.device()));
}
Tensor all(const Tensor& x, const Axes& axes, bool keepdims) {
  if (!x.defined()) fail("all: undefined tensor operand");
  return equal(sum(logical_not(x), axes, keepdims), Tensor::from_ints({0}, {}, DType::i64, x.device()));
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
  if (!x.defined()) fail("logsumexp: undefined tensor operand");
  (void)normalize_axes(axes, x.ndim(), "logsumexp");  // bad axes are named as logsumexp's
  if (!is_floating(x.dtype()))  // as apply words it for the float-only ops (else exp's error would name exp)
    fail("logsumexp: takes floating-point tensors, got {} (input 0); convert it with astype", name_of(x.dtype()));
  if (x.numel() == 0) return log(sum(exp(x), axes, keepdims));  // log 0 = -inf over empty axes
  // The maximum, where finite, is subtracted before exp; an infinite or NaN maximum is left in
  // (it gives the result itself: -inf, +inf or NaN) instead of making x - max NaN.
  const Tensor m = stop_gradient(max(x, axes, true));
  const Tensor finite = less(abs(m), Tensor::scalar(INFINITY, m.dtype(), m.device()));
  const Tensor shift = where(finite, m, zeros({}, m.dtype(), m.device()));
  const Tensor s = sum(exp(x - shift), axes, keepdims);
  return log(s) + reshape(shift, s.shape());
}

Tensor cumsum(const Tensor& x, std::int64_t axis) {
  if (!x.defined()) fail("cumsum: undefined tensor operand");
  return scan(x, normalize_axis(axis, x.ndim(), "cumsum"), false);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (x.ndim() < shape.size() || broadcast_shapes(shape, x.shape(), "sum_to") != x.shape())
    fail("sum_to: shape {} does not broadcast to {}, so {} cannot be summed to it", to_string(shape),
         to_string(x.shape()), to_string(x.shape()));
  const std::size_t extra = x.ndim() - shape.size();
  Axes axes;
  for (std::size_t d = 0; d < x.ndim(); ++d)
    if (d < extra || (shape[d - extra] == 1 && x.shape()[d] != 1)) axes.push_back(static_cast<std::int64_t>(d));
  return reshape(sum(x, axes, true), shape);
}

bool is_sum_over(const OpDef& op, const Attrs& attrs, const Axes& axes) {
  if (&op != &sum_op) return false;
  const ReduceAttrs a = unpack_attrs<ReduceAttrs>(attrs);
  return a.axes == axes;
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(sum_op, "sum", "keepdims axes[]");
VT_REGISTER_OP(max_op, "max", "keepdims axes[]");
VT_REGISTER_OP(cumsum_op, "cumsum", "axis reverse");

}  // namespace vt
