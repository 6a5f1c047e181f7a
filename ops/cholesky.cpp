// Cholesky family: cholesky, cholesky_checked, cho_factor. Shape rule, forward, adjoint.
#include "cholesky.hpp"

#include <cmath>

#include "../core/graph.hpp"
#include "creation.hpp"
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

// `lower_only`: every reader of the factor reads only its lower triangle (set by jit's
// mark_lower_only_outputs; eager factors always have zeros above the diagonal).
struct FactorAttrs {
  bool lower_only = false;
  auto fields() { return std::tie(lower_only); }
};

ExampleType square_type(std::span<const ExampleType> in, std::string_view op) {
  check_square(op, in[0].shape);
  return in[0];
}

// Factors every matrix in place in the output. Failures raise, or (checked) turn the factor NaN
// from the failing row on, which is how cholesky_checked reports them.
void factor_forward(const KernelArgs& k, bool checked) {
  const std::int64_t n = k.out.shape.back();
  const std::int64_t count = n == 0 ? 0 : numel(k.out.shape) / (n * n);
  const bool lower_only = unpack_attrs<FactorAttrs>(k.attrs).lower_only;
  if (checked) {
    k.backend.cholesky(k.out.dtype, count, n, k.in[0].data, n * n, k.out.data, n * n, lower_only,
                       FactorFailure::poisoning());
    return;
  }
  // The backend may call this after the op returns (a GPU finds out asynchronously): it keeps
  // copies of what the message needs. `flat` counts the call's matrices; under vmap the first of
  // the leading axes is the example, which is what the error names (and batch_index holds).
  auto report = [op = std::string(k.op), lead = Shape(k.out.shape.begin(), k.out.shape.end() - 2), batched = k.batched,
                 n, first = k.first_example, whole = k.whole_batch](std::int64_t flat, std::int32_t minor) {
    const MatrixLocation at = locate_matrix(lead, batched, flat, first, whole);
    throw NotPositiveDefinite(
        fmt::format("{}: {} ({} x {}) is not positive definite: its leading minor of order {} is not positive "
                    "(or not finite)",
                    op, at.where, n, n, minor),
        at.example, minor);
  };
  k.backend.cholesky(k.out.dtype, count, n, k.in[0].data, n * n, k.out.data, n * n, lower_only,
                     FactorFailure::raising(std::move(report)));
}

// The blocked reverse-mode kernel (Murray 2016), used when nothing differentiates the backward
// pass itself. Inputs: (L, Lbar).
const OpDef cholesky_backward_op{
    .name = "cholesky_backward",
    .inputs = 2,
    .infer =
        [](std::span<const ExampleType> in, const Attrs&) {
          return ExampleType{in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, "cholesky_backward")};
        },
    .forward =
        [](const KernelArgs& k) {
          k.backend.copy(expand_view(k.in[1], k.out, k.batched), k.out);
          const std::int64_t n = k.out.shape.back();
          const Shape batch = batch_axes(k.out.shape);
          std::shared_ptr<Storage> scratch;
          const MatrixOperand l = matrix_operand(k.backend, k.in[0], batch, n, n, scratch, k.batched);
          k.backend.cholesky_backward(k.out.dtype, numel(batch), n, l.data, l.stride, k.out.data, n * n);
        },
    .adjoint = nullptr};

// Abar = sym(L^-T Phi(L^T Lbar) L^-1), Phi taking the lower triangle with the diagonal halved.
// When an outer transform differentiates this backward pass, it is written with differentiable
// ops (triangular solves, never an explicit inverse); otherwise the blocked kernel runs.
std::vector<Tensor> cholesky_adjoint(const Node&, const Tensor& l, const Tensor& g, const AdjointContext& ctx) {
  if (!ctx.differentiated) return {apply(cholesky_backward_op, {l, g})};
  // Only Lbar's lower triangle enters (tril(L^T Lbar) reads no other); selecting it first keeps an
  // Inf in its upper triangle from meeting L's zeros.
  const Tensor m = matmul(swapaxes(l, -1, -2), tril(g));
  const Tensor phi = tril(m) - m * eye(l.shape(-1), l.dtype(), l.device()) * 0.5;
  const Tensor z = triangular_solve(l, phi, /*lower=*/true, /*transpose=*/true);                // L^-T Phi
  const Tensor a_bar = swapaxes(triangular_solve(l, swapaxes(z, -1, -2), true, true), -1, -2);  // (L^-T Phi) L^-1
  return {(a_bar + swapaxes(a_bar, -1, -2)) * 0.5};
}

// dL = L Phi(L^-1 dA L^-T) for the symmetric dA the adjoint assumes (Phi as above), by two
// triangular solves and a product.
Tensor cholesky_tangent(const Node&, const Tensor& l, const std::vector<Tensor>& tangents) {
  const Tensor y = triangular_solve(l, symmetric_part(tangents[0]), /*lower=*/true, /*transpose=*/false);  // L^-1 dA
  const Tensor z = triangular_solve(l, swapaxes(y, -1, -2), true, false);  // L^-1 (L^-1 dA)^T = L^-1 dA L^-T
  const Tensor phi = tril(z) - z * eye(l.shape(-1), l.dtype(), l.device()) * 0.5;
  return matmul(l, phi);
}

// The three factorizations differ in name and in what a failure does (`checked`: NaN rows, no
// error). The factorization overwrites its copy of A, so it can run in A's own buffer.
template <const char* Name, bool Checked>
constexpr OpDef factor_op() {
  return {.name = Name,
          .inputs = 1,
          .infer = [](std::span<const ExampleType> in, const Attrs&) { return square_type(in, Name); },
          .forward = [](const KernelArgs& k) { factor_forward(k, Checked); },
          .adjoint = cholesky_adjoint,
          .tangent = cholesky_tangent,
          .in_place = true,
          .lower_triangle_inputs = 0b1};
}

constexpr char cholesky_name[] = "cholesky", cho_factor_name[] = "cho_factor",
               cholesky_checked_name[] = "cholesky_checked";
const OpDef cholesky_op = factor_op<cholesky_name, false>();
const OpDef cho_factor_op = factor_op<cho_factor_name, false>();
const OpDef cholesky_checked_op = factor_op<cholesky_checked_name, true>();

}  // namespace

bool is_cholesky_factorization(const OpDef& op) {
  return &op == &cholesky_op || &op == &cho_factor_op || &op == &cholesky_checked_op;
}

Attrs factor_attrs(bool lower_only) { return pack_attrs(FactorAttrs{lower_only}); }
bool factor_lower_only(const Attrs& attrs) { return unpack_attrs<FactorAttrs>(attrs).lower_only; }

Tensor cholesky(const Tensor& a) { return apply(cholesky_op, {a}, factor_attrs(false)); }

CholeskyFactor cho_factor(const Tensor& a) { return {a, apply(cho_factor_op, {a}, factor_attrs(false))}; }

CheckedCholesky cholesky_checked(const Tensor& a) {
  const Tensor l = apply(cholesky_checked_op, {a}, factor_attrs(false));
  // A failed example's diagonal is NaN from the failing minor on: count those entries.
  const Tensor d = stop_gradient(diagonal(l));
  const Tensor failed = sum(astype(not_equal(d, d), d.dtype()), {-1});
  const double n = static_cast<double>(a.shape(-1));
  return {l, where(greater(failed, zeros({}, a.dtype(), a.device())), (n + 1.0) - failed,
                   zeros({}, a.dtype(), a.device()))};
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(cholesky_backward_op, "cholesky_backward");
VT_REGISTER_OP(cholesky_op, "cholesky", "lower_only");
VT_REGISTER_OP(cho_factor_op, "cho_factor", "lower_only");
VT_REGISTER_OP(cholesky_checked_op, "cholesky_checked", "lower_only");

}  // namespace vt
