"""The factorizations that read one triangle in C++ (cholesky, eigh), with JAX's default in Python: the input is
symmetrized first, (a + a^T) / 2, as jax.numpy.linalg.cholesky and eigh do. A derivative along a direction that is
not symmetric is then that of its symmetric part, as in JAX; symmetrize_input=False reads the lower triangle only (the
C++ rule, which spares the extra pass where the input is symmetric by construction)."""

from __future__ import annotations

from . import _vtape
from ._tensor import asarray


def _symmetrized(a, symmetrize_input: bool):
    a = asarray(a)
    if not symmetrize_input or a.ndim < 2:
        return a
    return (a + _vtape.swapaxes(a, -1, -2)) * 0.5


def cholesky(a, *, symmetrize_input: bool = True):
    """The lower Cholesky factor L of a symmetric positive definite matrix (a batch of them over the leading axes):
    a = L L^T. Raises vtape.NotPositiveDefinite naming the first failing matrix."""
    return _vtape.cholesky(_symmetrized(a, symmetrize_input))


def eigh(a, *, symmetrize_input: bool = True):
    """The eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix, or of a batch of them."""
    return _vtape.eigh(_symmetrized(a, symmetrize_input))


def triangular_solve(t, b, lower: bool = True, transpose: bool = False, left: bool = True):
    """x with op(t) x = b (left) or x op(t) = b, t triangular (its lower or upper triangle read), op(t) = t or t^T.
    A vector b is a column on the left and a row on the right, as JAX's."""
    t, b = asarray(t), asarray(b)
    if not left and b.ndim == 1:
        x = _vtape.triangular_solve(t, _vtape.reshape(b, (1, b.shape[0])), lower, transpose, False)
        return _vtape.reshape(x, (b.shape[0],))
    return _vtape.triangular_solve(t, b, lower, transpose, left)
