"""jax.scipy.special's functions models use, over vtape's tensors."""

from __future__ import annotations

from .. import _vtape
from .._tensor import asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """log(sum(b exp(a))) over axis, stably (b, when given, positive weights broadcast against a)."""
    if return_sign:
        raise NotImplementedError("logsumexp: return_sign; vtape computes the log of a positive sum")
    a = _t(a)
    if b is not None:
        a = a + _vtape.log(_t(b))
    return _vtape.logsumexp(a, axis, keepdims)


def gammaln(x):
    """log |gamma(x)|."""
    return _vtape.lgamma(x)


def digamma(x):
    """The derivative of gammaln."""
    return _vtape.digamma(x)


def polygamma(n, x):
    """The n-th derivative of digamma, for n = 0 (digamma) and 1 (trigamma)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return _vtape.trigamma(x)
    raise NotImplementedError(f"polygamma: order {n}; vtape has orders 0 and 1")


def erf(x):
    """The error function."""
    return _vtape.erf(x)


def erfc(x):
    """1 - erf(x), exact in the tail."""
    return _vtape.erfc(x)


def expit(x):
    """1 / (1 + exp(-x)), without overflow."""
    return _vtape.sigmoid(x)


def logit(p):
    """log(p / (1 - p))."""
    p = _t(p)
    return _vtape.log(p) - _vtape.log1p(-p)


def xlogy(x, y):
    """x log y, 0 where x is 0 (y = 0 included)."""
    x, y = _t(x), _t(y)
    return _vtape.where(x == 0, 0.0, x * _vtape.log(_vtape.where(x == 0, 1.0, y)))


def ndtr(x):
    """The standard normal CDF."""
    return 0.5 * _vtape.erfc(-_t(x) * 0.7071067811865476)
