// logdet family: log det A of SPD matrices from their Cholesky factor, 2 sum(log diag L).
// Inputs of the op: (A, L); the adjoint is gbar A^-1, with A^-1 from solves against the factor.
#include "../autodiff/grad.hpp"
#include "../core/graph.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "reduce.hpp"
#include "linalg.hpp"

namespace vt {

namespace {

void logdet_forward(const KernelArgs& k) {
  const View& l = k.in[1];
  const std::size_t r = l.shape.size();
  // The diagonal of every factor, squared then logged in scratch, summed into the output.
  View diag = l;
  diag.strides[r - 2] += diag.strides[r - 1];
  diag.strides.pop_back();
  diag.shape.pop_back();
  Shape shape = diag.shape;
  Storage scratch(k.backend.device(), static_cast<std::size_t>(numel(shape)) * size_of(l.dtype));
  const View logs{l.dtype, scratch.data, shape, contiguous_strides(shape)};
  k.backend.unary(UnaryKind::square, diag, logs);
  k.backend.unary(UnaryKind::log, logs, logs);
  shape.back() = 1;
  k.backend.reduce(ReduceKind::sum, logs, reshaped_view(k.out, shape));
}

std::vector<Tensor> logdet_adjoint(const Node& node, const Tensor&, const Tensor& g, const std::vector<bool>&) {
  const Tensor& a = node.inputs[0];
  const std::int64_t n = a.shape(-1);
  const Tensor inverse = cho_solve(CholeskyFactor{a, node.inputs[1]}, eye(n, a.dtype(), a.device()));
  Shape gs = g.shape();
  gs.push_back(1);
  gs.push_back(1);
  return {sum_to(reshape(g, gs) * inverse, a.shape()), Tensor()};
}

const OpDef logdet_op{"logdet",
                      [](const std::vector<TypeInfo>& in, const Attrs&) {
                        if (in[0].shape != in[1].shape)
                          fail("logdet: factor of shape {} for matrices of shape {}", to_string(in[1].shape),
                               to_string(in[0].shape));
                        return TypeInfo{in[0].dtype, Shape(in[0].shape.begin(), in[0].shape.end() - 2)};
                      },
                      logdet_forward, logdet_adjoint,
                      /*mixed_dtypes=*/false, /*aliases_input=*/false, /*reduces_batch=*/false,
                      /*in_place=*/false, /*handle_inputs=*/0b01};  // A: for the adjoint only

}  // namespace

Tensor logdet(const CholeskyFactor& factor) {
  if (!factor.a.defined() || !factor.l.defined()) fail("logdet: the factor is empty (use cho_factor)");
  return apply(logdet_op, {factor.a, stop_gradient(factor.l)});
}

Tensor logdet(const Tensor& a) { return logdet(cho_factor(a)); }

}  // namespace vt
