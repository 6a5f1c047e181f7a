// logdet family: log det A of SPD matrices from their Cholesky factor, 2 sum(log diag L).
// Inputs of the op: (A, L); the adjoint is gbar A^-1, with A^-1 from the factor: its inverse as
// potri computes it (a kernel with no adjoint), or solves against the identity when the backward
// pass is itself differentiated.
#include "../core/graph.hpp"
#include "cholesky.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"
#include "stop_gradient.hpp"

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

// (L L^T)^-1 from lower factors L, in a third of the flops of cho_solve(L, I); not differentiable.
}  // namespace
const OpDef cholesky_inverse_op{
    .name = "cholesky_inverse",
    .infer = same_type,
    .forward =
        [](const KernelArgs& k) {
          const std::int64_t n = k.out.shape.back();
          const Shape batch = batch_axes(k.out.shape);
          std::shared_ptr<Storage> scratch;
          const MatrixOperand l = matrix_operand(k.backend, k.in[0], batch, n, n, scratch, k.batched);
          k.backend.cholesky_inverse(k.out.dtype, numel(batch), n, l.data, l.stride, k.out.data, n * n);
        },
    .adjoint = nullptr,
    .lower_triangle_inputs = 0b1};

std::vector<Tensor> logdet_adjoint(const Node& node, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
  const Tensor& a = node.inputs[0];
  const std::int64_t n = a.shape(-1);
  const Tensor inverse = ctx.differentiated
                             ? cho_solve(CholeskyFactor{a, node.inputs[1]}, eye(n, a.dtype(), a.device()))
                             : apply(cholesky_inverse_op, {node.inputs[1]});
  Shape gs = g.shape();
  gs.push_back(1);
  gs.push_back(1);
  return {sum_to(reshape(g, gs) * inverse, a.shape()), Tensor()};
}

// d log det A = tr(A^-1 dA) = sum(A^-1 o dA), A^-1 by solves against the identity.
Tensor logdet_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  if (!tangents[0].defined()) return Tensor();
  const Tensor& a = node.inputs[0];
  const Tensor inverse = cho_solve(CholeskyFactor{a, node.inputs[1]}, eye(a.shape(-1), a.dtype(), a.device()));
  return sum(inverse * tangents[0], {-2, -1});
}

namespace {
const OpDef logdet_op{.name = "logdet",
                      .infer =
                          [](const std::vector<ExampleType>& in, const Attrs&) {
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

}  // namespace vt
