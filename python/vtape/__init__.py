"""vtape: batched autodiff for Gaussian models, from Python.

The C++ library's tensors, ops and transforms (docs/guide.md), in JAX's shape: models written for jax.numpy and
jax.grad/vmap/jit port by changing the imports. Tensors are immutable; numpy arrays go in and out without copies
where their layout allows (vtape.asarray, np.asarray(t), DLPack). jit traces a Python function once per structure,
shapes and dtypes of its arguments and then runs the plan with no Python in the loop and the GIL released;
jit(vmap(f)) never traces again for a new batch size.
"""

from ._vtape import (  # noqa: F401
    CholeskyFactor,
    Error,
    NotPositiveDefinite,
    Tensor,
    __version__,
    abs,
    add,
    all,
    any,
    arange,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    as_batch,
    astype,
    batch_max,
    batch_mean,
    batch_sum,
    broadcast_to,
    ceil,
    cho_factor,
    cho_solve,
    cholesky,
    cholesky_checked,
    clip,
    concatenate,
    cos,
    cosh,
    cumsum,
    diag,
    diagonal,
    digamma,
    div,
    eigh,
    equal,
    erf,
    erfc,
    exp,
    exp10,
    exp2,
    expm1,
    eye,
    floor,
    full,
    greater,
    greater_equal,
    less,
    less_equal,
    lgamma,
    linspace,
    load_npy,
    log,
    log10,
    log1p,
    log2,
    logdet,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    minimum,
    mul,
    neg,
    not_equal,
    ones,
    pow,
    qr,
    rand,
    randn,
    reshape,
    save_npy,
    scatter_add,
    scatter_set,
    segment_max,
    segment_mean,
    segment_sum,
    sigmoid,
    sign,
    sin,
    sinh,
    slice,
    softplus,
    solve,
    sqrt,
    square,
    stack,
    stop_gradient,
    sub,
    sum,
    swapaxes,
    take,
    tan,
    tanh,
    transpose,
    triangular_solve,
    trigamma,
    tril,
    triu,
    unbatch,
    where,
    zeros,
)
from ._loops import cond, fori_loop, scan, while_loop  # noqa: F401
from ._tensor import asarray, from_dlpack, _coerce_arguments  # noqa: F401
from ._transforms import (  # noqa: F401
    Jitted,
    StructureError,
    batched,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacrev,
    jit,
    jvp,
    value_and_grad,
    vjp,
    vmap,
)
from ._tree import tree_flatten, tree_map, tree_unflatten  # noqa: F401

float32 = "float32"
float64 = "float64"
int32 = "int32"
int64 = "int64"
bool_ = "bool"


# The ops take numpy arrays (and lists of them) wherever they take tensors, as jax.numpy's do.
def _accept_arrays():
    import builtins
    import functools

    from . import _vtape

    for name in dir(_vtape):
        f = getattr(_vtape, name)
        if name.startswith("_") or isinstance(f, type) or not callable(f) or name.endswith("_flat"):
            continue
        if name in ("tracking",):
            continue

        def wrapper(*args, _f=f, **kwargs):
            args = _coerce_arguments(args)
            try:
                return _f(*args, **kwargs)
            except TypeError:
                # A float where only a tensor is taken (vtape.exp(0.5)): as a float64 scalar tensor. Where a float
                # is taken (add(x, 0.5): a weak scalar) the first call did not raise.
                floats = [asarray(a) if isinstance(a, float) else a for a in args]
                if builtins.all(a is b for a, b in zip(floats, args)):  # this module's all is vtape.all
                    # Only Python numbers (vtape.add(0, 0), as lax.add of two ints): the first as a tensor.
                    if not args or not builtins.all(isinstance(a, (int, float)) for a in args):
                        raise
                    floats = [asarray(args[0])] + list(args[1:])
                return _f(*floats, **kwargs)

        globals()[name] = functools.wraps(f)(wrapper)


_accept_arrays()
del _accept_arrays

from ._linalg import cholesky, eigh, triangular_solve  # noqa: E402,F401  (JAX's forms over the C++ ops)
from . import lax, nn, numpy, scipy, tree_util  # noqa: E402,F401  (JAX's namespaces: jax.numpy, jax.lax, ...)
