#pragma once
// Linear algebra with scipy/JAX conventions. Every op takes leading batch axes ([..., n, n]) and
// runs as one backend call over the whole batch.
//
// Adjoints: `cholesky` has the Cholesky adjoint (triangular solves, no explicit inverse).
// `cho_solve`, `logdet` and `solve` are differentiated at the level of the SPD matrix A:
// Abar = -sym(bbar x^T) and gbar A^-1, reusing the factor. A factor that feeds only these ops
// therefore never runs the Cholesky adjoint. All gradients with respect to a symmetric input are
// symmetric.
//
// Factorizations read only the lower triangle of A. A matrix that is not positive definite, or
// whose factor is not finite (NaN or Inf in the input), raises vt::NotPositiveDefinite naming the
// op, the batch index and the order of the failing leading minor; `cholesky_checked` reports the
// same per example instead of raising.
#include "../core/tensor.hpp"

namespace vt {

// A Cholesky factorization that remembers the matrix it came from, so that solves and logdets
// through it are differentiated with respect to A directly.
struct CholeskyFactor {
  Tensor a;  // the SPD matrices [..., n, n]
  Tensor l;  // their lower factors (differentiable, through the Cholesky adjoint)
};

// The lower Cholesky factor L of A = L L^T.
Tensor cholesky(const Tensor& a);

// Cholesky without raising: `info` has A's leading axes and holds, per example, 0 on success or
// the order of the failing leading minor; the factors of failed examples are NaN from that row on.
struct CheckedCholesky {
  Tensor l;
  Tensor info;  // in A's (floating) dtype, like vtape's other masks, so that it mixes with A's values
};
CheckedCholesky cholesky_checked(const Tensor& a);

CholeskyFactor cho_factor(const Tensor& a);
// x = A^-1 b for b a vector [n] or matrices [..., n, k].
Tensor cho_solve(const CholeskyFactor& factor, const Tensor& b);

// Solves op(T) X = B (left) or X op(T) = B (right) with T triangular, op(T) = T or T^T.
// Only T's lower (lower = true) or upper triangle is read.
Tensor triangular_solve(const Tensor& t, const Tensor& b, bool lower = true, bool transpose = false,
                        bool left = true);

// log det A of SPD matrices, through the factor; shape: A's leading axes.
Tensor logdet(const CholeskyFactor& factor);
Tensor logdet(const Tensor& a);

// x = A^-1 b for SPD A (a Cholesky solve).
Tensor solve(const Tensor& a, const Tensor& b);

}  // namespace vt
