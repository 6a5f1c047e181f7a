"""jax.nn's functions models use, over vtape's tensors: `from vtape import nn`."""

from __future__ import annotations

from . import _vtape
from ._tensor import asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted


def sigmoid(x):
    """1 / (1 + exp(-x)), without overflow."""
    return _vtape.sigmoid(x)


def softplus(x):
    """log(1 + exp(x)), without overflow."""
    return _vtape.softplus(x)


def relu(x):
    """max(x, 0); gradient 0 at 0 (as JAX)."""
    x = _t(x)
    return _vtape.where(x > 0, x, 0)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -_vtape.softplus(-_t(x))


def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) over axis, stably."""
    return _vtape.logsumexp(_t(x), axis, keepdims)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along axis."""
    x = _t(x)
    return x - _vtape.logsumexp(x, axis, True)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along axis, stably."""
    return _vtape.exp(log_softmax(x, axis))
