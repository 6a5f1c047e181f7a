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


def from_dlpack(x) -> Tensor:
    """A tensor reading the memory of any object with __dlpack__ (numpy, PyTorch and JAX CPU arrays) without a
    copy."""
    return _vtape._from_array(x)


def _coerce_arguments(args) -> list:
    """An op's arguments with numpy arrays (and numpy scalars that are not Python floats) made tensors, also inside
    lists (concatenate, stack); Python numbers, shapes, strings and tensors stay as they are."""
    out = []
    for a in args:
        if isinstance(a, (np.ndarray, np.generic)) and not isinstance(a, (float, int)):
            a = asarray(a)
        elif isinstance(a, list) and any(isinstance(x, (Tensor, np.ndarray)) for x in a):
            a = [asarray(x) for x in a]
        out.append(a)
    return out


def _numpy(t: Tensor) -> np.ndarray:
    return np.asarray(t.__array_view__())


def _array(t: Tensor, dtype=None, copy=None):
    a = _numpy(t)
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return a.copy() if copy else a


def _operand(x):
    """A binary operator's other operand: a Python number as it is (a weak scalar), anything else as a tensor."""
    if isinstance(x, (Tensor, numbers.Number)) and not isinstance(x, bool):
        return x
    return asarray(x)


def _binary(name: str, reflected: bool = False):
    f = getattr(_vtape, name)
    if reflected:
        return lambda self, other: f(_operand(other), self)
    return lambda self, other: f(self, _operand(other))


def _logical(name: str, reflected: bool = False):
    """&, | and ^: logical ops of bool operands (a Python bool is one); numpy's bitwise ops on integers are not
    vtape's."""
    f = getattr(_vtape, name)

    def op(self, other):
        other = asarray(other)
        if self.dtype != np.bool_ or other.dtype != np.bool_:
            raise TypeError(f"{name}: & | ^ take bool tensors, got {self.dtype} and {other.dtype}; vtape has no "
                            f"bitwise ops (compare first, or call vtape.{name})")
        return f(other, self) if reflected else f(self, other)

    return op


def floor_divide(a, b):
    """a // b as numpy: floor(a / b), an integer when both are (exact while the quotient is below 2^53)."""
    ints = _is_int(a) and _is_int(b)
    q = _vtape.floor(_vtape.div(_operand(a), _operand(b)))
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


def _install() -> None:
    T = Tensor
    T.dtype = property(lambda t: np.dtype(t.dtype_name), doc="The element type, as a numpy dtype.")
    T.__array__ = _array
    T.numpy = lambda t: _numpy(t)
    T.item = lambda t: _numpy(t).item()
    T.tolist = lambda t: _numpy(t).tolist()
    T.__float__ = lambda t: float(_numpy(t))
    T.__int__ = lambda t: int(_numpy(t))

    def __index__(t):
        if t.dtype.kind != "i" or t.size != 1:
            raise TypeError("only an integer tensor of one element can be used as an index")
        return int(_numpy(t))

    T.__index__ = __index__

    def __bool__(t):
        if t.size != 1:
            raise ValueError("the truth value of a tensor with more than one element is ambiguous")
        return bool(_numpy(t))

    T.__bool__ = __bool__

    def __len__(t):
        if t.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return t.shape[0]

    T.__len__ = __len__
    T.__iter__ = lambda t: (t[i] for i in range(len(t)))
    T.__hash__ = None  # == is elementwise
    T.__array_ufunc__ = None  # numpy_array + tensor: numpy defers to the tensor's reflected operator
    for op, name in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("pow", "pow"),
                     ("matmul", "matmul")]:
        setattr(T, f"__{op}__", _binary(name))
        setattr(T, f"__r{op}__", _binary(name, reflected=True))
    for op, name in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
                     ("eq", "equal"), ("ne", "not_equal")]:
        setattr(T, f"__{op}__", _binary(name))
    # &, |, ^ and ~ are logical on bool tensors; numpy's bitwise meaning for integers is not vtape's.
    for op, name in [("and", "logical_and"), ("or", "logical_or"), ("xor", "logical_xor")]:
        setattr(T, f"__{op}__", _logical(name))
        setattr(T, f"__r{op}__", _logical(name, reflected=True))

    def __invert__(t):
        if t.dtype != np.bool_:
            raise TypeError(f"~ on a {t.dtype} tensor: vtape has no bitwise ops; ~ is logical not on bool tensors")
        return _vtape.logical_not(t)

    T.__invert__ = __invert__
    T.__floordiv__ = lambda a, b: floor_divide(a, b)
    T.__rfloordiv__ = lambda a, b: floor_divide(b if isinstance(b, numbers.Number) else asarray(b), a)
    T.__mod__ = lambda a, b: remainder(a, b)
    T.__rmod__ = lambda a, b: remainder(b if isinstance(b, numbers.Number) else asarray(b), a)
    T.__neg__ = lambda t: _vtape.neg(t)
    T.__pos__ = lambda t: t
    T.__abs__ = lambda t: _vtape.abs(t)
    T.__getitem__ = _getitem
    T.at = property(_At, doc="JAX's indexed updates: t.at[i].set(v), .add(v), .multiply(v), .get().")
    T.T = property(lambda t: _vtape.transpose(t, list(reversed(range(t.ndim)))), doc="The axes reversed.")
    T.mT = property(lambda t: _vtape.swapaxes(t, -1, -2), doc="The last two axes swapped.")
    T.reshape = lambda t, *shape: _vtape.reshape(t, shape[0] if len(shape) == 1 else shape)
    for name in ("sum", "mean", "max", "any", "all", "logsumexp"):
        setattr(T, name, (lambda f: lambda t, axis=None, keepdims=False: f(t, axis, keepdims))(getattr(_vtape, name)))
    T.__dlpack__ = lambda t, **kw: t.__array_view__().__dlpack__(**kw)
    T.__dlpack_device__ = lambda t: (1, 0)


_install()
