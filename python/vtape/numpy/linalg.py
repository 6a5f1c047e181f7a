"""jax.numpy.linalg over vtape's tensors: cholesky, eigh, qr, solve, inv, norm.

cholesky and eigh symmetrize their input by default, as JAX's do. solve and inv take general square matrices (by QR,
differentiable through it); for symmetric positive definite ones vtape.solve and vtape.scipy.linalg.cho_solve are
cheaper. det and slogdet of general matrices are not here yet (vtape.logdet is the SPD one).
"""

from __future__ import annotations

import numbers

from .. import _vtape
from .._linalg import cholesky as _cholesky, eigh as _eigh
from .._tensor import asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor of a symmetric positive definite a (a batch over the leading axes): L with a = L L^T, or
    its transpose U = L^T when upper."""
    factor = _cholesky(a, symmetrize_input=symmetrize_input)
    return _vtape.swapaxes(factor, -1, -2) if upper else factor


def eigh(a, UPLO=None, symmetrize_input: bool = True):  # noqa: N803 (numpy's name)
    """Eigenvalues (ascending) and eigenvectors (columns) of a symmetric a. UPLO='U' reads the upper triangle (only
    with symmetrize_input=False; symmetrizing reads both)."""
    a = _t(a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', not {UPLO!r}")
    if UPLO == "U" and not symmetrize_input:
        a = _vtape.swapaxes(a, -1, -2)
    return _eigh(a, symmetrize_input=symmetrize_input)


def qr(a, mode: str = "reduced"):
    """The QR decomposition: (q, r) for mode 'reduced' (q [..., m, k], k = min(m, n)) or 'complete' (q square
    [..., m, m], r [..., m, n]), r alone for mode 'r'."""
    a = _t(a)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', not {mode!r}")
    m, n = a.shape[-2], a.shape[-1]
    if mode == "complete" and m > n:
        # Householder QR of [a | I]: its first n reflectors are a's, the others complete q; r's first n columns are
        # a's r, upper triangular, with zero rows below.
        eye = _vtape.broadcast_to(_vtape.eye(m, dtype=a.dtype_name), a.shape[:-1] + (m,))
        q, r = _vtape.qr(_vtape.concatenate([a, eye], a.ndim - 1))
        return q, _vtape.slice(r, a.ndim - 1, 0, n)
    q, r = _vtape.qr(a)
    return r if mode == "r" else (q, r)


def solve(a, b):
    """x with a x = b for square a (any invertible matrix; a batch over the leading axes): b a vector [n] or matrices
    [..., n, k]. By QR: x = R^-1 Q^T b."""
    a, b = _t(a), _t(b)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"solve: a must be square matrices, got shape {a.shape}")
    q, r = _vtape.qr(a)
    vector = b.ndim == 1
    rhs = _vtape.reshape(b, (b.shape[0], 1)) if vector else b
    x = _vtape.triangular_solve(r, _vtape.matmul(_vtape.swapaxes(q, -1, -2), rhs), lower=False)
    return _vtape.reshape(x, x.shape[:-1]) if vector else x


def inv(a):
    """The inverse of square a (by QR)."""
    a = _t(a)
    return solve(a, _vtape.broadcast_to(_vtape.eye(a.shape[-1], dtype=a.dtype_name), a.shape))


def norm(x, ord=None, axis=None, keepdims: bool = False):  # noqa: A002 (numpy's name)
    """The 2-norm of vectors (the Frobenius norm of a matrix when axis is None), or ord = 1, inf, -inf, 0 or any p for
    vectors, and 'fro' for matrices."""
    x = _t(x)
    matrix_axes = isinstance(axis, (tuple, list)) and len(axis) == 2
    if (matrix_axes or (axis is None and x.ndim == 2)) and ord not in (None, "fro"):
        raise NotImplementedError(f"norm: ord={ord!r} of matrices; vtape has the Frobenius norm (ord None or 'fro')")
    if ord in (None, 2, "fro"):
        return _vtape.sqrt(_vtape.sum(x * x, axis, keepdims))
    a = _vtape.abs(x)
    if ord == float("inf"):
        return _vtape.max(a, axis, keepdims)
    if ord == -float("inf"):
        return -_vtape.max(-a, axis, keepdims)
    if ord == 0:
        return _vtape.sum(x != 0, axis, keepdims).astype(x.dtype_name)
    if isinstance(ord, numbers.Number):
        return _vtape.sum(a ** float(ord), axis, keepdims) ** (1.0 / float(ord))
    raise ValueError(f"norm: ord {ord!r} is not supported")
