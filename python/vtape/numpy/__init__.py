"""jax.numpy's functions over vtape's tensors: `import vtape.numpy as jnp` in place of `import jax.numpy as jnp`.

The same names, arguments and semantics as jax.numpy (itself numpy's) for the functions models use; each is a vtape op
or a composition of ops, so it is differentiable under every transform and runs under vmap and jit. Arguments may be
tensors, numpy arrays or Python numbers. Where vtape differs (float64 by default, no bitwise ops, a solve of general
matrices by QR), docs/coming-from-jax.md says so.
"""

from __future__ import annotations

import builtins
import math
import numbers
import numpy as _np

from .. import _vtape
from .._tensor import Tensor, asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted
from . import linalg  # noqa: F401

# ---------------------------------------------------------------- dtypes and constants
float32 = "float32"
float64 = "float64"
int32 = "int32"
int64 = "int64"
bool_ = "bool"
pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None
ndarray = Tensor


# ---------------------------------------------------------------- elementwise
def _unary(name: str, doc: str):
    f = getattr(_vtape, name)

    def op(x):
        return f(x)  # the binding converts x as asarray does

    op.__name__ = name
    op.__doc__ = doc
    return op


exp = _unary("exp", "e^x.")
exp2 = _unary("exp2", "2^x.")
expm1 = _unary("expm1", "e^x - 1, exact near 0.")
log = _unary("log", "The natural logarithm.")
log1p = _unary("log1p", "log(1 + x), exact near 0.")
log2 = _unary("log2", "The base-2 logarithm.")
log10 = _unary("log10", "The base-10 logarithm.")
sqrt = _unary("sqrt", "The square root.")
square = _unary("square", "x^2.")
sin = _unary("sin", "The sine.")
cos = _unary("cos", "The cosine.")
tan = _unary("tan", "The tangent.")
arcsin = _unary("arcsin", "The inverse sine, in [-pi/2, pi/2].")
arccos = _unary("arccos", "The inverse cosine, in [0, pi].")
arctan = _unary("arctan", "The inverse tangent, in (-pi/2, pi/2).")
sinh = _unary("sinh", "The hyperbolic sine.")
cosh = _unary("cosh", "The hyperbolic cosine.")
tanh = _unary("tanh", "The hyperbolic tangent.")
arcsinh = _unary("arcsinh", "The inverse hyperbolic sine.")
arccosh = _unary("arccosh", "The inverse hyperbolic cosine, for x >= 1.")
arctanh = _unary("arctanh", "The inverse hyperbolic tangent, for |x| < 1.")
abs = _unary("abs", "|x|; gradient sign(x).")  # noqa: A001
absolute = abs
sign = _unary("sign", "-1, 0 or 1 (NaN stays NaN).")
negative = _unary("neg", "-x.")
logical_not = _unary("logical_not", "not x, as a bool tensor (nonzero is true).")
floor = _unary("floor", "The largest integer not above x (a float); gradient 0.")
ceil = _unary("ceil", "The smallest integer not below x (a float); gradient 0.")


def floor_divide(x1, x2):
    """x1 // x2: floor(x1 / x2), an integer when both are."""
    from .._tensor import floor_divide as fd

    return fd(_t(x1), x2 if isinstance(x2, numbers.Number) else _t(x2))


def remainder(x1, x2):
    """x1 % x2: x1 - x2 floor(x1 / x2), with x2's sign."""
    from .._tensor import remainder as rem

    return rem(_t(x1), x2 if isinstance(x2, numbers.Number) else _t(x2))


mod = remainder


def reciprocal(x):
    """1 / x."""
    return 1.0 / _t(x)


def _binary(name: str, doc: str):
    f = getattr(_vtape, name)

    def op(x1, x2):
        if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
            x1 = _asarray(x1)
        return f(x1 if isinstance(x1, (Tensor, numbers.Number)) else _asarray(x1),
                 x2 if isinstance(x2, (Tensor, numbers.Number)) else _asarray(x2))

    op.__name__ = name
    op.__doc__ = doc
    return op


add = _binary("add", "x1 + x2, broadcast.")
subtract = _binary("sub", "x1 - x2, broadcast.")
multiply = _binary("mul", "x1 * x2, broadcast.")
divide = _binary("div", "x1 / x2 (true division), broadcast.")
true_divide = divide
maximum = _binary("maximum", "The larger of x1 and x2 (NaN propagates); ties share the gradient.")
minimum = _binary("minimum", "The smaller of x1 and x2 (NaN propagates); ties share the gradient.")
less = _binary("less", "x1 < x2, as bools.")
less_equal = _binary("less_equal", "x1 <= x2, as bools.")
greater = _binary("greater", "x1 > x2, as bools.")
greater_equal = _binary("greater_equal", "x1 >= x2, as bools.")
equal = _binary("equal", "x1 == x2, as bools.")
not_equal = _binary("not_equal", "x1 != x2, as bools.")
logical_and = _binary("logical_and", "x1 and x2, as bools (nonzero is true).")
logical_or = _binary("logical_or", "x1 or x2, as bools (nonzero is true).")
logical_xor = _binary("logical_xor", "x1 xor x2, as bools (nonzero is true).")


def arctan2(x1, x2):
    """The angle of the point (x2, x1), in [-pi, pi]."""
    return _vtape.arctan2(_t(x1), _t(x2))


def power(x1, x2):
    """x1 ** x2, broadcast."""
    return _t(x1) ** x2 if isinstance(x2, numbers.Number) else _vtape.pow(_t(x1), _t(x2))


def hypot(x1, x2):
    """sqrt(x1^2 + x2^2), scaled by the larger magnitude so that it neither overflows nor underflows."""
    a, b = abs(_t(x1)), abs(_t(x2))
    big, small = maximum(a, b), minimum(a, b)
    safe = where(big == 0, 1.0, big)
    return where(big == 0, 0.0, big * sqrt(1.0 + square(small / safe)))


def isnan(x):
    """Whether each element is NaN."""
    x = _t(x)
    return x != x


def isfinite(x):
    """Whether each element is finite (not NaN or +-inf)."""
    x = _t(x)
    return (x == x) & (abs(x) < math.inf) if x.dtype.kind == "f" else full_like(x, True, dtype=bool_)


def where(condition, x=None, y=None):
    """x where condition is true (nonzero), else y, all three broadcast; the three-argument form only (the one-argument
    form's shape depends on the values)."""
    if x is None or y is None:
        raise TypeError("vtape.numpy.where: give x and y (the one-argument form's shape depends on the values, "
                        "which jit and vmap do not allow, as in JAX)")
    c = _t(condition)
    if isinstance(x, numbers.Number) and isinstance(y, numbers.Number):
        x = _asarray(x)
    return _vtape.where(c, x if isinstance(x, (Tensor, numbers.Number)) else _asarray(x),
                        y if isinstance(y, (Tensor, numbers.Number)) else _asarray(y))


def clip(a, a_min=None, a_max=None):
    """a limited to [a_min, a_max] (either may be None); the bounds may be arrays, broadcast."""
    a = _t(a)
    if isinstance(a_min, numbers.Number) and isinstance(a_max, numbers.Number) and a.dtype.kind == "f":
        return _vtape.clip(a, float(a_min), float(a_max))
    if a_min is not None:
        a = where(a < a_min, a_min, a)
    if a_max is not None:
        a = where(a > a_max, a_max, a)
    return a


# ---------------------------------------------------------------- reductions
# numpy's positional order: (a, axis, dtype, out, keepdims); out must be None (tensors are immutable).
def _result(r: Tensor, dtype, out) -> Tensor:
    if out is not None:
        raise TypeError("vtape.numpy: out= is not supported (tensors are immutable); use the returned tensor")
    return r if dtype is None else r.astype(_dtype(dtype))


def sum(a, axis=None, dtype=None, out=None, keepdims=False):  # noqa: A001
    """The sum over axis (all axes when None); a bool tensor's trues counted in int64."""
    return _result(_vtape.sum(_t(a), axis, keepdims), dtype, out)


def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    """The mean over axis (all axes when None); float64 for integers and bools."""
    return _result(_vtape.mean(_t(a), axis, keepdims), dtype, out)


def any(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """Whether any element over axis is true (nonzero)."""
    return _result(_vtape.any(_t(a), axis, keepdims), None, out)


def all(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """Whether every element over axis is true (nonzero)."""
    return _result(_vtape.all(_t(a), axis, keepdims), None, out)


def max(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """The maximum over axis; ties share the gradient, NaN propagates."""
    return _result(_vtape.max(_t(a), axis, keepdims), None, out)


amax = max


def min(a, axis=None, out=None, keepdims=False):  # noqa: A001
    """The minimum over axis; ties share the gradient, NaN propagates."""
    a = _t(a)
    if a.dtype == _np.bool_:
        return all(a, axis, out, keepdims)
    return _result(-_vtape.max(-a, axis, keepdims), None, out)


amin = min


def _axis_list(a: Tensor, axis) -> list[int]:
    if axis is None:
        return list(range(a.ndim))
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    return sorted(int(x) % a.ndim for x in axes)


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    """The product over axis, by a tree of pairwise products (log2 n ops per axis); differentiable, zeros included.
    Bools multiply as int64, as numpy's."""
    a = _t(a)
    if a.dtype == _np.bool_:
        a = a.astype(int64)
    axes = _axis_list(a, axis)
    for ax in axes:
        n = a.shape[ax]
        if n == 0:
            shape = list(a.shape)
            shape[ax] = 1
            a = ones(tuple(shape), dtype=a.dtype)
            continue
        while n > 1:
            half = n // 2
            lo = _vtape.slice(a, ax, 0, half)
            hi = _vtape.slice(a, ax, half, 2 * half)
            prod_pairs = lo * hi
            a = prod_pairs if n % 2 == 0 else _vtape.concatenate([prod_pairs, _vtape.slice(a, ax, 2 * half, n)], ax)
            n = a.shape[ax]
    if not keepdims:
        a = _vtape.reshape(a, tuple(s for i, s in enumerate(a.shape) if i not in axes))
    return _result(a, dtype, out)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The variance over axis, divided by n - ddof (inf, or NaN for a zero sum, when n <= ddof, as numpy)."""
    a = _t(a)
    if a.dtype.kind != "f":
        a = a.astype(float64)
    n = 1
    for ax in _axis_list(a, axis):
        n *= a.shape[ax]
    centred = a - mean(a, axis, keepdims=True)
    return _result(sum(centred * centred, axis, keepdims=keepdims) * (1.0 / (n - ddof) if n > ddof else math.inf),
                   dtype, out)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The standard deviation over axis, sqrt(var)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims))


def _arg_extreme(a: Tensor, axis, keepdims: bool, largest: bool) -> Tensor:
    a = _t(a)
    if axis is None:
        rank = a.ndim
        flat = _arg_extreme(_vtape.reshape(a, (-1,)), 0, False, largest)
        return _vtape.reshape(flat, (1,) * rank) if keepdims else flat
    axis = int(axis) % a.ndim
    n = a.shape[axis]
    if n == 0:
        raise ValueError(f"arg{'max' if largest else 'min'}: an empty axis {axis} of shape {a.shape}")
    m = max(a, axis, keepdims=True) if largest else min(a, axis, keepdims=True)
    # The first index of the extreme, or of the first NaN (numpy's rule): the smallest index among the hits.
    hit = where(m != m, a != a, a == m)
    shape = [1] * a.ndim
    shape[axis] = n
    index = _vtape.reshape(arange(n), tuple(shape))
    return min(where(hit, index, n), axis, keepdims=keepdims)


def argmax(a, axis=None, out=None, keepdims=False):
    """The index of the largest element over axis (the first, or the first NaN), int64."""
    return _result(_arg_extreme(a, axis, keepdims, True), None, out)


def argmin(a, axis=None, out=None, keepdims=False):
    """The index of the smallest element over axis (the first, or the first NaN), int64."""
    return _result(_arg_extreme(a, axis, keepdims, False), None, out)


def cumsum(a, axis=None):
    """Running sums along axis (the flattened array when None)."""
    a = _t(a)
    if axis is None:
        a, axis = _vtape.reshape(a, (-1,)), 0
    return _vtape.cumsum(a, axis)


# ---------------------------------------------------------------- creation
def _dtype(dtype, default="float64"):
    return default if dtype is None else _np.dtype(dtype).name


def array(obj, dtype=None):
    """A tensor of obj: a tensor, a numpy array, or nested lists and tuples that may hold tensors (traced ones too),
    which are stacked."""
    return _asarray(obj, dtype=dtype)


def asarray(a, dtype=None):
    """As array."""
    return array(a, dtype)


def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(s) for s in shape)


def zeros(shape, dtype=None):
    """A tensor of zeros (float64 unless dtype says)."""
    return _vtape.zeros(_shape(shape), dtype=_dtype(dtype))


def ones(shape, dtype=None):
    """A tensor of ones (float64 unless dtype says)."""
    return _vtape.ones(_shape(shape), dtype=_dtype(dtype))


def full(shape, fill_value, dtype=None):
    """A tensor of fill_value (its dtype, or float64 for a float, unless dtype says)."""
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else "int64" if isinstance(fill_value, numbers.Integral) \
            else "float64"
    return _vtape.full(_shape(shape), float(fill_value), dtype=_dtype(dtype))


def zeros_like(a, dtype=None):
    """Zeros of a's shape and dtype."""
    a = _t(a)
    return zeros(a.shape, dtype=dtype or a.dtype)


def ones_like(a, dtype=None):
    """Ones of a's shape and dtype."""
    a = _t(a)
    return ones(a.shape, dtype=dtype or a.dtype)


def full_like(a, fill_value, dtype=None):
    """fill_value in a's shape and dtype."""
    a = _t(a)
    return _vtape.full(a.shape, float(fill_value), dtype=_dtype(dtype or a.dtype))


def eye(N, M=None, k=0, dtype=None):
    """The N x M identity (ones on the k-th diagonal)."""
    M = N if M is None else M
    return _asarray(_np.eye(N, M, k), dtype=_dtype(dtype))


def identity(n, dtype=None):
    """The n x n identity."""
    return eye(n, dtype=dtype)


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop): arange(n) is 0 .. n-1. int64 when every bound is an integer, else
    float64, unless dtype says."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    ints = builtins.all(isinstance(v, numbers.Integral) for v in (start, stop, step))
    return _vtape.arange(float(start), float(stop), float(step), dtype=_dtype(dtype, "int64" if ints else "float64"))


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    """num evenly spaced values from start to stop (stop left out when endpoint is False)."""
    if not endpoint:
        stop = start + (stop - start) * (num - 1) / num if num > 0 else stop
    return _vtape.linspace(float(start), float(stop), int(num), dtype=_dtype(dtype))


def meshgrid(*xi, indexing="xy"):
    """Coordinate matrices from coordinate vectors ('xy': the first two outputs transposed, as numpy)."""
    xs = [_t(x) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = i
        if indexing == "xy" and n >= 2 and i < 2:
            axis = 1 - i
        view = [1] * n
        view[axis] = x.shape[0]
        out.append(_vtape.broadcast_to(_vtape.reshape(x, tuple(view)), tuple(shape)))
    return out


# ---------------------------------------------------------------- shapes
def reshape(a, newshape=None, shape=None):
    """a with a new shape (one entry may be -1)."""
    return _vtape.reshape(_t(a), _shape(newshape if shape is None else shape))


def ravel(a):
    """a flattened, row-major."""
    return _vtape.reshape(_t(a), (-1,))


def transpose(a, axes=None):
    """a with its axes permuted (reversed when axes is None)."""
    a = _t(a)
    return _vtape.transpose(a, list(reversed(range(a.ndim))) if axes is None else [int(x) for x in axes])


def swapaxes(a, axis1, axis2):
    """a with two axes swapped."""
    return _vtape.swapaxes(_t(a), axis1, axis2)


def moveaxis(a, source, destination):
    """a with one axis moved to another position."""
    a = _t(a)
    order = [i for i in range(a.ndim) if i != source % a.ndim]
    order.insert(destination % a.ndim, source % a.ndim)
    return _vtape.transpose(a, order)


def expand_dims(a, axis):
    """a with new axes of size 1 at axis (an int or a tuple)."""
    a = _t(a)
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    n = a.ndim + len(axes)
    axes = sorted(int(x) % n for x in axes)
    shape = list(a.shape)
    for ax in axes:
        shape.insert(ax, 1)
    return _vtape.reshape(a, tuple(shape))


def squeeze(a, axis=None):
    """a without its axes of size 1 (only those in axis, when given; each must have size 1)."""
    a = _t(a)
    if axis is None:
        axes = [i for i, s in enumerate(a.shape) if s == 1]
    else:
        axes = [int(x) % a.ndim for x in ([axis] if isinstance(axis, numbers.Integral) else axis)]
        for ax in axes:
            if a.shape[ax] != 1:
                raise ValueError(f"squeeze: axis {ax} of shape {a.shape} has size {a.shape[ax]}, not 1")
    return _vtape.reshape(a, tuple(s for i, s in enumerate(a.shape) if i not in axes))


def broadcast_to(a, shape):
    """a broadcast to shape."""
    return _vtape.broadcast_to(_t(a), _shape(shape))


def concatenate(arrays, axis=0):
    """The arrays joined along axis."""
    return _vtape.concatenate([_t(x) for x in arrays], axis)


def stack(arrays, axis=0):
    """The arrays stacked along a new axis."""
    return _vtape.stack([_t(x) for x in arrays], axis)


def hstack(arrays):
    """Joined along axis 1 (axis 0 for vectors)."""
    xs = [_t(x) for x in arrays]
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def vstack(arrays):
    """Stacked as rows: vectors become rows of a matrix."""
    xs = [_t(x) for x in arrays]
    return concatenate([_vtape.reshape(x, (1, -1)) if x.ndim == 1 else x for x in xs], 0)


def split(ary, indices_or_sections, axis=0):
    """ary cut along axis into equal sections (an int) or at the given indices."""
    a = _t(ary)
    n = a.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        k = int(indices_or_sections)
        if n % k:
            raise ValueError(f"split: axis {axis} of size {n} does not divide into {k} equal sections")
        cuts = [n // k * i for i in range(1, k)]
    else:  # negative indices count from the end, as numpy's
        cuts = [int(i) + n if int(i) < 0 else int(i) for i in indices_or_sections]
    bounds = [0] + cuts + [n]
    return [_vtape.slice(a, axis, builtins.min(lo, n), builtins.min(builtins.max(lo, hi), n))
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def take(a, indices, axis=None):
    """The elements (axis None: of the flattened a) or rows along axis at integer indices."""
    a = _t(a)
    if axis is None:
        a, axis = _vtape.reshape(a, (-1,)), 0
    return _vtape.take(a, _t(indices), axis)


def tril(m, k=0):
    """The lower triangle of the last two axes from the k-th diagonal, the rest 0."""
    return _vtape.tril(_t(m), k)


def triu(m, k=0):
    """The upper triangle of the last two axes from the k-th diagonal, the rest 0."""
    return _vtape.triu(_t(m), k)


def diag(v, k=0):
    """A vector's square matrix with it on the k-th diagonal, or a matrix's k-th diagonal."""
    v = _t(v)
    if v.ndim == 2:
        return diagonal(v, k)
    d = _vtape.diag(v)
    if k == 0:
        return d
    m, j = v.shape[0], builtins.abs(k)
    side, below = zeros((m, j), v.dtype), zeros((j, m + j), v.dtype)
    if k > 0:  # columns of zeros on the left, rows of zeros below
        return concatenate([concatenate([side, d], 1), below], 0)
    return concatenate([below, concatenate([d, side], 1)], 0)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The offset-th diagonal of the matrices in axes (axis1, axis2), as a last axis."""
    a = _t(a)
    axis1, axis2 = axis1 % a.ndim, axis2 % a.ndim
    if (axis1, axis2) != (a.ndim - 2, a.ndim - 1):
        rest = [i for i in range(a.ndim) if i not in (axis1, axis2)]
        a = _vtape.transpose(a, rest + [axis1, axis2])
    rows, cols = a.shape[-2], a.shape[-1]
    if offset > 0:
        a = _vtape.slice(a, a.ndim - 1, builtins.min(offset, cols), cols)
    elif offset < 0:
        a = _vtape.slice(a, a.ndim - 2, builtins.min(-offset, rows), rows)
    k = builtins.min(a.shape[-2], a.shape[-1])
    a = _vtape.slice(_vtape.slice(a, a.ndim - 2, 0, k), a.ndim - 1, 0, k)
    return _vtape.diagonal(a)


def trace(a, offset=0, axis1=0, axis2=1):
    """The sum of the offset-th diagonal."""
    return sum(diagonal(a, offset, axis1, axis2), -1)


# ---------------------------------------------------------------- products
def matmul(a, b):
    """The matrix product (numpy's matmul: vectors as rows or columns, leading axes broadcast)."""
    return _vtape.matmul(_t(a), _t(b))


def dot(a, b):
    """numpy's dot: a product of scalars, an inner product of vectors, or a matrix product (the last axis of a with the
    second to last of b, for up to 2-D b)."""
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim > 2:
        raise NotImplementedError("vtape.numpy.dot: b of more than two axes; use matmul or einsum")
    return _vtape.matmul(a, b)


def vdot(a, b):
    """The inner product of the flattened a and b."""
    return sum(ravel(a) * ravel(b))


def inner(a, b):
    """The sum over the last axes of a and b."""
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim == 1:
        return sum(a * b, -1)
    return _vtape.matmul(a, _vtape.swapaxes(b, -1, -2)) if b.ndim == 2 and a.ndim <= 2 else \
        tensordot(a, b, ([-1], [-1]))


def outer(a, b):
    """The outer product of the flattened a and b."""
    return _vtape.reshape(ravel(a), (-1, 1)) * _vtape.reshape(ravel(b), (1, -1))


def tensordot(a, b, axes=2):
    """The sum over axes of a and b: an int n (a's last n with b's first n) or two lists of axes."""
    a, b = _t(a), _t(b)
    if isinstance(axes, numbers.Integral):
        axes_a = list(range(a.ndim - axes, a.ndim))
        axes_b = list(range(axes))
    else:
        listed = [[x] if isinstance(x, numbers.Integral) else list(x) for x in axes]
        axes_a = [int(x) % a.ndim for x in listed[0]]
        axes_b = [int(x) % b.ndim for x in listed[1]]
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    k = 1
    for i in axes_a:
        k *= a.shape[i]
    ma = _vtape.reshape(_vtape.transpose(a, free_a + axes_a), (-1, k))
    mb = _vtape.reshape(_vtape.transpose(b, axes_b + free_b), (k, -1))
    return _vtape.reshape(_vtape.matmul(ma, mb), tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def einsum(subscripts: str, *operands, optimize=None, precision=None):
    """Einstein summation (explicit '->' or numpy's implicit output, '...' for broadcast leading axes), by diagonals,
    transposes, sums and batched matrix products; more than two operands are contracted left to right, each step
    keeping the letters later operands or the output need. optimize and precision are accepted and ignored."""
    del optimize, precision
    xs = [_t(x) for x in operands]
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(xs):
        raise ValueError(f"einsum: '{subscripts}' names {len(terms)} operands, got {len(xs)}")
    if "..." in spec:
        terms, xs, output = _einsum_ellipses(terms, xs, output if arrow else None)
        arrow = "->"
    if not arrow:
        letters = "".join(terms)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    while len(terms) > 2:  # left to right: the first two become one operand of the letters still needed
        needed = "".join(terms[2:]) + output
        kept = "".join(dict.fromkeys(c for c in terms[0] + terms[1] if c in needed))
        terms, xs = [kept] + terms[2:], [_contract(terms[:2], xs[:2], kept)] + xs[2:]
    return _contract(terms, xs, output)


def _einsum_ellipses(terms: list, xs: list, output):
    """'...' replaced by letters of its own (aligned from the right, size-1 axes broadcast, as numpy's)."""
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in "".join(terms) + (output or "")]
    ranks = [x.ndim - (len(t) - 3) if "..." in t else 0 for t, x in zip(terms, xs)]
    if builtins.any(r < 0 for r in ranks):
        raise ValueError("einsum: an operand has fewer axes than its subscripts name")
    width = builtins.max(ranks)
    letters = "".join(free[:width])
    sizes = [1] * width
    for r, x, t in zip(ranks, xs, terms):
        at = t.index("...") if "..." in t else 0
        for k in range(r):
            n = x.shape[at + k]
            if n != 1 and sizes[width - r + k] not in (1, n):
                raise ValueError(f"einsum: the '...' axes of shapes {[tuple(x.shape) for x in xs]} do not broadcast")
            sizes[width - r + k] = builtins.max(sizes[width - r + k], n)
    new_terms, new_xs = [], []
    for r, x, t in zip(ranks, xs, terms):
        if "..." in t:
            at = t.index("...")
            target = x.shape[:at] + tuple(sizes[width - r:]) + x.shape[at + r:]
            if tuple(target) != tuple(x.shape):
                x = _vtape.broadcast_to(x, target)
            t = t.replace("...", letters[width - r:])
        new_terms.append(t)
        new_xs.append(x)
    if output is None:  # implicit: the '...' axes first, then the letters named once
        named = "".join(t for t in terms).replace("...", "")
        output = letters + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    else:
        output = output.replace("...", letters)
    return new_terms, new_xs, output


def _contract(terms: list, xs: list, output: str):
    """One or two operands contracted to the output's letters."""
    sizes: dict[str, int] = {}
    prepared = []
    for idx, (term, x) in enumerate(zip(terms, xs)):
        other = terms[1 - idx] if len(terms) == 2 else ""
        if len(term) != x.ndim:
            raise ValueError(f"einsum: '{term}' names {len(term)} axes of a tensor of shape {x.shape}")
        # A letter repeated within one operand: its diagonal.
        while builtins.any(term.count(c) > 1 for c in term):
            c = next(c for c in term if term.count(c) > 1)
            i, j = term.index(c), term.index(c, term.index(c) + 1)
            x = diagonal(x, 0, i, j)
            term = "".join(t for n, t in enumerate(term) if n not in (i, j)) + c
        for c, s in zip(term, x.shape):
            if sizes.setdefault(c, s) != s:
                raise ValueError(f"einsum: axis '{c}' has sizes {sizes[c]} and {s}")
        # Letters in neither the output nor the other operand are summed now.
        alone = [c for c in term if c not in output and c not in other]
        if alone:
            x = sum(x, tuple(term.index(c) for c in alone))
            term = "".join(c for c in term if c not in alone)
        prepared.append((term, x))
    if len(prepared) == 1:
        term, x = prepared[0]
        return _vtape.transpose(x, [term.index(c) for c in output]) if term != output else x
    (ta, a), (tb, b) = prepared
    shared = [c for c in ta if c in tb]
    batch = [c for c in shared if c in output]
    contracted = [c for c in shared if c not in output]
    free_a = [c for c in ta if c not in shared]
    free_b = [c for c in tb if c not in shared]

    def size(c):
        return sizes[c]

    k = 1
    for c in contracted:
        k *= size(c)
    ma = _vtape.transpose(a, [ta.index(c) for c in batch + free_a + contracted])
    mb = _vtape.transpose(b, [tb.index(c) for c in batch + contracted + free_b])
    bshape = tuple(size(c) for c in batch)
    ma = _vtape.reshape(ma, bshape + (int(_np.prod([size(c) for c in free_a])), k))
    mb = _vtape.reshape(mb, bshape + (k, int(_np.prod([size(c) for c in free_b]))))
    r = _vtape.matmul(ma, mb)
    order = batch + free_a + free_b
    r = _vtape.reshape(r, tuple(size(c) for c in order))
    return _vtape.transpose(r, [order.index(c) for c in output]) if "".join(order) != output else r


# ---------------------------------------------------------------- misc
def shape(a) -> tuple:
    """a's shape."""
    return _t(a).shape


def ndim(a) -> int:
    """a's number of axes."""
    return _t(a).ndim


def size(a) -> int:
    """a's number of elements."""
    return _t(a).size


def astype(x, dtype):
    """x converted to dtype."""
    return _t(x).astype(_dtype(dtype))


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "builtins", "math", "numbers", "Tensor")]
