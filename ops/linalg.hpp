#pragma once
/// @file
/// Linear algebra with scipy/JAX conventions. Every op takes leading batch axes ([..., n, n], or
/// [..., m, n] for qr) and runs as one backend call over the whole batch.
///
/// Adjoints: `cholesky` has the Cholesky adjoint (triangular solves, no explicit inverse).
/// `cho_solve`, `logdet` and `solve` are differentiated at the level of the SPD matrix A:
/// Abar = -sym(bbar x^T) and gbar A^-1, reusing the factor (A^-1 from it, as potri does, and
/// differentiated again by products, -A^-1 dA A^-1, for Hessians). A factor that feeds only these ops
/// therefore never runs the Cholesky adjoint. All gradients with respect to a symmetric input are
/// symmetric.
///
/// The Cholesky factorizations read only the lower triangle of A. A matrix that is not positive definite, or
/// whose factor is not finite (NaN or Inf in the input), raises vt::NotPositiveDefinite naming the
/// op, the batch index and the order of the failing leading minor; `cholesky_checked` reports the
/// same per example instead of raising.
///
/// Decompositions: `qr` (reduced, Householder, LAPACK's signs) and `eigh` (symmetric, from the
/// lower triangle) return two tensors each, with adjoints for both (see their comments for where
/// gradients exist). A non-finite entry in what they read, or an eigensolver that does not
/// converge, raises vt::Error naming the op, the failing matrix (its example under vmap) and its
/// shape.
#include "../core/tensor.hpp"

namespace vt {

/// A Cholesky factorization that remembers the matrix it came from, so that solves and logdets
/// through it are differentiated with respect to A directly.
struct CholeskyFactor {
  Tensor a;  ///< the SPD matrices [..., n, n]
  Tensor l;  ///< their lower factors (differentiable, through the Cholesky adjoint)
};

/// The lower Cholesky factor L of A = L L^T.
Tensor cholesky(const Tensor& a);

/// Cholesky without raising: `info` has A's leading axes and holds, per example, 0 on success or
/// the order of the failing leading minor; the factors of failed examples are NaN from that row on.
struct CheckedCholesky {
  Tensor l;
  Tensor info;  ///< in A's (floating) dtype, like vtape's other masks, so that it mixes with A's values
};
CheckedCholesky cholesky_checked(const Tensor& a);

CholeskyFactor cho_factor(const Tensor& a);
/// x = A^-1 b for b a vector [n] or matrices [..., n, k].
Tensor cho_solve(const CholeskyFactor& factor, const Tensor& b);

/// Solves op(T) X = B (left) or X op(T) = B (right) with T triangular, op(T) = T or T^T.
/// Only T's lower (lower = true) or upper triangle is read.
Tensor triangular_solve(const Tensor& t, const Tensor& b, bool lower = true, bool transpose = false, bool left = true);

/// log det A of SPD matrices, through the factor; shape: A's leading axes.
Tensor logdet(const CholeskyFactor& factor);
Tensor logdet(const Tensor& a);

/// x = A^-1 b for SPD A (a Cholesky solve).
Tensor solve(const Tensor& a, const Tensor& b);

/// The reduced QR decomposition A = Q R of matrices [..., m, n]: with k = min(m, n), q [..., m, k]
/// has orthonormal columns and r [..., k, n] is upper triangular (0 below the diagonal). Signs as
/// LAPACK's Householder QR (geqrf/orgqr), and so numpy's and JAX's: r's diagonal entry j is
/// -sign(x_1) ||x||, for x column j of the partly reduced matrix from the pivot (row j) down and x_1
/// its pivot entry, sign(0) = +1; so it may be negative. Where x is already 0 below the pivot, no
/// reflection is applied and the entry is x_1 itself.
/// Gradient: for every m, n, with respect to A of full rank k (the first k columns independent
/// when m < n; else R's diagonal has zeros, and the gradient is not finite). For m >= n,
/// Abar = (Qbar + Q copyltu(M)) R^-T with M = R Rbar^T - Qbar^T Q and copyltu(M) the symmetric
/// matrix with M's lower triangle; for m < n, A = [X | Y] with X square: the same for X, with
/// Qbar + Y Vbar^T for Qbar, and Ybar = Q Vbar, where V = R[:, m:] (the standard formulas, e.g.
/// Walter & Lehmann 2018; derived in ops/qr.cpp).
struct QR {
  Tensor q;
  Tensor r;
};
QR qr(const Tensor& a);

/// The eigendecomposition A = V diag(w) V^T of symmetric matrices [..., n, n], reading only the
/// lower triangle: `eigenvalues` [..., n] in ascending order, `eigenvectors` [..., n, n]
/// orthonormal, eigenvector i in column i. Each eigenvector's sign is the solver's (it may differ
/// between backends), and within a repeated eigenvalue any orthonormal basis of its eigenspace may
/// come back: compare and differentiate only what does not depend on that choice.
/// Gradient (symmetric, as for the factorizations): Abar = V (diag(wbar) + F o (V^T Vbar)) V^T,
/// symmetrised, with F_ij = 1 / (w_j - w_i). Pairs of eigenvalues closer than
/// sqrt(eps) max_k |w_k| (eps of the dtype: 1.5e-8 relative in float64, 3.5e-4 in float32) are
/// treated as degenerate and their terms dropped. That is exact for functions that do not depend
/// on the basis chosen within a degenerate eigenspace: functions of the eigenvalues symmetric in
/// the repeated ones (sum(f(w)), never a single one of them), of projectors onto whole eigenspaces
/// (V diag(c) V^T with c equal on each), or of anything invariant to the signs of eigenvectors
/// (V o V) where the eigenvalues are distinct. For other functions of nearly or exactly degenerate
/// eigenvalues the gradient is not defined (it grows as 1 / (w_j - w_i)), and what comes back
/// omits those terms.
struct Eigh {
  Tensor eigenvalues;
  Tensor eigenvectors;
};
Eigh eigh(const Tensor& a);

}  // namespace vt
