"""JAX's tests/api_test.py (APITest, JitTest), ported to vtape's grad, value_and_grad, vjp, jvp, jacfwd, jacrev,
hessian, vmap and jit.

JAX's jnp.dot and jnp.outer are written with vtape's matmul and broadcasting; its float0 cotangents of integer
arguments are vtape's integer zeros (a deliberate difference).
"""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

import _jtu as jtu
import vtape as vt

deliberate = pytest.mark.deliberate
unsupported = pytest.mark.unsupported


def defect(why: str):
    return pytest.mark.xfail(strict=True, reason=f"defect: {why}")


# --- grad, value_and_grad ---------------------------------------------------------------------------------------


def test_grad_argnums():
    """JAX: APITest.test_grad_argnums (positional arguments: the flag keyword is test_grad_argnums_kwargs)"""
    def f(x, y, z):
        return 1.0 * x + 2.0 * y + 3.0 * z

    assert float(vt.grad(f)(1.0, 1.0, 1.0)) == 1.0
    assert float(vt.grad(f, argnums=1)(1.0, 1.0, 1.0)) == 2.0
    g = vt.grad(f, argnums=(2, 0))(1.0, 1.0, 1.0)
    assert isinstance(g, tuple) and tuple(float(v) for v in g) == (3.0, 1.0)


def test_grad_argnums_kwargs():
    """JAX: APITest.test_grad_argnums (f(x, y, z, flag=True))"""
    def f(x, y, z, flag=False):
        assert flag
        return 1.0 * x + 2.0 * y + 3.0 * z

    assert float(vt.grad(f)(1.0, 1.0, 1.0, flag=True)) == 1.0


def test_value_and_grad_argnums():
    """JAX: APITest.test_value_and_grad_argnums"""
    def f(x, y, z):
        return 1.0 * x + 2.0 * y + 3.0 * z

    y = float(f(1.0, 1.0, 1.0))
    v, g = vt.value_and_grad(f)(1.0, 1.0, 1.0)
    assert (float(v), float(g)) == (y, 1.0)
    v, g = vt.value_and_grad(f, argnums=1)(1.0, 1.0, 1.0)
    assert (float(v), float(g)) == (y, 2.0)
    v, g = vt.value_and_grad(f, argnums=(2, 0))(1.0, 1.0, 1.0)
    assert (float(v), tuple(float(t) for t in g)) == (y, (3.0, 1.0))


def test_grad_negative_argnums():
    """JAX: APITest.test_grad_negative_argnums (JAX asserts no crash; here d(x.sum() y.sum())/dy = x.sum())"""
    rng = np.random.RandomState(0)
    x, y = rng.randn(16, 16), rng.randn(16, 16)
    g = vt.grad(lambda x, y: x.sum() * y.sum(), argnums=-1)(x, y)
    jtu.assert_all_close(g, np.full((16, 16), x.sum()), rtol=1e-13)


@deliberate("grad of jit(f) traces f's Python twice, once for f's plan and once for its pullback's (which runs f "
            "under a transform, so gradients f takes inside stay differentiable), then never again; JAX traces once")
def test_grad_of_jit():
    """JAX: APITest.test_grad_of_jit"""
    side = []

    @vt.jit
    def f(x):
        side.append(None)
        return x * x

    assert float(vt.grad(f)(1.0)) == 2.0
    assert len(side) == 2
    assert float(vt.grad(f)(2.0)) == 4.0
    assert len(side) == 2


def test_jit_of_grad():
    """JAX: APITest.test_jit_of_grad"""
    side = []

    @vt.jit
    def f(x):
        side.append(None)
        return x * x

    g = vt.jit(vt.grad(f))
    assert float(g(1.0)) == 2.0
    assert len(side) == 1
    assert float(g(2.0)) == 4.0
    assert len(side) == 1


def test_bad_input():
    """JAX: APITest.test_bad_input, test_grad_bad_input"""
    f = lambda x: x  # noqa: E731
    with pytest.raises(TypeError):
        vt.grad(f)("foo")
    with pytest.raises(TypeError):
        vt.jit(f)("foo")


@pytest.mark.parametrize("fun, arg", [
    pytest.param(lambda x: (x, x), 1.0, id="test_grad_tuple_output"),
    pytest.param(lambda x: (), np.zeros(3), id="test_grad_unit_output"),
    pytest.param(lambda x: x, np.zeros(3), id="test_grad_nonscalar_output"),
])
def test_grad_non_scalar_output(fun, arg):
    """JAX: APITest.test_grad_tuple_output, test_grad_unit_output, test_grad_nonscalar_output"""
    with pytest.raises(TypeError, match="scalar"):
        vt.grad(fun)(arg)


def test_grad_nonscalar_output_hint():
    """JAX: APITest.test_grad_nonscalar_output_hint (the message names the output's shape and the Jacobian)"""
    with pytest.raises(TypeError) as info:
        vt.grad(lambda x: vt.stack([x**2]))(1.0)
    assert "(1,)" in str(info.value) and "jacrev" in str(info.value)
    with pytest.raises(TypeError) as info:
        vt.value_and_grad(lambda x: x)(np.zeros(3))
    assert "(3,)" in str(info.value) and "jacrev" in str(info.value)


def test_grad_of_int_errors():
    """JAX: APITest.test_grad_of_int_errors"""
    with pytest.raises(TypeError):
        vt.grad(lambda x: x**2)(3)


def test_grad_of_int_index():
    """JAX: APITest.test_grad_of_int_index (the integer's zero is of its own dtype, as in test_vjp_of_int_index)"""
    grad_x, grad_i = vt.grad(lambda x, i: x[i], argnums=(0, 1), allow_int=True)(np.ones(2), 1)
    jtu.assert_all_close(grad_x, np.array([0.0, 1.0]))
    assert int(grad_i) == 0


@deliberate("an integer primal's cotangent is a zero of its own dtype (vtape has no float0)")
def test_vjp_of_int_index():
    """JAX: APITest.test_vjp_of_int_index"""
    primal, fn_vjp = vt.vjp(lambda x, i: x[i], np.ones(2) * 2, 1)
    tangent_x, tangent_i = fn_vjp(1.0)
    assert float(primal) == 2.0
    jtu.assert_all_close(tangent_x, np.array([0.0, 1.0]))
    assert tangent_i.dtype == np.int64 and tangent_i.shape == () and int(tangent_i) == 0


# --- complex inputs: JAX raises, or differentiates holomorphically -----------------------------------------------

COMPLEX_DROPPED = ("vtape.asarray casts a complex array or Python complex to float64, dropping the imaginary part "
                   "(numpy's ComplexWarning only), so transforms return a real result for complex input where JAX "
                   "raises TypeError (or differentiates the complex function)")


@pytest.mark.filterwarnings("ignore:Casting complex values")
@pytest.mark.parametrize("transform, f, x", [
    pytest.param(vt.grad, vt.sin, 1 + 2j, id="test_complex_grad_raises_error"),
    pytest.param(vt.jacrev, vt.sin, 1 + 2j, id="test_complex_output_jacrev_raises_error"),
    pytest.param(vt.jacfwd, vt.sin, 1 + 2j, id="test_complex_input_jacfwd_raises_error"),
    pytest.param(vt.jacfwd, lambda x: x**2, 3.0 + 1j, id="test_jacfwd_of_complex_errors"),
])
def test_complex_input_raises(transform, f, x):
    """JAX: APITest.test_complex_grad_raises_error, test_complex_output_jacrev_raises_error,
    test_complex_input_jacfwd_raises_error, test_jacfwd_of_complex_errors"""
    with pytest.raises(TypeError):
        transform(f)(x)


def test_grad_complex_result_errors():
    """JAX: APITest.test_grad_complex_result_errors"""
    with pytest.raises(TypeError):
        vt.grad(lambda x: x**2 + 1j)(3.0)


@pytest.mark.filterwarnings("ignore:Casting complex values")
def test_nonholomorphic_grad():
    """JAX: APITest.test_nonholomorphic_grad (JAX's complex gradient; a refusal (TypeError, vtape.Error) would do
    until vtape has complex dtypes)"""
    zs = 0.5j * np.arange(5) + np.arange(5)
    expected = np.array([0.0 + 0.0j, -0.80430663 + 0.40215331j, -0.70368982 + 0.35184491j, 0.1886467 - 0.09432335j,
                         0.86873727 - 0.43436864j])
    try:
        ans = vt.grad(lambda z: vt.sum(vt.cos(vt.abs(z))))(zs)
    except (TypeError, vt.Error):
        return
    jtu.assert_all_close(np.asarray(ans), expected, check_dtypes=False, atol=1e-5, rtol=1e-5)


@unsupported("complex dtypes (grad(holomorphic=))")
def test_holomorphic_grad():
    """JAX: APITest.test_holomorphic_grad"""
    out = vt.grad(vt.sin, holomorphic=True)(1 + 2j)
    jtu.assert_all_close(out, 2.0327230070196656 - 3.0518977991518j, check_dtypes=False)


# --- Jacobians and Hessians -------------------------------------------------------------------------------------


def test_jacobian():
    """JAX: APITest.test_jacobian"""
    R = np.random.RandomState(0).randn
    A = R(4, 3)
    x = R(3)
    f = lambda x: A @ x  # noqa: E731
    jtu.assert_all_close(vt.jacfwd(f)(x), A)
    jtu.assert_all_close(vt.jacrev(f)(x), A)
    f = lambda x: vt.tanh(A @ x)  # noqa: E731
    jtu.assert_all_close(vt.jacfwd(f)(x), vt.jacrev(f)(x))


def test_hessian():
    """JAX: APITest.test_hessian"""
    R = np.random.RandomState(0).randn
    A = R(4, 4)
    x = R(4)
    f = lambda x: x @ (A @ x)  # noqa: E731
    jtu.assert_all_close(vt.hessian(f)(x), A + A.T, rtol=1e-14, atol=1e-14)


def test_hessian_aux():
    """JAX: APITest.test_hessian_aux"""
    R = np.random.RandomState(0).randn
    A = R(4, 4)
    x = R(4)
    f = lambda x: (x @ (A @ x), x)  # noqa: E731
    h, aux = vt.hessian(f, has_aux=True)(x)
    jtu.assert_all_close(h, A + A.T, rtol=1e-14, atol=1e-14)
    jtu.assert_all_close(aux, x)


@pytest.mark.parametrize("jacfun", [vt.jacfwd, vt.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_on_pytrees(jacfun):
    """JAX: APITest.test_jacobian_on_pytrees"""
    ans = jacfun(lambda x, y: (x, y))(0.0, 1.0)
    jtu.assert_all_close(ans, (1.0, 0.0), check_dtypes=False)
    ans = jacfun(lambda x, y: (x, y), 1)(0.0, 1.0)
    jtu.assert_all_close(ans, (0.0, 1.0), check_dtypes=False)
    ans = jacfun(lambda x, y: (x, y), (0, 1))(0.0, 1.0)
    jtu.assert_all_close(ans, ((1.0, 0.0), (0.0, 1.0)), check_dtypes=False)
    ans = jacfun(lambda x: x[:2])((1.0, 2.0, 3.0))
    jtu.assert_all_close(ans, ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), check_dtypes=False)
    R = np.random.RandomState(0).randn
    x, y = R(2), R(3)
    ans = jacfun(lambda x, y: {"x": x, "xy": x[:, None] * y[None, :]})(x, y)  # jnp.outer(x, y)
    expected = {"x": np.eye(2), "xy": np.kron(np.eye(2), y[:, None]).reshape(2, 3, 2)}
    jtu.assert_all_close(ans, expected, check_dtypes=False)


@deliberate("vtape.hessian is of a scalar function (jacfwd of grad; its docstring and the guide); JAX's is "
            "jacfwd(jacrev(f)) of any output. jacfwd(jacrev(f)) gives JAX's result")
def test_hessian_on_pytrees():
    """JAX: APITest.test_hessian_on_pytrees"""
    f = lambda x: vt.stack(list(x)) ** 2  # noqa: E731  (jnp.array(x)**2)
    with pytest.raises(vt.StructureError, match="scalar"):
        vt.hessian(f)((1.0, 2.0))
    ans = vt.jacfwd(vt.jacrev(f))((1.0, 2.0))
    expected = ((np.array([2.0, 0.0]), np.array([0.0, 0.0])), (np.array([0.0, 0.0]), np.array([0.0, 2.0])))
    jtu.assert_all_close(ans, expected, check_dtypes=False)


JAC = {"rev": vt.jacrev, "fwd": vt.jacfwd}


@pytest.mark.parametrize("outer, inner", list(itertools.product(["rev", "fwd"], repeat=2)))
@pytest.mark.parametrize("i, j, shape", [(0, 0, (5, 5)), (1, 1, (2, 2)), (1, 0, (2, 5)), (0, 1, (5, 2))])
def test_issue1372(outer, inner, i, j, shape):
    """JAX: APITest.test_issue1372 (the shapes of nested Jacobians; here also their values, 2 I or 0)"""
    f = lambda x, u: x @ x + u @ u  # noqa: E731
    x, u = np.ones(5), np.ones(2)
    h = JAC[outer](JAC[inner](f, i), j)(x, u)
    assert h.shape == shape
    jtu.assert_all_close(h, 2 * np.eye(*shape) if i == j else np.zeros(shape), check_dtypes=False)


def test_grad_and_aux_basic():
    """JAX: APITest.test_grad_and_aux_basic"""
    g, aux = vt.grad(lambda x: (x**3, [x**2]), has_aux=True)(3.0)
    jtu.assert_all_close(g, vt.grad(lambda x: x**3)(3.0))
    jtu.assert_all_close(aux, [9.0], check_dtypes=False)


def test_grad_and_aux_error():
    """JAX: APITest.test_grad_and_aux_error"""
    with pytest.raises(TypeError, match="pair"):
        vt.grad(lambda x: (1, 2, 3), has_aux=True)(1.0)
    with pytest.raises(TypeError, match="pair"):
        vt.grad(lambda x: x, has_aux=True)(1.0)
    with pytest.raises(TypeError, match="pair"):
        vt.grad(lambda x: (x,), has_aux=True)(1.0)


@pytest.mark.parametrize("transform", ["grad", "jacfwd", "jacrev"])
def test_grad_and_aux_nested(transform):
    """JAX: APITest.test_grad_and_aux_nested, test_jacfwd_and_aux_nested, test_jacrev_and_aux_nested"""
    d = getattr(vt, transform)

    def f(x):
        _, aux = d(lambda x: (x**3, [x**3]), has_aux=True)(x)
        return aux[0]

    f2 = lambda x: x**3  # noqa: E731
    want = float(d(f2)(4.0))
    assert float(d(f)(4.0)) == want
    assert float(vt.jit(d(f))(4.0)) == want
    assert float(vt.jit(d(vt.jit(f)))(4.0)) == want

    def f(x):  # noqa: F811
        _, aux = d(lambda x: (x**3, [x**3]), has_aux=True)(x)
        return aux[0] * vt.sin(x)

    f2 = lambda x: x**3 * vt.sin(x)  # noqa: E731
    want = float(d(f2)(4.0))
    assert float(d(f)(4.0)) == want
    assert float(vt.jit(d(f))(4.0)) == want
    assert float(vt.jit(d(vt.jit(f)))(4.0)) == want


def test_grad_and_aux_constant():
    """JAX: APITest.test_grad_and_aux_constant"""
    g, aux = vt.grad(lambda x: (x**3, [4.0]), has_aux=True)(4.0)
    assert float(g) == float(vt.grad(lambda x: x**3)(4.0))
    assert [float(a) for a in aux] == [4.0]
    g, aux = vt.grad(lambda x: (x**3, [x**2, 4.0]), has_aux=True)(4.0)
    assert float(g) == float(vt.grad(lambda x: x**3)(4.0))
    assert [float(a) for a in aux] == [4.0**2, 4.0]


def test_grad_and_aux_no_tracers():
    """JAX: APITest.test_grad_and_aux_no_tracers (aux holds concrete tensors)"""
    _, aux = vt.grad(lambda x: (x**2, dict(identity=x, p1=x + 1)), has_aux=True)(3.0)
    assert isinstance(aux, dict)
    assert float(aux["identity"]) == 3.0 and float(aux["p1"]) == 4.0


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev"])
def test_jac_and_aux_basic(transform):
    """JAX: APITest.test_jacfwd_and_aux_basic, test_jacrev_and_aux_basic"""
    d = getattr(vt, transform)
    jac, aux = d(lambda x: (x**3, [x**2]), has_aux=True)(3.0)
    jtu.assert_all_close(jac, d(lambda x: x**3)(3.0))
    jtu.assert_all_close(aux, [9.0], check_dtypes=False)


# --- jvp, vjp ---------------------------------------------------------------------------------------------------


def test_jvp_and_aux_basic():
    """JAX: APITest.test_jvp_and_aux_basic"""
    primals, tangents, aux = vt.jvp(lambda x: (x**3, [x**2]), (3.0,), (4.0,), has_aux=True)
    expected_primals, expected_tangents = vt.jvp(lambda x: x**3, (3.0,), (4.0,))
    jtu.assert_all_close(primals, expected_primals)
    jtu.assert_all_close(tangents, expected_tangents)
    assert [float(a) for a in aux] == [9.0]


def test_jvp_mismatched_arguments():
    """JAX: APITest.test_jvp_mismatched_arguments (tangents missing, of another dtype (float32 against float64 where
    JAX's is float16 against float32), or of another shape)"""
    with pytest.raises(TypeError):
        vt.jvp(lambda x, y: x * y, (np.float32(2),), ())
    with pytest.raises(TypeError):
        vt.jvp(lambda x: -x, (np.float32(2),), (np.float64(4),))
    fun = lambda x: x + 1  # noqa: E731
    with pytest.raises(ValueError):
        vt.jvp(fun, (np.array([1.0, 2.0, 3.0]),), (np.array([1.0, 2.0, 3.0, 4.0]),))
    with pytest.raises(ValueError):
        vt.jvp(fun, (np.float32(10.0),), (np.array([1.0, 2.0, 3.0], dtype=np.float32),))
    with pytest.raises(ValueError):
        vt.jvp(fun, (np.array([1.0, 2.0, 3.0], dtype=np.float32),), (np.float32(20.0),))
    with pytest.raises(ValueError):
        vt.jvp(fun, (np.array([1.0, 2.0, 3.0]),), (20.0,))


@deliberate("jvp takes primals and tangents as sequences: a tuple of primals and a list of tangents of the same "
            "length match, where JAX requires the same container type")
def test_jvp_mismatched_containers():
    """JAX: APITest.test_jvp_mismatched_arguments (a tuple of primals, a list of tangents)"""
    y, t = vt.jvp(lambda x: -x, (np.float32(2),), [np.float32(2)])
    assert float(y) == -2.0 and float(t) == -2.0


def test_jvp_non_tuple_arguments():
    """JAX: APITest.test_jvp_non_tuple_arguments"""
    f = lambda x, y: x + y  # noqa: E731
    with pytest.raises(TypeError):
        vt.jvp(f, 0.0, (1.0,))
    with pytest.raises(TypeError):
        vt.jvp(f, (0.0,), np.array([1.0, 2.0]))


def test_vjp_mismatched_arguments():
    """JAX: APITest.test_vjp_mismatched_arguments"""
    _, pullback = vt.vjp(lambda x, y: x * y, np.float32(3), np.float32(4))
    with pytest.raises(ValueError):
        pullback((np.float32(7), np.float32(100)))
    with pytest.raises(ValueError):
        pullback(np.float64(42))


def test_vjp_bad_cotangent_shape():
    """JAX: APITest.test_vjp_bad_cotangent_shape"""
    x = np.ones((2, 5), dtype=np.float32)
    y = np.ones((5, 3), dtype=np.float32)
    _, pullback = vt.vjp(lambda x, y: x @ y, x, y)
    with pytest.raises(ValueError):
        pullback(np.ones((2, 4), dtype=np.float32))


@pytest.mark.parametrize("f", [lambda x: (x, x), lambda x: x], ids=["test_vjp_too_many_args",
                                                                      "test_vjp_multiple_arguments_error_message"])
def test_vjp_too_many_args(f):
    """JAX: APITest.test_vjp_too_many_args, test_vjp_multiple_arguments_error_message"""
    _, pullback = vt.vjp(f, 1.0)
    with pytest.raises(TypeError):
        pullback(1.0, 1.0)


def test_jvp_jit_cached():
    """JAX: APITest.test_jvp_jit_cached"""
    def func(x):
        def inner(y):
            return y * x

        res1 = vt.jit(inner)(4.0)
        res2 = vt.jit(inner)(5.0)
        return res1 + res2

    jtu.assert_all_close(vt.jvp(func, (5.0,), (1.0,)), (45.0, 9.0), check_dtypes=False)


# --- vmap -------------------------------------------------------------------------------------------------------


def test_vmap_in_axes_list():
    """JAX: APITest.test_vmap_in_axes_list"""
    dictionary = {"a": 5.0, "b": np.ones(2)}
    x = np.zeros(3)
    y = np.arange(3.0)
    f = lambda dct, x, y: dct["a"] + dct["b"] + x + y  # noqa: E731
    out1 = vt.vmap(f, (None, 0, 0))(dictionary, x, y)
    out2 = vt.vmap(f, [None, 0, 0])(dictionary, x, y)
    jtu.assert_all_close(out1, out2)
    jtu.assert_all_close(out1, 6.0 + np.arange(3.0)[:, None] * np.ones((3, 2)))


@pytest.mark.parametrize("in_axes, arg", [
    pytest.param((0, {"a": 0}), {"a": np.zeros((3, 3))}, id="test_vmap_in_axes_wrong_length_tuple_error"),
    pytest.param(([0],), np.ones(3), id="test_vmap_in_axes_tree_prefix_error"),
])
def test_vmap_in_axes_errors(in_axes, arg):
    """JAX: APITest.test_vmap_in_axes_wrong_length_tuple_error, test_vmap_in_axes_tree_prefix_error"""
    with pytest.raises(ValueError):
        vt.vmap(lambda x: x, in_axes=in_axes)(arg)


def test_vmap_in_axes_leaf_types():
    """JAX: APITest.test_vmap_in_axes_leaf_types"""
    with pytest.raises(TypeError):
        vt.vmap(lambda x: x, in_axes=(np.array([1.0, 2.0]),))(np.array([1.0, 2.0]))


def test_vmap_out_axes_leaf_types():
    """JAX: APITest.test_vmap_out_axes_leaf_types (a TypeError; vtape's comes from the binding, which takes an int)"""
    with pytest.raises(TypeError, match="out_axes"):
        vt.vmap(lambda x: x, out_axes=(np.array([1.0, 2.0]),))(np.array([1.0, 2.0]))


def test_vmap_unbatched_object_passthrough_issue_183():
    """JAX: APITest.test_vmap_unbatched_object_passthrough_issue_183"""
    ans = vt.vmap(lambda f, x: f(x), (None, 0))(lambda x: x + 1, np.arange(3.0))
    jtu.assert_all_close(ans, np.arange(1.0, 4.0), check_dtypes=False)


@pytest.mark.parametrize("f, in_axes, args", [
    pytest.param(lambda a, b: vt.sum(a) + vt.sum(b), (0, 1), (np.ones((10, 4)), np.ones((10, 2))), id="(0, 1)"),
    pytest.param(lambda x, y, z: x, (0, 1, 0), (np.ones((10, 4)), np.ones((10, 2)), np.ones((10, 4))), id="(0, 1, 0)"),
    pytest.param(lambda a, b: vt.sum(a) + vt.sum(b[0]), (0, 1), (np.ones((10, 4)), [np.ones((10, 2))] * 2),
                 id="(0, 1)-list"),
    pytest.param(lambda x: x, 0, (1.0,), id="scalar"),
    pytest.param(lambda x: x, None, (np.array([1.0, 2.0]),), id="in_axes=None"),
    pytest.param(lambda x: x, 1, (np.array([1.0, 2.0]),), id="axis-1-of-rank-1"),
])
def test_vmap_mismatched_axis_sizes_error_message_issue_705(f, in_axes, args):
    """JAX: APITest.test_vmap_mismatched_axis_sizes_error_message_issue_705 (each raises ValueError)"""
    with pytest.raises(ValueError):
        vt.vmap(f, in_axes=in_axes)(*args)


@pytest.mark.parametrize("args", [
    pytest.param((np.ones(2), np.ones(3)), id="test_vmap_inconsistent_sizes_constructs_proper_error_message"),
    pytest.param((np.ones(4), np.ones(2), np.ones(2)),
                 id="test_vmap_inconsistent_sizes_constructs_proper_error_message_starargs"),
])
def test_vmap_inconsistent_sizes(args):
    """JAX: APITest.test_vmap_inconsistent_sizes_constructs_proper_error_message, ..._starargs"""
    with pytest.raises(ValueError, match="size"):
        vt.vmap(lambda x, *rest: x - sum(rest))(*args)


def test_vmap_inconsistent_sizes_kwargs():
    """JAX: APITest.test_vmap_inconsistent_sizes_constructs_proper_error_message_kwargs (vtape's message says
    "different sizes")"""
    with pytest.raises(ValueError, match="sizes"):
        vt.vmap(lambda x1, x2, a3: x1 + x2 + a3)(np.ones(2), a3=np.ones(1), x2=np.ones(2))


def test_vmap_structured_in_axes():
    """JAX: APITest.test_vmap_structured_in_axes (tuples, dicts, OrderedDicts; namedtuples in
    test_vmap_structured_in_axes_namedtuple)"""
    A, B, C, D = 2, 3, 4, 5
    K = 6
    x = np.ones((K, A, B))
    y = np.ones((B, K, C))
    z = np.ones((C, D, K))

    def foo(tree_arg):
        x, (y, z) = tree_arg
        return x @ (y @ z)

    vfoo = vt.vmap(foo, in_axes=((0, (1, 2)),))
    out = vfoo((x, (y, z)))
    assert out.shape == (6, 2, 5)
    jtu.assert_all_close(out, np.full((6, 2, 5), B * C, dtype=float))

    def foo(tree_arg):  # noqa: F811
        x, dct = tree_arg
        return x @ (dct["a"] @ dct["b"])

    vfoo = vt.vmap(foo, in_axes=((0, {"a": 1, "b": 2}),))
    assert vfoo((x, {"a": y, "b": z})).shape == (6, 2, 5)
    vfoo = vt.vmap(foo, in_axes=((0, collections.OrderedDict([("a", 1), ("b", 2)])),))
    assert vfoo((x, collections.OrderedDict([("a", y), ("b", z)]))).shape == (6, 2, 5)


def test_vmap_structured_in_axes_namedtuple():
    """JAX: APITest.test_vmap_structured_in_axes (a namedtuple Point)"""
    Point = collections.namedtuple("Point", ["x", "y"])
    x, y, z = np.ones((6, 2, 3)), np.ones((3, 6, 4)), np.ones((4, 5, 6))
    vfoo = vt.vmap(lambda t: t[0] @ (t[1].x @ t[1].y), in_axes=((0, Point(1, 2)),))
    assert vfoo((x, Point(y, z))).shape == (6, 2, 5)


def test_vmap_in_axes_bool_error():
    """JAX: APITest.test_vmap_in_axes_bool_error"""
    with pytest.raises(TypeError):
        vt.vmap(lambda x: x, in_axes=False)(np.zeros(3))


def test_vmap_empty_arguments():
    """JAX: APITest.test_vmap_empty_arguments"""
    with pytest.raises(ValueError):
        vt.vmap(lambda x: x)({})


def test_vmap_unmapped_last():
    """JAX: APITest.test_vmap_unmapped_last (JAX asserts no crash; the unmapped result is repeated at axis -1)"""
    out = vt.vmap(lambda x: np.zeros((2,)), out_axes=-1)(np.zeros((5,)))
    assert out.shape == (2, 5)
    jtu.assert_all_close(out, np.zeros((2, 5)))


def test_vmap_scalar():
    """JAX: APITest.test_vmap_scalar"""
    out = vt.vmap(lambda x: x, in_axes=None, axis_size=1)(1.0)
    jtu.assert_all_close(out, np.ones(1))


# --- jit --------------------------------------------------------------------------------------------------------


def test_jit_static_args():
    """JAX: JitTest.test_jit_static_args"""
    side = []

    def f(x, y, z, flag=False, flag2=False):
        del flag2
        assert flag
        side.append(None)
        return 100 * x + 10 * y + z

    f1 = vt.jit(f, static_argnums=(3, 4))
    assert float(f1(1.0, 2.0, 3.0, True, False)) == 123
    assert len(side) == 1


def test_jit_with_static_argnames():
    """JAX: JitTest.test_jit_with_static_argnames"""
    def f(x):
        assert x == "foo"
        return 1

    assert int(vt.jit(f, static_argnames="x")(x="foo")) == 1


def test_jit_kwargs():
    """JAX: JitTest.test_jit_kwargs"""
    def f(x, y, z):
        return 100 * x + 10 * y + z

    assert float(vt.jit(f)(1.0, 2.0, z=3.0)) == 123


def test_jit_of_noncallable():
    """JAX: JitTest.test_jit_of_noncallable"""
    with pytest.raises(TypeError):
        vt.jit(3)


def test_jit_with_many_args_works():
    """JAX: JitTest.test_jit_with_many_args_works"""
    f = vt.jit(lambda args_list: sum(args_list))
    assert int(f(list(range(500)))) == sum(range(500))


def test_jit_bad_input():
    """JAX: JitTest.test_jit_bad_input"""
    f = lambda x: x  # noqa: E731
    with pytest.raises(TypeError):
        vt.jit(f)("foo")
    with pytest.raises(TypeError):
        vt.jit(f)(np.int32)


def test_trivial_computations():
    """JAX: JitTest.test_trivial_computations (the values; JAX's buffer identities have no vtape counterpart, its
    tensors being immutable)"""
    x1, x2 = np.array([1, 2]), np.array([2, 3])
    z1, z2, z3 = vt.jit(lambda x, y: (y, 1, x))(x1, x2)
    jtu.assert_all_close((z1, z2, z3), (x2, 1, x1), check_dtypes=False)


def test_jit_nan_times_zero():
    """JAX: JitTest.test_jit_nan_times_zero"""
    f = lambda x: 1 + x * 0  # noqa: E731
    jtu.assert_all_close(f(vt.asarray(np.nan)), np.nan)
    jtu.assert_all_close(vt.jit(f)(np.nan), np.nan)
