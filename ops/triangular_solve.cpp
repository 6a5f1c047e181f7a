// Triangular solve family: op(T) X = B for triangular T, on either side.
#include "../core/graph.hpp"
#include "elementwise.hpp"
#include "indexing.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matmul.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"

namespace vt {

namespace {

// Which triangle of T holds it, and whether T^T is solved with.
struct TriangleAttrs {
  bool lower, transpose;
  auto fields() { return std::tie(lower, transpose); }
};

void triangular_solve_forward(const KernelArgs& k) {
  const SolveLayout s = solve_layout(k, 0, 1);
  std::shared_ptr<Storage> scratch;
  const MatrixOperand t = matrix_operand(k.backend, k.in[0], s.batch, s.n, s.n, scratch, k.batched);
  const TriangleAttrs a = unpack_attrs<TriangleAttrs>(k.attrs);
  k.backend.trsm(TrsmArgs{.dtype = k.out.dtype,
                          .count = numel(s.batch),
                          .n = s.n,
                          .nrhs = s.k,
                          .lower = a.lower,
                          .transpose = a.transpose,
                          .then_transposed = false,
                          .t = t.data,
                          .stride_t = t.stride,
                          .b = s.x.data,
                          .stride_b = s.n * s.k});
}

// X = op(T)^-1 B:  Bbar = op(T)^-T Xbar;  Tbar = -Bbar X^T (T X = B) or -X Bbar^T (T^T X = B),
// restricted to T's triangle.
std::vector<Tensor> triangular_solve_adjoint(const Node& node, const Tensor& x, const Tensor& g,
                                             const AdjointContext& ctx) {
  const Tensor& t = node.inputs[0];
  const Tensor& b = node.inputs[1];
  const auto [lower, transpose] = unpack_attrs<TriangleAttrs>(node.attrs);
  const bool vector = b.ndim() == 1;
  const Tensor xm = vector ? as_columns(x) : x;
  const Tensor bm = triangular_solve(t, vector ? as_columns(g) : g, lower, !transpose);
  Tensor t_bar;
  if (ctx.needs[0]) {
    const Tensor outer = transpose ? matmul(xm, swapaxes(bm, -1, -2)) : matmul(bm, swapaxes(xm, -1, -2));
    t_bar = sum_to(neg(lower ? tril(outer) : triu(outer)), t.shape());
  }
  return {t_bar, ctx.needs[1] ? sum_to(reshape(bm, x.shape()), b.shape()) : Tensor()};
}

// dX = op(T)^-1 (dB - op(dT) X), dT restricted to T's triangle (the only one the solve reads).
Tensor triangular_solve_tangent(const Node& node, const Tensor& x, const std::vector<Tensor>& tangents) {
  const Tensor& t = node.inputs[0];
  const auto [lower, transpose] = unpack_attrs<TriangleAttrs>(node.attrs);
  const bool vector = node.inputs[1].ndim() == 1;  // as in the adjoint: b and X as columns
  Tensor rhs = tangents[1].defined() && vector ? as_columns(tangents[1]) : tangents[1];
  if (tangents[0].defined()) {
    const Tensor dt = lower ? tril(tangents[0]) : triu(tangents[0]);
    const Tensor product = matmul(dt, vector ? as_columns(x) : x, transpose, false);
    rhs = rhs.defined() ? rhs - product : neg(product);
  }
  return reshape(triangular_solve(t, rhs, lower, transpose), x.shape());
}

const OpDef triangular_solve_op{
    .name = "triangular_solve",
    .inputs = 2,
    .infer = [](std::span<const ExampleType> in, const Attrs&) { return solve_type("triangular_solve", in[0], in[1]); },
    .forward = triangular_solve_forward,
    .adjoint = triangular_solve_adjoint,
    .tangent = triangular_solve_tangent};

}  // namespace

Tensor triangular_solve(const Tensor& t, const Tensor& b, bool lower, bool transpose, bool left) {
  const DType d = promote(t.dtype(), b.dtype());
  if (!left) {
    // X op(T) = B  <=>  op(T)^T X^T = B^T
    if (b.ndim() < 2) fail("triangular_solve: a right-side solve needs matrices, got shape {}", to_string(b.shape()));
    return swapaxes(triangular_solve(t, swapaxes(b, -1, -2), lower, !transpose, true), -1, -2);
  }
  return apply(triangular_solve_op, {astype(t, d), astype(b, d)}, pack_attrs(TriangleAttrs{lower, transpose}));
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(triangular_solve_op, "triangular_solve", "lower transpose");

}  // namespace vt
