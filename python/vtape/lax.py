"""jax.lax's control flow and the few primitives models use, over vtape's tensors: `from vtape import lax`.

scan, fori_loop, while_loop and cond are vtape's (vtape.scan, ...); switch, map, select, stop_gradient,
dynamic_slice and dynamic_update_slice are compositions of them and of vtape's ops, differentiable under every
transform.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from . import _vtape
from ._loops import cond, fori_loop, scan, while_loop  # noqa: F401
from ._tensor import Tensor, asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted


def stop_gradient(x):
    """x, through which no derivative flows (a pytree of tensors: each leaf)."""
    from ._tree import tree_map

    return tree_map(lambda v: _vtape.stop_gradient(_t(v)), x)


def select(pred, on_true, on_false):
    """on_true where pred is true, else on_false, elementwise (pred bool, all of one shape)."""
    return _vtape.where(_t(pred), _t(on_true), _t(on_false))


def switch(index, branches: Sequence[Callable], *operands):
    """branches[index](*operands), index clamped to [0, len(branches) - 1] as JAX does; a traced or batched index runs
    the branches as nested conds (each branch's derivative masked as cond's)."""
    branches = list(branches)
    if not branches:
        raise ValueError("switch: no branches")
    if isinstance(index, numbers.Integral):
        return branches[min(max(int(index), 0), len(branches) - 1)](*operands)
    index = _t(index)
    if len(branches) == 1:
        return branches[0](*operands)

    def pick(k: int):
        if k == len(branches) - 1:
            return branches[k](*operands)
        return cond(index <= k, lambda: branches[k](*operands), lambda: pick(k + 1))

    return pick(0)


def map(f: Callable, xs: Any):  # noqa: A001 (JAX's name)
    """[f(x) for x in xs] stacked, by a scan over xs' leading axis (carrying one unused number)."""
    return scan(lambda carry, x: (carry, f(x)), _vtape.zeros(()), xs)[1]


def _starts(x: Tensor, start_indices) -> list:
    if len(start_indices) != x.ndim:
        raise ValueError(f"dynamic_slice: {len(start_indices)} start indices for a tensor of shape {x.shape}")
    return list(start_indices)


def _start(start, n: int, size: int):
    """A start index as JAX reads it: negative counts from the end, then clamped so that `size` elements fit."""
    if isinstance(start, numbers.Integral):
        s = int(start) + n if int(start) < 0 else int(start)
        return min(max(s, 0), n - size)
    s = _t(start).astype("int64")
    s = _vtape.where(s < 0, s + n, s)
    return _vtape.clip(s, 0.0, float(n - size)).astype("int64")


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start + size] along every axis, starts that may be traced; a negative start counts from the end
    and each is clamped so that the slice fits (JAX's rules)."""
    x = _t(operand)
    for axis, (start, size) in enumerate(zip(_starts(x, start_indices), slice_sizes)):
        s = _start(start, x.shape[axis], size)
        if isinstance(s, int):
            x = _vtape.slice(x, axis, s, s + size)
            continue
        x = _vtape.take(x, _vtape.arange(0.0, float(size), 1.0, dtype="int64") + s, axis)
    return x


def dynamic_update_slice(operand, update, start_indices):
    """operand with update written at start_indices (starts that may be traced, clamped so that update fits)."""
    x, u = _t(operand), _t(update)
    starts = _starts(x, start_indices)
    # The update's elements' flat positions in x, then one scatter of them.
    flat_index = None
    for axis, start in enumerate(starts):
        s = _start(start, x.shape[axis], u.shape[axis])
        size = u.shape[axis]
        along = _vtape.arange(0.0, float(size), 1.0, dtype="int64") + s
        shape = [1] * x.ndim
        shape[axis] = size
        along = _vtape.reshape(along, tuple(shape))
        stride = 1
        for later in x.shape[axis + 1:]:
            stride *= later
        term = along * stride
        flat_index = term if flat_index is None else flat_index + term
    positions = _vtape.reshape(_vtape.broadcast_to(flat_index, u.shape), (-1,))
    flat = _vtape.reshape(x, (-1,))
    return _vtape.reshape(_vtape.scatter_set(flat, positions, _vtape.reshape(u.astype(x.dtype_name), (-1,)), 0),
                          x.shape)


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    """operand[start:start + slice_size] along one axis (the start may be traced; JAX's clamping)."""
    x = _t(operand)
    axis %= x.ndim
    starts = [0] * x.ndim
    starts[axis] = start_index
    sizes = list(x.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    """operand's slice at index along axis (the index may be traced), kept as an axis of length 1 unless keepdims is
    false."""
    x = dynamic_slice_in_dim(operand, index, 1, axis)
    if keepdims:
        return x
    axis %= x.ndim
    return _vtape.reshape(x, x.shape[:axis] + x.shape[axis + 1:])


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    """operand with update written from start_index along one axis (the start may be traced)."""
    x = _t(operand)
    axis %= x.ndim
    starts = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    """operand with update written at index along axis (update with or without that axis of length 1)."""
    x, u = _t(operand), _t(update)
    axis %= x.ndim
    if u.ndim == x.ndim - 1:
        u = _vtape.reshape(u, u.shape[:axis] + (1,) + u.shape[axis:])
    return dynamic_update_slice_in_dim(x, u, index, axis)
