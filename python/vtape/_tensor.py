"""vtape.Tensor's Python side: numpy conversions, operators, indexing, and asarray.

Tensors are immutable. numpy arrays come in without a copy where they are row-major and of a supported dtype
(float32, float64, int32, int64, bool): the tensor then reads the array's memory, so the array must not be written while
the tensor (or a jitted function that captured it) is in use. Going out, np.asarray(t) is a read-only view of the
tensor's memory where its layout allows.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _vtape
from ._vtape import Tensor

_SUPPORTED = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)}


def asarray(x, dtype=None) -> Tensor:
    """x as a Tensor: a Tensor as it is (converted when `dtype` is given), a numpy array or anything with the buffer
    protocol or DLPack without a copy where its layout allows, Python numbers and sequences through numpy (floats as
    float64, ints as int64, bools as bool)."""
    if isinstance(x, Tensor):
        return x if dtype is None or np.dtype(dtype) == x.dtype else x.astype(np.dtype(dtype).name)
    if isinstance(x, np.ndarray) and dtype is None and x.dtype in _SUPPORTED:
        return _vtape._from_array(x)
    if isinstance(x, (list, tuple)) and _holds_tensor(x):  # [a, b] of traced scalars: stacked, so derivatives flow
        out = _vtape.stack([asarray(e) for e in x], 0)
        return out if dtype is None else out.astype(np.dtype(dtype).name)
    a = np.asarray(x, dtype=dtype)
    if a.dtype not in _SUPPORTED:
        kind = a.dtype.kind
        # Nothing is dropped silently: vtape has no complex dtype, and an unsigned integer must fit int64.
        if kind == "c":
            raise TypeError(f"vtape.asarray: complex input ({a.dtype}) is not supported: vtape's tensors are real")
        if kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            raise TypeError(f"vtape.asarray: {a.dtype} values above {np.iinfo(np.int64).max} do not fit int64")
        a = a.astype(np.float64 if kind == "f" else np.int64 if kind in "iu" else a.dtype)
        if a.dtype not in _SUPPORTED:
            raise TypeError(f"vtape.asarray: cannot make a tensor of {x!r} (dtype {a.dtype})")
    return _vtape._from_array(a)


def _holds_tensor(x) -> bool:
    return isinstance(x, Tensor) or isinstance(x, (list, tuple)) and any(_holds_tensor(e) for e in x)


def from_dlpack(x) -> Tensor:
    """A tensor reading the memory of any object with __dlpack__ (numpy, PyTorch and JAX CPU arrays) without a
    copy."""
    return _vtape._from_array(x)


def _logical(name: str):
    """&, | and ^: logical ops of bool operands (a Python bool is one); numpy's bitwise ops on integers are not
    vtape's."""
    f = getattr(_vtape, name)

    def op(a, b):
        a, b = asarray(a), asarray(b)
        if a.dtype != np.bool_ or b.dtype != np.bool_:
            raise TypeError(f"{name}: & | ^ take bool tensors, got {a.dtype} and {b.dtype}; vtape has no "
                            f"bitwise ops (compare first, or call vtape.{name})")
        return f(a, b)

    op.__name__ = name
    return op


logical_and = _logical("logical_and")
logical_or = _logical("logical_or")
logical_xor = _logical("logical_xor")


def floor_divide(a, b):
    """a // b as numpy: floor(a / b), an integer when both are (exact while the quotient is below 2^53)."""
    ints = _is_int(a) and _is_int(b)
    q = _vtape.floor(_vtape.div(a, b))
    return q.astype("int64") if ints else q


def remainder(a, b):
    """a % b as numpy: a - b floor(a / b), with b's sign."""
    return a - b * floor_divide(a, b)


def _is_int(x) -> bool:
    return x.dtype.kind in "iub" if isinstance(x, Tensor) else isinstance(x, numbers.Integral)


def _normalize_index(index, ndim: int):
    if not isinstance(index, tuple):
        index = (index,)
    if any(i is Ellipsis for i in index):
        at = next(k for k, i in enumerate(index) if i is Ellipsis)
        used = sum(1 for i in index if i is not None and i is not Ellipsis)
        index = index[:at] + (slice(None),) * (ndim - used) + index[at + 1 :]
    return index


def _getitem(t: Tensor, index) -> Tensor:
    """Basic indexing: ints, slices (any step), None (a new axis) and Ellipsis; an integer tensor or array along one
    axis takes those rows (vtape.take)."""
    if isinstance(index, (Tensor, np.ndarray, list)):
        return _vtape.take(t, asarray(index), 0)
    index = _normalize_index(index, t.ndim)
    if sum(1 for i in index if i is not None) > t.ndim:
        raise IndexError(f"too many indices for a tensor of shape {t.shape}")
    out, axis, shape = t, 0, []
    array_at = None  # where the integer array's axes are in the result
    for i in index:
        if i is None:
            shape.append(1)
            continue
        n = out.shape[axis]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step > 0:
                out = _vtape.slice(out, axis, start, max(start, stop), step)
            else:  # backwards: a take of those rows (its adjoint scatters them back)
                out = _vtape.take(out, asarray(np.arange(start, stop, step, dtype=np.int64)), axis)
            shape.append(out.shape[axis])
            axis += 1
        elif isinstance(i, (Tensor, np.ndarray, list)):  # an integer array along this axis: its rows (a take)
            if any(isinstance(j, (Tensor, np.ndarray, list)) for j in index if j is not i):
                raise IndexError("vtape: one integer array per index (numpy's rules for several are not vtape's)")
            idx = asarray(i)
            out = _vtape.take(out, idx, axis)
            array_at, array_rank = len(shape), idx.ndim
            shape.extend(idx.shape)
            axis += idx.ndim
        elif isinstance(i, (numbers.Integral, np.integer)):
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of range for axis {axis} of size {n}")
            k %= n
            out = _vtape.slice(out, axis, k, k + 1)
            axis += 1
        else:
            raise IndexError(f"vtape: unsupported index {i!r}: use ints, slices, None, ... or an integer array")
    shape.extend(out.shape[axis:])
    out = _vtape.reshape(out, tuple(shape)) if tuple(shape) != out.shape else out
    # numpy's rule: with an array, the ints are indices of the same kind, and where these are not side by side the
    # array's axes come first.
    advanced = [k for k, i in enumerate(index)
                if isinstance(i, (Tensor, np.ndarray, list, numbers.Integral, np.integer))]
    if array_at is not None and advanced != list(range(advanced[0], advanced[-1] + 1)):
        order = list(range(array_at, array_at + array_rank))
        out = _vtape.transpose(out, order + [d for d in range(out.ndim) if d not in order])
    return out


class _At:
    """t.at[index]: JAX's indexed updates, returning new tensors (vtape's are immutable). The index is an int, a slice,
    an integer array, or a tuple of them where every entry but one is a full slice `:` (one indexed axis)."""

    def __init__(self, t: Tensor):
        self._t = t

    def __getitem__(self, index):
        return _AtIndex(self._t, index)


class _AtIndex:
    def __init__(self, t: Tensor, index):
        self.t = t
        index = _normalize_index(index, t.ndim)
        picked = [k for k, i in enumerate(index) if not (isinstance(i, slice) and i == slice(None))]
        if len(picked) > 1 or any(i is None for i in index):
            raise IndexError(f"vtape: .at[{index!r}]: index one axis (the others ':'), by an int, slice or int array")
        self.axis = picked[0] if picked else 0
        i = index[self.axis] if picked else slice(None)
        n = t.shape[self.axis]
        self.scalar = isinstance(i, (numbers.Integral, np.integer))
        if isinstance(i, slice):
            i = np.arange(n)[i]
        self.indices = asarray(np.int64(i) if self.scalar else i)
        if self.scalar:
            self.indices = _vtape.reshape(self.indices, (1,))

    def _values(self, values) -> Tensor:
        shape = self.t.shape[:self.axis] + tuple(self.indices.shape) + self.t.shape[self.axis + 1:]
        v = values if isinstance(values, Tensor) else asarray(np.asarray(values, dtype=self.t.dtype))
        if self.scalar and v.ndim == len(shape) - 1:
            v = _vtape.reshape(v, v.shape[:self.axis] + (1,) + v.shape[self.axis:]) if v.ndim >= self.axis else v
        return _vtape.broadcast_to(_vtape.astype(v, self.t.dtype_name), shape)

    def get(self):
        """t[index]."""
        return _getitem(self.t, self._index())

    def _index(self):
        return (slice(None),) * self.axis + (self.indices if not self.scalar else int(np.asarray(self.indices)[0]),)

    def set(self, values):
        """t with values written at index (where an index repeats, its last value)."""
        return _vtape.scatter_set(self.t, self.indices, self._values(values), self.axis)

    def add(self, values):
        """t with values added at index (repeated indices add up)."""
        return _vtape.scatter_add(self.t, self.indices, self._values(values), self.axis)

    def multiply(self, values):
        """t with its elements at index multiplied by values (each index once)."""
        return self.set(_vtape.take(self.t, self.indices, self.axis) * self._values(values))


def _iterate(t: Tensor):
    """A tensor's rows, one by one."""
    return (t[i] for i in range(len(t)))
