"""JAX's test utilities, ported line for line over vtape and numpy (no jax import).

check_grads, check_jvp and check_vjp are jax/_src/public_test_util.py's: the same random direction
(np.random.RandomState(0)), the same central differences (eps 1e-4), the same tolerances, scaled by
the arrays' sizes as there. They call vtape.jvp and vtape.vjp where JAX calls jax.jvp and jax.vjp.
The dtype rules are JAX's with jax_enable_x64 on: vtape's default float is float64, and a Python
float is float64 (JAX without x64 would canonicalize it to float32).

assert_all_close, check_against_numpy and compile_and_check are JaxTestCase's assertAllClose,
_CheckAgainstNumpy and _CompileAndCheck (jax/_src/test_util.py); rand_default and rand_small its
samplers.
"""

from __future__ import annotations

import functools
import operator
from functools import partial
from typing import Any

import numpy as np

import vtape as vt

EPS = 1e-4

# public_test_util._default_tolerance, for the dtypes vtape has (and bool, for comparisons).
_default_tolerance: dict = {
    np.dtype(np.bool_): 0,
    np.dtype(np.int32): 0,
    np.dtype(np.int64): 0,
    np.dtype(np.float16): 1e-3,
    np.dtype(np.float32): 1e-6,
    np.dtype(np.float64): 1e-15,
    np.dtype(np.complex64): 1e-6,
    np.dtype(np.complex128): 1e-15,
}


def default_tolerance():
    return _default_tolerance


default_gradient_tolerance: dict = {
    np.dtype(np.float16): 1e-2,
    np.dtype(np.float32): 2e-3,
    np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3,
    np.dtype(np.complex128): 1e-5,
}


# Pytrees: vtape's (tuples, lists, dicts, None), with tensors and numpy arrays as leaves.
def tree_map(f, tree, *rest):
    return vt.tree_map(f, tree, *rest)


def tree_reduce(f, tree):
    leaves, _ = vt.tree_flatten(tree)
    return functools.reduce(f, leaves)


def _numpy_leaves(tree):
    """A tree's vtape tensors as numpy arrays (copies), everything else as it is."""
    return tree_map(lambda x: np.array(x) if isinstance(x, vt.Tensor) else x, tree)


def _dtype(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, int):
        return np.dtype(np.int64)
    if isinstance(x, float):
        return np.dtype(np.float64)
    if isinstance(x, complex):
        return np.dtype(np.complex128)
    return np.asarray(x).dtype


def is_python_scalar(val: Any) -> bool:
    return not isinstance(val, np.generic) and isinstance(val, (bool, int, float, complex))


def _assert_numpy_allclose(a, b, atol=None, rtol=None, err_msg=""):
    kw = {}
    if atol:
        kw["atol"] = atol
    if rtol:
        kw["rtol"] = rtol
    with np.errstate(invalid="ignore"):
        # TODO(phawkins) in JAX: assert_allclose sometimes reports invalid value errors.
        np.testing.assert_allclose(a, b, **kw, err_msg=err_msg)


def tolerance(dtype, tol=None):
    tol = {} if tol is None else tol
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(key): value for key, value in tol.items()}
    dtype = np.dtype(dtype)
    return tol.get(dtype, default_tolerance()[dtype])


def _assert_numpy_close(a, b, atol=None, rtol=None, err_msg=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape, err_msg)
    atol = max(tolerance(a.dtype, atol), tolerance(b.dtype, atol))
    rtol = max(tolerance(a.dtype, rtol), tolerance(b.dtype, rtol))
    _assert_numpy_allclose(a, b, atol=atol * a.size, rtol=rtol * b.size, err_msg=err_msg)


def check_close(xs, ys, atol=None, rtol=None, err_msg=""):
    assert_close = partial(_assert_numpy_close, atol=atol, rtol=rtol, err_msg=err_msg)
    tree_map(assert_close, xs, ys)


def _check_dtypes_match(xs, ys):
    def _assert_dtypes_match(x, y):
        assert _dtype(x) == _dtype(y), (_dtype(x), _dtype(y))

    tree_map(_assert_dtypes_match, xs, ys)


def inner_prod(xs, ys):
    def contract(x, y):
        return np.real(np.dot(np.conj(x).reshape(-1), y.reshape(-1)))

    return tree_reduce(np.add, tree_map(contract, xs, ys))


def _safe_subtract(x, y, *, dtype):
    """Subtraction that with `inf - inf == 0` semantics."""
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dtype), np.subtract(x, y, dtype=dtype))


def _preserve_input_types(f):
    def wrapped(*args):
        dtype = _dtype(args[0])
        result = np.array(f(*args), dtype=dtype)
        if all(is_python_scalar(arg) for arg in args):
            result = result.item()
        return result

    return wrapped


add = partial(tree_map, _preserve_input_types(operator.add))
sub = partial(tree_map, _preserve_input_types(operator.sub))
safe_sub = partial(tree_map, lambda x, y: _safe_subtract(x, y, dtype=_dtype(x)))
conj = partial(tree_map, _preserve_input_types(np.conj))


def scalar_mul(xs, a):
    def mul(x):
        dtype = _dtype(x)
        result = np.multiply(x, np.array(a, dtype=dtype), dtype=dtype)
        return result.item() if is_python_scalar(x) else result

    return tree_map(mul, xs)


def rand_like(rng, x):
    shape = np.shape(x)
    dtype = _dtype(x)
    randn = lambda: np.asarray(rng.randn(*shape), dtype=dtype)  # noqa: E731
    if np.issubdtype(dtype, np.complexfloating):
        result = randn() + dtype.type(1.0j) * randn()
    else:
        result = randn()
    return result.item() if is_python_scalar(x) else result


def numerical_jvp(f, primals, tangents, eps=EPS):
    delta = scalar_mul(tangents, eps)
    f_pos = _numpy_leaves(f(*add(primals, delta)))
    f_neg = _numpy_leaves(f(*sub(primals, delta)))
    return scalar_mul(safe_sub(f_pos, f_neg), 0.5 / eps)


def _merge_tolerance(tol, default):
    if tol is None:
        return default
    if not isinstance(tol, dict):
        return tol
    out = default.copy()
    for k, v in tol.items():
        out[np.dtype(k)] = v
    return out


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """A JVP from automatic differentiation against finite differences, in one random direction."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rng = np.random.RandomState(0)
    tangent = tree_map(partial(rand_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_out_expected = f(*args)
    _check_dtypes_match(v_out, v_out_expected)
    t_out_expected = numerical_jvp(f, args, tangent, eps=eps)
    # In principle we should expect exact equality of v_out and v_out_expected (JAX's comment: nondeterminism).
    check_close(_numpy_leaves(v_out), _numpy_leaves(v_out_expected), atol=atol, rtol=rtol,
                err_msg=f"{err_msg} primal" if err_msg else "primal")
    check_close(_numpy_leaves(t_out), t_out_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """A VJP from automatic differentiation against finite differences, in one random direction."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    _rand_like = partial(rand_like, np.random.RandomState(0))
    v_out, vjpfun = f_vjp(*args)
    v_out_expected = f(*args)
    check_close(_numpy_leaves(v_out), _numpy_leaves(v_out_expected), atol=atol, rtol=rtol,
                err_msg=f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_map(_rand_like, args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_map(_rand_like, _numpy_leaves(v_out))
    cotangent_out = conj(_numpy_leaves(vjpfun(conj(cotangent))))
    ip = inner_prod(tangent, cotangent_out)
    ip_expected = inner_prod(tangent_out, cotangent)
    check_close(ip, ip_expected, atol=atol, rtol=rtol,
                err_msg=(f"{err_msg} cotangent projection" if err_msg else "cotangent projection"))


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Forward and reverse derivatives up to `order` against finite differences (jtu.check_grads)."""
    args = tuple(args)
    eps = eps or EPS

    _check_jvp = partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
    _check_vjp = partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

    def _check_grads(f, args, order, err_msg=""):
        if "fwd" in modes:
            fwd_msg = f"JVP of {err_msg}" if err_msg else "JVP"
            _check_jvp(f, partial(vt.jvp, f), args, err_msg=fwd_msg)
            if order > 1:
                _check_grads(partial(vt.jvp, f), (args, args), order - 1, fwd_msg)

        if "rev" in modes:
            rev_msg = f"VJP of {err_msg}" if err_msg else "VJP"
            _check_vjp(f, partial(vt.vjp, f), args, err_msg=rev_msg)
            if order > 1:
                def f_vjp(*args):
                    out_primal_py, vjp_py = vt.vjp(f, *args)
                    return vjp_py(out_primal_py)

                _check_grads(f_vjp, args, order - 1, rev_msg)

    _check_grads(f, args, order)


# jax/_src/test_util.py: samplers and JaxTestCase's assertions.
def _rand_dtype(rand, shape, dtype, scale=1.0, post=lambda x: x):
    vals = np.asarray(scale * rand(*shape)).astype(dtype)
    return np.asarray(post(vals), dtype)


def rand_default(rng, scale=3):
    return partial(_rand_dtype, rng.randn, scale=scale)


def rand_small(rng):
    return partial(_rand_dtype, rng.randn, scale=1e-3)


def rand_positive(rng):
    return partial(_rand_dtype, rng.rand, scale=2, post=lambda x: x + 1)


def _is_sequence(x) -> bool:
    return isinstance(x, (tuple, list))


def assert_all_close(actual, desired, *, check_dtypes=True, atol=None, rtol=None, err_msg=""):
    """JaxTestCase.assertAllClose: pytrees of arrays (vtape tensors, numpy arrays, numbers) close to
    JAX's per-dtype default tolerances unless given; dtypes equal when check_dtypes."""
    if isinstance(actual, dict):
        assert isinstance(desired, dict), f"Expected dict, got {desired}"
        assert set(actual) == set(desired)
        for k in actual:
            assert_all_close(actual[k], desired[k], check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                             err_msg=err_msg)
    elif _is_sequence(actual):
        assert _is_sequence(desired), f"Expected sequence, got {desired}"
        assert len(actual) == len(desired), (len(actual), len(desired))
        for a, d in zip(actual, desired):
            assert_all_close(a, d, check_dtypes=check_dtypes, atol=atol, rtol=rtol, err_msg=err_msg)
    elif hasattr(actual, "__array__") or np.isscalar(actual):
        assert hasattr(desired, "__array__") or np.isscalar(desired), f"Expected array-like, got {desired}"
        if check_dtypes:
            assert _dtype(actual) == _dtype(desired), (_dtype(actual), _dtype(desired))
        actual, desired = np.asarray(actual), np.asarray(desired)
        assert actual.shape == desired.shape, (actual.shape, desired.shape)
        atol = max(tolerance(actual.dtype, atol), tolerance(desired.dtype, atol))
        rtol = max(tolerance(actual.dtype, rtol), tolerance(desired.dtype, rtol))
        _assert_numpy_allclose(actual, desired, atol=atol, rtol=rtol, err_msg=err_msg)
    elif actual == desired:
        return
    else:
        raise TypeError((type(actual), type(desired)))


def check_against_numpy(numpy_reference_op, vtape_op, args_maker, check_dtypes=True, tol=None, atol=None,
                        rtol=None):
    """JaxTestCase._CheckAgainstNumpy."""
    args = args_maker()
    ans = vtape_op(*args)
    numpy_ans = numpy_reference_op(*args)
    assert_all_close(ans, numpy_ans, check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol)


def compile_and_check(fun, args_maker, *, check_dtypes=True, tol=None, rtol=None, atol=None):
    """JaxTestCase._CompileAndCheck: jit(fun) equals fun, and its second call runs the plan without
    calling the Python function again."""
    args = args_maker()
    calls = []

    def wrapped_fun(*args):
        calls.append(None)
        return fun(*args)

    python_ans = fun(*args)
    cfun = vt.jit(wrapped_fun)
    monitored_ans = cfun(*args)
    traced = len(calls)
    assert traced >= 1
    compiled_ans = cfun(*args)
    assert len(calls) == traced, "the jitted function traced again on its second call"
    assert_all_close(monitored_ans, python_ans, check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol)
    assert_all_close(compiled_ans, python_ans, check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol)

    args = args_maker()
    python_ans = fun(*args)
    compiled_ans = cfun(*args)
    assert_all_close(compiled_ans, python_ans, check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol)
