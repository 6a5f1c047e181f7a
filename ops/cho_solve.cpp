// SPD solve family: cho_solve and solve, differentiated at the level of A.
// Inputs of the op: (A, L, b); L only supplies the factorization, gradients go to A and b.
#include "../core/graph.hpp"
#include "cholesky.hpp"
#include "elementwise.hpp"
#include "indexing.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matmul.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"
#include "stop_gradient.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

void cho_solve_forward(const KernelArgs& k) {
  const SolveLayout s = solve_layout(k, 1, 2);
  std::shared_ptr<Storage> scratch;
  const MatrixOperand l = matrix_operand(k.backend, k.in[1], s.batch, s.n, s.n, scratch, k.batched);
  // L y = b, then L^T x = y, in one pass over the factors.
  k.backend.trsm(TrsmArgs{.dtype = k.out.dtype,
                          .count = numel(s.batch),
                          .n = s.n,
                          .nrhs = s.k,
                          .lower = true,
                          .transpose = false,
                          .then_transposed = true,
                          .t = l.data,
                          .stride_t = l.stride,
                          .b = s.x.data,
                          .stride_b = s.n * s.k});
}

Tensor cho_solve_raw(const Tensor& a, const Tensor& l, const Tensor& b);

// x = A^-1 b:  bbar = A^-1 xbar (one more solve with the same factor),  Abar = -sym(bbar x^T).
std::vector<Tensor> cho_solve_adjoint(const Node& node, const Tensor& x, const Tensor& g, const AdjointContext& ctx) {
  const Tensor& a = node.inputs[0];
  const Tensor& b = node.inputs[2];
  const bool vector = b.ndim() == 1;
  const Tensor xm = vector ? as_columns(x) : x;
  const Tensor bm = cho_solve_raw(a, node.inputs[1], vector ? as_columns(g) : g);
  Tensor a_bar;
  if (ctx.needs[0]) {
    // -(bbar x^T + x bbar^T) / 2 as one product of [n, 2k] by [2k, n] matrices.
    const Tensor left = concatenate({bm * -0.5, xm * -0.5}, -1);
    const Tensor right = concatenate({xm, bm}, -1);
    a_bar = sum_to(matmul(left, swapaxes(right, -1, -2)), a.shape());
  }
  return {a_bar, Tensor(), ctx.needs[2] ? sum_to(reshape(bm, x.shape()), b.shape()) : Tensor()};
}

// dx = A^-1 (db - dA x), dA symmetric as the adjoint assumes; the factor carries no tangent.
Tensor cho_solve_tangent(const Node& node, const Tensor& x, const std::vector<Tensor>& tangents) {
  const bool vector = node.inputs[2].ndim() == 1;  // as in the adjoint: b and x as columns
  Tensor rhs = tangents[2].defined() && vector ? as_columns(tangents[2]) : tangents[2];
  if (tangents[0].defined()) {
    const Tensor product = matmul(symmetric_part(tangents[0]), vector ? as_columns(x) : x);
    rhs = rhs.defined() ? rhs - product : neg(product);
  }
  if (!rhs.defined()) return Tensor();
  return reshape(cho_solve_raw(node.inputs[0], node.inputs[1], rhs), x.shape());
}

}  // namespace
const OpDef cho_solve_op{.name = "cho_solve",
                         .inputs = 3,
                         .infer =
                             [](std::span<const ExampleType> in, const Attrs&) {
                               check_factor("cho_solve", in[0], in[1]);
                               return solve_type("cho_solve", in[1], in[2]);
                             },
                         .forward = cho_solve_forward,
                         .adjoint = cho_solve_adjoint,
                         .tangent = cho_solve_tangent,
                         .handle_inputs = 0b001,           // A: for the adjoint only
                         .lower_triangle_inputs = 0b010};  // L

namespace {
Tensor cho_solve_raw(const Tensor& a, const Tensor& l, const Tensor& b) {
  return apply(cho_solve_op, {a, l, astype(b, a.dtype())});
}
}  // namespace

Tensor cho_solve(const CholeskyFactor& factor, const Tensor& b) {
  if (!factor.a.defined() || !factor.l.defined()) fail("cho_solve: the factor is empty (use cho_factor)");
  // The factor enters as a constant: A's gradient comes from the SPD-level adjoint above, so the
  // Cholesky adjoint never runs for a factor used only in solves.
  return cho_solve_raw(factor.a, stop_gradient(factor.l), b);
}

Tensor solve(const Tensor& a, const Tensor& b) { return cho_solve(cho_factor(a), b); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(cho_solve_op, "cho_solve");

}  // namespace vt
