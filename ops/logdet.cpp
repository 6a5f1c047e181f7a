// logdet family: log det A of SPD matrices from their Cholesky factor, 2 sum(log diag L), and the
// SPD inverse A^-1 that its adjoint and tangent need. Inputs of both ops: (A, L), differentiated at
// the level of A as cho_solve is; L only supplies the factorization.
#include "../core/graph.hpp"
#include "cholesky.hpp"
#include "matmul.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"
#include "stop_gradient.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

void logdet_forward(const KernelArgs& k) {
  // The diagonal of every factor, squared then logged in scratch, summed into the output.
  const View diag = diagonal_view(k.in[1]);
  Shape shape = diag.shape;
  Storage scratch(k.backend.device(), static_cast<std::size_t>(numel(shape)) * size_of(diag.dtype));
  const View logs{diag.dtype, scratch.data, shape, contiguous_strides(shape)};
  k.backend.unary(UnaryKind::square, diag, logs);
  k.backend.unary(UnaryKind::log, logs, logs);
  shape.back() = 1;
  k.backend.reduce(ReduceKind::sum, logs, reshaped_view(k.out, shape));
}

// X = A^-1 = (L L^T)^-1 from lower factors L (on the CPU in a third of the flops of cho_solve(L, I)),
// exactly symmetric on every backend. dX = -X dA X for the symmetric dA the factor sees, so
// Abar = -X sym(Xbar) X: two products, where solving against the identity would add two solves.
Tensor spd_inverse_tangent(const Node&, const Tensor& x, const std::vector<Tensor>& tangents) {
  if (!tangents[0].defined()) return Tensor();
  return neg(matmul(x, matmul(symmetric_part(tangents[0]), x)));
}

std::vector<Tensor> spd_inverse_adjoint(const Node& node, const Tensor& x, const Tensor& g, const AdjointContext&) {
  return {spd_inverse_tangent(node, x, {g}), Tensor()};
}

}  // namespace
const OpDef cholesky_inverse_op{
    .name = "cholesky_inverse",
    .inputs = 2,
    .infer =
        [](std::span<const ExampleType> in, const Attrs&) {
          check_factor("cholesky_inverse", in[0], in[1]);
          return in[0];
        },
    .forward =
        [](const KernelArgs& k) {
          const std::int64_t n = k.out.shape.back();
          const Shape batch = batch_axes(k.out.shape);
          std::shared_ptr<Storage> scratch;
          const MatrixOperand l = matrix_operand(k.backend, k.in[1], batch, n, n, scratch, k.batched);
          k.backend.cholesky_inverse(k.out.dtype, numel(batch), n, l.data, l.stride, k.out.data, n * n);
        },
    .adjoint = spd_inverse_adjoint,
    .tangent = spd_inverse_tangent,
    .handle_inputs = 0b01,           // A: for the adjoint only
    .lower_triangle_inputs = 0b10};  // L

namespace {
Tensor spd_inverse(const Node& node) { return apply(cholesky_inverse_op, {node.inputs[0], node.inputs[1]}); }

// gbar A^-1, A^-1 through the SPD inverse above (differentiable, so Hessians reuse it).
std::vector<Tensor> logdet_adjoint(const Node& node, const Tensor&, const Tensor& g, const AdjointContext&) {
  const Tensor& a = node.inputs[0];
  Shape gs = g.shape();
  gs.push_back(1);
  gs.push_back(1);
  return {sum_to(reshape(g, gs) * spd_inverse(node), a.shape()), Tensor()};
}

// d log det A = tr(A^-1 dA) = sum(A^-1 o dA): the same inverse as the adjoint's, so a plan computes it once.
Tensor logdet_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  if (!tangents[0].defined()) return Tensor();
  return sum(spd_inverse(node) * tangents[0], {-2, -1});
}

const OpDef logdet_op{.name = "logdet",
                      .inputs = 2,
                      .infer =
                          [](std::span<const ExampleType> in, const Attrs&) {
                            check_factor("logdet", in[0], in[1]);
                            return ExampleType{in[0].dtype, batch_axes(in[0].shape)};
                          },
                      .forward = logdet_forward,
                      .adjoint = logdet_adjoint,
                      .tangent = logdet_tangent,
                      .handle_inputs = 0b01,           // A: for the adjoint only
                      .lower_triangle_inputs = 0b10};  // L: its diagonal

}  // namespace

Tensor logdet(const CholeskyFactor& factor) {
  if (!factor.a.defined() || !factor.l.defined()) fail("logdet: the factor is empty (use cho_factor)");
  return apply(logdet_op, {factor.a, stop_gradient(factor.l)});
}

Tensor logdet(const Tensor& a) { return logdet(cho_factor(a)); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(cholesky_inverse_op, "cholesky_inverse");
VT_REGISTER_OP(logdet_op, "logdet");

}  // namespace vt
