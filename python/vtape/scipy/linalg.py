"""jax.scipy.linalg's Cholesky and triangular solves over vtape's tensors, with scipy's arguments and defaults."""

from __future__ import annotations

from .. import _vtape
from .._tensor import Tensor, asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted


def _mt(x: Tensor) -> Tensor:
    return _vtape.swapaxes(x, -1, -2)


def cholesky(a, lower: bool = False):
    """The Cholesky factor of a symmetric positive definite a: upper (a = U^T U) unless lower, as scipy; reads only
    that triangle of a, as LAPACK's potrf."""
    a = _t(a)
    return _vtape.cholesky(a) if lower else _mt(_vtape.cholesky(_mt(a)))


def cho_factor(a, lower: bool = False):
    """(c, lower) for cho_solve: c holds the factor in its lower (lower=True) or upper triangle; its other triangle is
    zero here (scipy leaves it unspecified)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b):
    """x with a x = b, from cho_factor's (c, lower): two triangular solves."""
    c, lower = c_and_lower
    c, b = _t(c), _t(b)
    factor = c if lower else _mt(c)  # L with a = L L^T
    vector = b.ndim == 1
    rhs = _vtape.reshape(b, (b.shape[0], 1)) if vector else b
    y = _vtape.triangular_solve(factor, rhs, lower=True)
    x = _vtape.triangular_solve(factor, y, lower=True, transpose=True)
    return _vtape.reshape(x, x.shape[:-1]) if vector else x


def solve(a, b, lower: bool = False, assume_a: str = "gen"):
    """x with a x = b: by a Cholesky factor of the given triangle for assume_a='pos' (scipy's lower= picks it), else by
    QR (any invertible a)."""
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    if assume_a not in ("gen", "sym", "her"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', not {assume_a!r}")
    from ..numpy.linalg import solve as general

    return general(a, b)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False):
    """x with op(a) x = b for triangular a (its lower triangle when lower, else its upper), op(a) = a for trans 0 or
    'N', a^T for 1, 'T' (or 'C': real tensors); unit_diagonal reads the diagonal as ones."""
    a, b = _t(a), _t(b)
    transpose = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}.get(trans)
    if transpose is None:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', not {trans!r}")
    if unit_diagonal:
        n = a.shape[-1]
        eye = _vtape.eye(n, dtype=a.dtype_name)
        a = a * (1.0 - eye) + eye
    vector = b.ndim == 1
    rhs = _vtape.reshape(b, (b.shape[0], 1)) if vector else b
    x = _vtape.triangular_solve(a, rhs, lower=lower, transpose=transpose)
    return _vtape.reshape(x, x.shape[:-1]) if vector else x
