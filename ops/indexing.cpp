// Indexing family: slice (and its adjoint, slice_scatter), concatenate, stack, diag.
#include "indexing.hpp"

#include <algorithm>

#include "../core/graph.hpp"
#include "tangent.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "layout.hpp"

namespace vt {

namespace {

// The strided window [start : start + count*step : step] along physical axis `axis` of v.
View window(View v, std::size_t axis, std::int64_t start, std::int64_t count, std::int64_t step) {
  v.data = static_cast<char*>(v.data) + start * v.strides[axis] * static_cast<std::int64_t>(size_of(v.dtype));
  v.shape[axis] = count;
  if (count > 1)
    v.strides[axis] *= step;  // in range: step * (count - 1) < the axis length (a huge step takes one element)
  return v;
}

// slice's and slice_scatter's attributes: the window [start : start + count*step : step] of an
// axis of `length` elements.
struct Window {
  std::int64_t axis, start, step, count, length;
  auto fields() { return std::tie(axis, start, step, count, length); }
  // The window of a kernel's view `v` (whose axes follow the batch axis, if any).
  View of(const View& v, const KernelArgs& k) const {
    return window(v, k.lead() + static_cast<std::size_t>(axis), start, count, step);
  }
};

// `t` with axis `axis` resized to `size`.
ExampleType resized(const ExampleType& t, std::int64_t axis, std::int64_t size) {
  Shape s = t.shape;
  s[static_cast<std::size_t>(axis)] = size;
  return {t.dtype, s};
}

Tensor slice_scatter(const Tensor& g, const Attrs& a);

const OpDef slice_op{
    .name = "slice",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          const Window w = unpack_attrs<Window>(a);
          return resized(in[0], w.axis, w.count);
        },
    .forward = [](const KernelArgs& k) { k.backend.copy(unpack_attrs<Window>(k.attrs).of(k.in[0], k), k.out); },
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{slice_scatter(g, n.attrs)}; },
    .tangent = linear_tangent,
    .integers = true,
    .booleans = true};

// The adjoint of slice: zeros of the sliced tensor's shape with g written into the window.
const OpDef slice_scatter_op{.name = "slice_scatter",
                             .inputs = 1,
                             .infer =
                                 [](std::span<const ExampleType> in, const Attrs& a) {
                                   const Window w = unpack_attrs<Window>(a);
                                   return resized(in[0], w.axis, w.length);
                                 },
                             .forward =
                                 [](const KernelArgs& k) {
                                   k.backend.fill(k.out, 0.0);
                                   k.backend.copy(k.in[0], unpack_attrs<Window>(k.attrs).of(k.out, k));
                                 },
                             .adjoint =
                                 [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
                                   const Window w = unpack_attrs<Window>(n.attrs);
                                   // Stops just past the last element taken: start + step * count may overflow.
                                   const std::int64_t stop =
                                       w.count == 0 ? w.start : w.start + w.step * (w.count - 1) + 1;
                                   return std::vector<Tensor>{slice(g, w.axis, w.start, stop, w.step)};
                                 },
                             .tangent = linear_tangent,
                             .integers = true,
                             .booleans = true};

Tensor slice_scatter(const Tensor& g, const Attrs& a) { return apply(slice_scatter_op, {g}, a); }

struct ConcatenateAttrs {
  std::int64_t axis;
  auto fields() { return std::tie(axis); }
};

}  // namespace
const OpDef concatenate_op{
    .name = "concatenate",
    .inputs = OpDef::any_inputs,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          const auto axis = static_cast<std::size_t>(unpack_attrs<ConcatenateAttrs>(a).axis);
          Shape s = in[0].shape;
          for (std::size_t i = 1; i < in.size(); ++i) {
            Shape other = in[i].shape;
            if (other.size() == s.size()) other[axis] = s[axis];
            if (other != s)
              fail("concatenate: shapes {} and {} differ outside axis {}", to_string(in[0].shape),
                   to_string(in[i].shape), axis);
            s[axis] = checked_add(s[axis], in[i].shape[axis], "concatenate", "the joined axis");
          }
          return ExampleType{in[0].dtype, s};
        },
    .forward =
        [](const KernelArgs& k) {
          const auto axis = k.lead() + static_cast<std::size_t>(unpack_attrs<ConcatenateAttrs>(k.attrs).axis);
          std::int64_t start = 0;
          for (const View& v : k.in) {
            k.backend.copy(v, window(k.out, axis, start, v.shape[axis], 1));
            start += v.shape[axis];
          }
        },
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          const std::int64_t axis = unpack_attrs<ConcatenateAttrs>(n.attrs).axis;
          // A cotangent joined at the same seams from pieces that stand for no cotangent (autodiff's
          // no_cotangent) gives those inputs none.
          std::vector<bool> none(n.inputs.size(), false);
          if (const Node* joined = g.impl().node.get(); joined && joined->op == &concatenate_op &&
                                                        joined->inputs.size() == n.inputs.size() &&
                                                        unpack_attrs<ConcatenateAttrs>(joined->attrs).axis == axis) {
            bool seams = true;
            for (std::size_t i = 0; i < n.inputs.size(); ++i)
              seams = seams && joined->inputs[i].shape() == n.inputs[i].shape();
            for (std::size_t i = 0; seams && i < n.inputs.size(); ++i) none[i] = joined->inputs[i].impl().no_cotangent;
          }
          std::vector<Tensor> out;
          std::int64_t start = 0;
          for (std::size_t i = 0; i < n.inputs.size(); ++i) {
            const std::int64_t len = n.inputs[i].shape()[static_cast<std::size_t>(axis)];
            out.push_back(ctx.needs[i] && !none[i] ? slice(g, axis, start, start + len) : Tensor());
            start += len;
          }
          return out;
        },
    .tangent = linear_tangent,
    .integers = true,
    .booleans = true};
namespace {

Tensor diag_embed(const Tensor& v, std::int64_t rows, std::int64_t cols);

const OpDef diagonal_op{.name = "diagonal",
                        .inputs = 1,
                        .infer =
                            [](std::span<const ExampleType> in, const Attrs&) {
                              Shape s(in[0].shape.begin(), in[0].shape.end() - 1);
                              s.back() = std::min(in[0].shape[in[0].shape.size() - 2], in[0].shape.back());
                              return ExampleType{in[0].dtype, s};
                            },
                        .forward = [](const KernelArgs& k) { k.backend.copy(diagonal_view(k.in[0]), k.out); },
                        .adjoint =
                            [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
                              const Shape& s = n.inputs[0].shape();
                              return std::vector<Tensor>{diag_embed(g, s[s.size() - 2], s.back())};
                            },
                        .tangent = linear_tangent,
                        .integers = true,
                        .booleans = true};

// Leading axes are kept; the last one becomes the diagonal of a [rows, cols] matrix.
struct DiagEmbedAttrs {
  std::int64_t rows, cols;
  auto fields() { return std::tie(rows, cols); }
};

const OpDef diag_embed_op{.name = "diag_embed",
                          .inputs = 1,
                          .infer =
                              [](std::span<const ExampleType> in, const Attrs& a) {
                                const DiagEmbedAttrs d = unpack_attrs<DiagEmbedAttrs>(a);
                                Shape s = in[0].shape;
                                s.back() = d.rows;
                                s.push_back(d.cols);
                                return ExampleType{in[0].dtype, s};
                              },
                          .forward =
                              [](const KernelArgs& k) {
                                k.backend.fill(k.out, 0.0);
                                k.backend.copy(k.in[0], diagonal_view(k.out));
                              },
                          .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                                        const AdjointContext&) { return std::vector<Tensor>{diagonal(g)}; },
                          .tangent = linear_tangent,
                          .integers = true,
                          .booleans = true};

// 1 on and below (lower) or above (upper) the k-th diagonal, else 0.
Tensor triangle_mask(std::int64_t rows, std::int64_t cols, std::int64_t k, bool lower, DType dtype, Device device) {
  std::vector<double> m(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m[static_cast<std::size_t>(i * cols + j)] = lower ? j - i <= k : j - i >= k;
  return Tensor::from_vector(m, {rows, cols}, dtype, device);
}

Tensor triangle(const Tensor& x, std::int64_t k, bool lower, const char* op) {
  if (x.ndim() < 2) fail("{}: needs a tensor of rank >= 2, got shape {}", op, to_string(x.shape()));
  if (x.numel() == 0) return x;  // nothing to select; its mask could be huge ([2^62, 0] is empty)
  // Selected, not multiplied: an Inf or NaN outside the triangle gives 0, as in numpy.
  return where(triangle_mask(x.shape(-2), x.shape(-1), k, lower, x.dtype(), x.device()), x,
               zeros({}, x.dtype(), x.device()));
}

Tensor diag_embed(const Tensor& v, std::int64_t rows, std::int64_t cols) {
  return apply(diag_embed_op, {v}, pack_attrs(DiagEmbedAttrs{rows, cols}));
}

}  // namespace

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step) {
  const int ax = normalize_axis(axis, x.ndim(), "slice");
  if (step <= 0) fail("slice: step must be positive, got {}", step);
  const std::int64_t len = x.shape()[static_cast<std::size_t>(ax)];
  auto clamp = [len](std::int64_t i) { return std::clamp(i < 0 ? i + len : i, std::int64_t{0}, len); };
  const std::int64_t lo = clamp(start), hi = clamp(stop);
  const std::int64_t count = hi > lo ? (hi - lo - 1) / step + 1 : 0;  // ceil((hi - lo) / step), without overflow
  if (lo == 0 && count == len && step == 1) return x;
  return apply(slice_op, {x}, pack_attrs(Window{ax, lo, step, count, len}));
}

std::optional<detail::SliceWindow> detail::unit_slice_window(const Tensor& t) {
  if (!t.defined() || !t.impl().node || t.impl().node->op != &slice_op) return std::nullopt;
  const Window w = unpack_attrs<Window>(t.impl().node->attrs);
  if (w.step != 1 && w.count > 1) return std::nullopt;
  return detail::SliceWindow{w.axis, w.start, w.start + w.count};
}

Tensor detail::concatenate_pieces(const std::vector<Tensor>& pieces, std::int64_t axis) {
  Tensor t = concatenate(pieces, axis);
  if (pieces.size() > 1 && !t.impl().node)
    t.impl().node = std::make_shared<Node>(Node{
        &concatenate_op, pack_attrs(ConcatenateAttrs{normalize_axis(axis, pieces[0].ndim(), "concatenate")}), pieces});
  return t;
}

Tensor concatenate(const std::vector<Tensor>& xs, std::int64_t axis) {
  if (xs.empty()) fail("concatenate: needs at least one tensor");
  for (const Tensor& x : xs)
    if (x.ndim() != xs[0].ndim() || x.ndim() == 0)
      fail("concatenate: tensors of shapes {} and {} have different ranks (or are scalars)", to_string(xs[0].shape()),
           to_string(x.shape()));
  const int ax = normalize_axis(axis, xs[0].ndim(), "concatenate");
  DType d = xs[0].dtype();
  for (const Tensor& x : xs) d = promote(d, x.dtype());
  std::vector<Tensor> in;
  for (const Tensor& x : xs) in.push_back(astype(x, d));
  if (in.size() == 1) return in[0];
  return apply(concatenate_op, std::move(in), pack_attrs(ConcatenateAttrs{ax}));
}

Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis) {
  if (xs.empty()) fail("stack: needs at least one tensor");
  const int ax = normalize_axis(axis, xs[0].ndim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& x : xs) {
    if (x.shape() != xs[0].shape())
      fail("stack: shapes {} and {} differ", to_string(xs[0].shape()), to_string(x.shape()));
    Shape s = x.shape();
    s.insert(s.begin() + ax, 1);
    expanded.push_back(reshape(x, s));
  }
  return concatenate(expanded, ax);
}

Tensor diag(const Tensor& x) {
  if (x.ndim() == 1) return diag_embed(x, x.shape()[0], x.shape()[0]);
  if (x.ndim() == 2) return apply(diagonal_op, {x});
  fail("diag: needs a vector or a matrix, got shape {}", to_string(x.shape()));
}

Tensor diagonal(const Tensor& x) {
  if (x.ndim() < 2) fail("diagonal: needs a tensor of rank >= 2, got shape {}", to_string(x.shape()));
  return apply(diagonal_op, {x});
}

Tensor tril(const Tensor& x, std::int64_t k) { return triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, std::int64_t k) { return triangle(x, k, false, "triu"); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(slice_op, "slice", "axis start step count length");
VT_REGISTER_OP(slice_scatter_op, "slice_scatter", "axis start step count length");
VT_REGISTER_OP(concatenate_op, "concatenate", "axis");
VT_REGISTER_OP(diagonal_op, "diagonal");
VT_REGISTER_OP(diag_embed_op, "diag_embed", "rows cols");

}  // namespace vt
