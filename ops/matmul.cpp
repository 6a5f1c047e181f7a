// Matmul family: numpy matmul semantics lowered to one strided-batched GEMM, with transposes as
// GEMM flags, and a batch that shares one operand folded into a single GEMM.
#include "matmul.hpp"

#include <limits>

#include "../core/graph.hpp"
#include "tangent.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"

namespace vt {

namespace {

// op(a) op(b), where op swaps the last two axes of an operand whose flag is set.
// `symmetric`: op(a) op(b) is known to be symmetric (matmul_symmetric); `lower_only`: and only its
// lower triangle is ever read (matmul_lower_only).
struct MatmulAttrs {
  bool transpose_a = false, transpose_b = false;
  bool symmetric = false, lower_only = false;
  auto fields() { return std::tie(transpose_a, transpose_b, symmetric, lower_only); }
};

// Per-example shapes as matrices: a vector is a row on the left, a column on the right; a flagged
// operand is seen transposed.
Shape transposed(Shape s) {
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}
Shape as_left(Shape s, bool t = false) {
  if (s.size() == 1) s.insert(s.begin(), 1);
  return t ? transposed(s) : s;
}
Shape as_right(Shape s, bool t = false) {
  if (s.size() == 1) s.push_back(1);
  return t ? transposed(s) : s;
}

ExampleType matmul_type_named(std::string_view op, std::span<const ExampleType> in, const Attrs& attrs) {
  const auto [ta, tb, symmetric, lower_only] = unpack_attrs<MatmulAttrs>(attrs);
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  if (a.empty() || b.empty())
    fail("{}: operands must have rank >= 1, got shapes {} and {}", op, to_string(a), to_string(b));
  if ((ta && a.size() < 2) || (tb && b.size() < 2))
    fail("{}: only matrices can be transposed, got shapes {} and {}", op, to_string(a), to_string(b));
  const Shape a2 = as_left(a, ta), b2 = as_right(b, tb);
  if (a2.back() != b2[b2.size() - 2])
    fail("{}: inner dimensions differ for shapes {}{} and {}{}", op, to_string(a), ta ? " (transposed)" : "",
         to_string(b), tb ? " (transposed)" : "");
  Shape out = broadcast_shapes(batch_axes(a2), batch_axes(b2), op);
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2.back());
  return {in[0].dtype, out};
}

ExampleType matmul_type(std::span<const ExampleType> in, const Attrs& attrs) {
  return matmul_type_named("matmul", in, attrs);
}

// Folding multiplies one GEMM dimension by the batch; BLAS libraries take 32-bit dimensions.
bool fits_folded(std::int64_t dim, std::int64_t count) {
  return dim * count <= std::numeric_limits<std::int32_t>::max();
}

// A stored matrix with a dimension of 1 reads the same transposed or not: its flag is free.
void free_flag(bool& flag, std::int64_t rows, std::int64_t cols, bool wanted) {
  if (rows == 1 || cols == 1) flag = wanted;
}

// C_i = op(A_i) op(B) for i < count, with B shared (stride 0) and the A_i and C_i back to back, is
// one product of count*m rows when op(A_i)'s rows are contiguous: one GEMM reads B once instead of
// count times (count matrix-vector products when m = 1). C_i = op(A) op(B_i) with A shared is the
// same product transposed, C_i^T = op(B_i)^T op(A)^T, when C_i's layout is also C_i^T's (m or n is
// 1: W x_i for vectors x_i is X W^T). With m, n > 1 the examples' rows would interleave in C, so
// those keep the strided batched GEMM (which reads the shared operand once per example). So do
// symmetric products: half the flops of each beats reading the shared operand once
// (tools/bench/bench_symmetric), and the folded product is not square.
GemmArgs fold_shared_operand(GemmArgs g) {
  if (g.count <= 1 || g.stride_c != g.m * g.n || (g.symmetric && g.m > 1)) return g;
  g.symmetric = g.lower_only = false;
  const bool a_shared = g.stride_a == 0 && g.stride_b == g.k * g.n;
  if (a_shared && (g.m == 1 || g.n == 1)) {
    std::swap(g.a, g.b);
    std::swap(g.m, g.n);
    std::swap(g.stride_a, g.stride_b);
    const bool ta = g.trans_a;
    g.trans_a = !g.trans_b;
    g.trans_b = !ta;
  } else if (!(g.stride_b == 0 && g.stride_a == g.m * g.k)) {
    return g;
  }
  free_flag(g.trans_a, g.m, g.k, false);
  if (g.trans_a || !fits_folded(g.m, g.count)) return g;
  g.m *= g.count;
  g.count = 1;
  g.stride_a = g.stride_c = 0;
  return g;
}

// The GEMM of one matmul over the kernel's views: count products of the broadcast batch axes (the
// vmap axis first). Scratch copies, for operands that broadcast only partly, stay alive in `keep`.
GemmArgs matmul_gemm(const KernelArgs& k, std::shared_ptr<Storage> (&keep)[2]) {
  const auto [ta, tb, symmetric, lower_only] = unpack_attrs<MatmulAttrs>(k.attrs);
  const std::size_t lead = k.lead();
  // Physical (stored) matrix shapes; the vmap batch axis is one more leading batch axis.
  Shape a = k.in[0].shape, b = k.in[1].shape;
  const bool a_vec = a.size() - lead == 1, b_vec = b.size() - lead == 1;
  if (a_vec) a.insert(a.end() - 1, 1);
  if (b_vec) b.push_back(1);
  const std::int64_t ra = a[a.size() - 2], ca = a.back(), rb = b[b.size() - 2], cb = b.back();
  View va = k.in[0], vb = k.in[1];
  va.shape = a;
  vb.shape = b;
  if (a_vec) va.strides.insert(va.strides.end() - 1, ca);
  if (b_vec) vb.strides.push_back(1);
  // The per-example batch axes broadcast numpy-style; the vmap axis stays in front.
  const auto per_example = [&](const Shape& s) {
    return Shape(s.begin() + static_cast<std::ptrdiff_t>(lead), s.end() - 2);
  };
  Shape out_batch = broadcast_shapes(per_example(a), per_example(b), k.op);
  if (k.batched) out_batch.insert(out_batch.begin(), k.batch);
  const MatrixOperand pa = matrix_operand(k.backend, va, out_batch, ra, ca, keep[0], k.batched);
  const MatrixOperand pb = matrix_operand(k.backend, vb, out_batch, rb, cb, keep[1], k.batched);
  const std::int64_t m = ta ? ca : ra, kk = ta ? ra : ca, n = tb ? rb : cb;
  return GemmArgs{.dtype = k.out.dtype,
                  .count = numel(out_batch),
                  .m = m,
                  .n = n,
                  .k = kk,
                  .trans_a = ta,
                  .trans_b = tb,
                  .alpha = 1.0,
                  .beta = 0.0,
                  .a = pa.data,
                  .stride_a = pa.stride,
                  .b = pb.data,
                  .stride_b = pb.stride,
                  .c = k.out.data,
                  .stride_c = m * n,
                  .symmetric = symmetric,
                  .lower_only = symmetric && lower_only};
}

void matmul_forward(const KernelArgs& k) {
  std::shared_ptr<Storage> scratch[2];
  k.backend.gemm(fold_shared_operand(matmul_gemm(k, scratch)));
}

// The product, then D's diagonal added to the output's, in place: n entries a matrix, while they
// are still in cache.
void matmul_add_diagonal_forward(const KernelArgs& k) {
  matmul_forward(k);
  const View diagonal = diagonal_view(k.out);
  k.backend.binary(BinaryKind::add, diagonal, expand_view(diagonal_view(k.in[2]), diagonal, k.batched), diagonal);
}

ExampleType matmul_add_diagonal_type(std::span<const ExampleType> in, const Attrs& attrs) {
  const ExampleType out = matmul_type_named("matmul_add_diagonal", in.first(2), attrs);
  const Shape& d = in[2].shape;
  const std::size_t r = out.shape.size();
  if (r < 2 || out.shape[r - 1] != out.shape[r - 2] || d.size() < 2 || d.size() > r ||
      d[d.size() - 1] != out.shape[r - 1] || d[d.size() - 2] != out.shape[r - 1] ||
      broadcast_shapes(d, out.shape, "matmul_add_diagonal") != out.shape)
    fail("matmul_add_diagonal: the product of shape {} needs a square matrix (or stack) of its shape to add, got {}",
         to_string(out.shape), to_string(d));
  return out;
}

// matmul_batch_sum: sum over the vmap batch of op(a_i) op(b_i), unbatched. Both operands' examples
// back to back make one GEMM over an inner dimension of B*k: [op(A_1) ... op(A_B)] [op(B_1); ...;
// op(B_B)], when op(A_i) is stored transposed ([k, m] blocks stacked) and op(B_i) is not ([k, n]
// blocks stacked). Otherwise the B products go to scratch and are summed there.
void matmul_batch_sum_forward(const KernelArgs& k) {
  std::shared_ptr<Storage> scratch[2];
  GemmArgs g = matmul_gemm(k, scratch);
  if (!k.batched) {  // nothing to sum over
    k.backend.gemm(g);
    return;
  }
  if (g.count == 0) {  // an empty batch sums to zero (and the fold below would write only one matrix)
    k.backend.fill(k.out, 0.0);
    return;
  }
  free_flag(g.trans_a, g.m, g.k, true);
  free_flag(g.trans_b, g.k, g.n, false);
  if (g.trans_a && !g.trans_b && g.count == k.batch && g.stride_a == g.m * g.k && g.stride_b == g.k * g.n &&
      fits_folded(g.k, g.count)) {
    g.k *= g.count;
    g.count = 1;
    g.stride_a = g.stride_b = g.stride_c = 0;
    k.backend.gemm(g);
    return;
  }
  Shape products = k.out.shape;
  products.insert(products.begin(), k.batch);
  Storage partial(k.backend.device(), static_cast<std::size_t>(numel(products)) * size_of(k.out.dtype));
  g.c = partial.data;
  k.backend.gemm(g);
  Shape kept = k.out.shape;
  kept.insert(kept.begin(), 1);
  k.backend.reduce(ReduceKind::sum, View{k.out.dtype, partial.data, products, contiguous_strides(products)},
                   reshaped_view(k.out, kept));
}

Tensor matmul_batch_sum(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

// Cotangents of C = op(A) op(B), with G = C's cotangent:
//   A's: G op(B)^T (transposed back when A was: op(B) G^T), B's: op(A)^T G (G^T op(A)).
// Transposes are GEMM flags, never copies (a captured constant is never transposed while tracing).
// An operand shared by a batched one gets the sum over the batch, as one GEMM over the folded
// batch (matmul_batch_sum), when the loss sums over the batch (context.sums_over_batch).
std::vector<Tensor> matmul_adjoint(const Node& node, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
  const auto [ta, tb, symmetric, lower_only] = unpack_attrs<MatmulAttrs>(node.attrs);
  const Tensor& a = node.inputs[0];
  const Tensor& b = node.inputs[1];
  // Work on the stored matrix forms, then sum over broadcast batch axes and restore vector shapes.
  const Tensor a2 = reshape(a, as_left(a.shape())), b2 = reshape(b, as_right(b.shape()));
  const Shape oa = as_left(a.shape(), ta), ob = as_right(b.shape(), tb);  // op(A), op(B)
  Shape g_shape = broadcast_shapes(batch_axes(oa), batch_axes(ob), "matmul");
  g_shape.push_back(oa[oa.size() - 2]);
  g_shape.push_back(ob.back());
  const Tensor g2 = reshape(g, g_shape);
  // op(X)^T Y etc. with X's stored form: a product p(x, tx, y, ty) = op_tx(x) op_ty(y).
  const auto product = [&](const Tensor& x, bool tx, const Tensor& y, bool ty, bool summed) {
    return summed ? matmul_batch_sum(x, y, tx, ty) : matmul(x, y, tx, ty);
  };
  // An unbatched matrix (or vector) that every example of a batched `other` uses.
  const auto shared = [&](const Tensor& x, const Tensor& other) {
    return x.ndim() == 2 && other.is_batched() && !x.is_batched();
  };
  Tensor ga, gb;
  if (ctx.needs[0]) {
    const bool is_shared = shared(a2, b2), summed = ctx.sums_over_batch && is_shared;
    if (is_shared && ob.back() == 1) {
      // op(B)'s examples are columns b_j: op(A)'s cotangent is sum_j g_j b_j^T, a product over
      // the columns as rows.
      // The row count is explicit: -1 would be ambiguous when m or k is 0.
      const std::int64_t rows = numel(batch_axes(ob));
      const Tensor g_rows = reshape(g2, {rows, oa[oa.size() - 2]}), b_rows = reshape(b2, {rows, ob[ob.size() - 2]});
      ga = ta ? product(b_rows, true, g_rows, false, summed) : product(g_rows, true, b_rows, false, summed);
    } else {
      ga = ta ? product(b2, tb, g2, true, summed) : product(g2, false, b2, !tb, summed);
    }
    ga = reshape(sum_to(ga, a2.shape()), a.shape());
  }
  if (ctx.needs[1]) {
    const bool is_shared = shared(b2, a2), summed = ctx.sums_over_batch && is_shared;
    const std::int64_t m = oa[oa.size() - 2];
    if (is_shared && (!ta || m == 1)) {
      // op(A)'s examples are rows (of every matrix of every example): op(B)'s cotangent is
      // sum_i a_i^T g_i over all of them.
      // The row count is explicit: -1 would be ambiguous when k or n is 0.
      const std::int64_t rows = numel(batch_axes(oa)) * m;
      const Tensor a_rows = reshape(a2, {rows, oa.back()}), g_rows = reshape(g2, {rows, ob.back()});
      gb = tb ? product(g_rows, true, a_rows, false, summed) : product(a_rows, true, g_rows, false, summed);
    } else {
      gb = tb ? product(g2, true, a2, ta, summed) : product(a2, !ta, g2, false, summed);
    }
    gb = reshape(sum_to(gb, b2.shape()), b.shape());
  }
  return {ga, gb};
}

}  // namespace

const OpDef matmul_op{.name = "matmul",
                      .inputs = 2,
                      .infer = matmul_type,
                      .forward = matmul_forward,
                      .adjoint = matmul_adjoint,
                      .tangent = bilinear_tangent};
const OpDef matmul_add_diagonal_op{.name = "matmul_add_diagonal",
                                   .inputs = 3,
                                   .infer = matmul_add_diagonal_type,
                                   .forward = matmul_add_diagonal_forward,
                                   .adjoint = nullptr};

namespace {

const OpDef matmul_batch_sum_op{
    .name = "matmul_batch_sum",
    .inputs = 2,
    .infer = [](std::span<const ExampleType> in,
                const Attrs& attrs) { return matmul_type_named("matmul_batch_sum", in, attrs); },
    .forward = matmul_batch_sum_forward,
    // The cotangent H (unbatched) reaches every example's product: matmul's cotangents with G = H.
    .adjoint =
        [](const Node& node, const Tensor& out, const Tensor& g, const AdjointContext& ctx) {
          AdjointContext per_example = ctx;
          per_example.sums_over_batch = false;
          return matmul_adjoint(node, out, g, per_example);
        },
    .tangent = bilinear_tangent,
    .reduces_batch = true};

Tensor matmul_batch_sum(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return apply(matmul_batch_sum_op, {a, b}, pack_attrs(MatmulAttrs{transpose_a, transpose_b}));
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul(a, b, false, false); }

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const DType d = promote(a.dtype(), b.dtype());
  return apply(matmul_op, {astype(a, d), astype(b, d)}, pack_attrs(MatmulAttrs{transpose_a, transpose_b}));
}

MatmulTransposes matmul_transposes(const Attrs& attrs) {
  const MatmulAttrs m = unpack_attrs<MatmulAttrs>(attrs);
  return {m.transpose_a, m.transpose_b};
}

bool matmul_symmetric(const Attrs& attrs) { return unpack_attrs<MatmulAttrs>(attrs).symmetric; }

bool matmul_lower_only(const Attrs& attrs) { return unpack_attrs<MatmulAttrs>(attrs).lower_only; }

Attrs matmul_attrs(MatmulTransposes t, bool symmetric, bool lower_only) {
  return pack_attrs(MatmulAttrs{t.a, t.b, symmetric, lower_only});
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(matmul_op, "matmul", "transpose_a transpose_b symmetric lower_only");
VT_REGISTER_OP(matmul_add_diagonal_op, "matmul_add_diagonal", "transpose_a transpose_b symmetric lower_only");
VT_REGISTER_OP(matmul_batch_sum_op, "matmul_batch_sum", "transpose_a transpose_b symmetric lower_only");

}  // namespace vt
