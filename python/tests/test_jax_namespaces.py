"""vtape.numpy, vtape.lax, vtape.nn, vtape.scipy and vtape.tree_util against numpy and scipy: values, and gradients
against central differences, written as a JAX user writes them (`import vtape.numpy as jnp`)."""

import collections
import math

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import vtape as vt
import vtape.numpy as jnp
from vtape import lax, nn
from vtape.scipy import linalg as jsl, special as jss, stats as jst

from finite_differences import central_differences

RNG = np.random.default_rng(7)


def check_grad(f, x, rtol=1e-6, atol=1e-8):
    got = np.asarray(vt.grad(f)(x))
    np.testing.assert_allclose(got, central_differences(f, x), rtol=rtol, atol=atol)


UNARY = [
    ("tan", np.tan, (-1.2, 1.2)), ("arcsin", np.arcsin, (-0.95, 0.95)), ("arccos", np.arccos, (-0.95, 0.95)),
    ("arctan", np.arctan, (-5, 5)), ("sinh", np.sinh, (-3, 3)), ("cosh", np.cosh, (-3, 3)),
    ("arcsinh", np.arcsinh, (-5, 5)), ("arccosh", np.arccosh, (1.05, 6)), ("arctanh", np.arctanh, (-0.95, 0.95)),
    ("exp", np.exp, (-3, 3)), ("log1p", np.log1p, (-0.5, 3)), ("sqrt", np.sqrt, (0.1, 4)), ("tanh", np.tanh, (-3, 3)),
]


@pytest.mark.parametrize("name,ref,domain", UNARY, ids=[u[0] for u in UNARY])
def test_elementwise_functions_match_numpy_with_gradients(name, ref, domain):
    x = RNG.uniform(*domain, size=7)
    f = getattr(jnp, name)
    np.testing.assert_allclose(np.asarray(f(x)), ref(x), rtol=2e-15, atol=1e-300)
    np.testing.assert_allclose(np.asarray(f(x.astype(np.float32))), ref(x.astype(np.float32)), rtol=2e-6)
    check_grad(lambda v: jnp.sum(f(v) * np.arange(1.0, 8.0)), x, rtol=1e-6)
    # Special values as the C library's (numpy's): the domain's edges and outside it.
    edges = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(f(edges)), ref(edges))


def test_arctan2_and_hypot():
    y, x = RNG.standard_normal(9), RNG.standard_normal(9)
    np.testing.assert_allclose(np.asarray(jnp.arctan2(y, x)), np.arctan2(y, x), rtol=1e-15)
    signs = np.array([0.0, -0.0])
    np.testing.assert_array_equal(np.asarray(jnp.arctan2(signs[:, None], signs[None, :])),
                                  np.arctan2(signs[:, None], signs[None, :]))  # signed zeros, as the C library
    check_grad(lambda v: jnp.sum(jnp.arctan2(v, x) ** 2), y)
    check_grad(lambda v: jnp.sum(jnp.arctan2(y, v) ** 2), x)
    np.testing.assert_allclose(np.asarray(jnp.hypot(y * 1e200, x * 1e200)), np.hypot(y * 1e200, x * 1e200), rtol=1e-15)
    assert np.asarray(jnp.arctan2(np.arange(3), 2)).dtype == np.float64  # integers: float64, as numpy


def test_reductions_match_numpy():
    a = RNG.standard_normal((4, 5, 3))
    for axis in (None, 0, 1, (0, 2), -1):
        for keepdims in (False, True):
            for name in ("sum", "mean", "max", "min", "prod", "var", "std"):
                np.testing.assert_allclose(np.asarray(getattr(jnp, name)(a, axis=axis, keepdims=keepdims)),
                                           getattr(np, name)(a, axis=axis, keepdims=keepdims), rtol=1e-13,
                                           err_msg=f"{name} axis={axis} keepdims={keepdims}")
    np.testing.assert_allclose(np.asarray(jnp.var(a, axis=1, ddof=1)), np.var(a, axis=1, ddof=1), rtol=1e-13)
    for axis in (None, 0, 2):
        np.testing.assert_array_equal(np.asarray(jnp.argmax(a, axis=axis)), np.argmax(a, axis=axis))
        np.testing.assert_array_equal(np.asarray(jnp.argmin(a, axis=axis)), np.argmin(a, axis=axis))
    ties = np.array([[1.0, 3.0, 3.0, np.nan, 0.0], [2.0, 2.0, 1.0, 1.0, 5.0]])
    np.testing.assert_array_equal(np.asarray(jnp.argmax(ties, axis=1)), np.argmax(ties, axis=1))
    np.testing.assert_array_equal(np.asarray(jnp.argmin(ties, axis=1)), np.argmin(ties, axis=1))
    # prod with zeros: its gradient is the product of the others.
    x = np.array([2.0, 0.0, 3.0, -1.5, 0.5])
    np.testing.assert_allclose(np.asarray(vt.grad(lambda v: jnp.prod(v))(x)),
                               [np.prod(np.delete(x, i)) for i in range(5)], rtol=1e-15)
    check_grad(lambda v: jnp.std(v, ddof=1) + jnp.var(v), RNG.standard_normal(6))


def test_creation_shapes_and_products_match_numpy():
    assert np.asarray(jnp.arange(5)).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(jnp.arange(5)), np.arange(5))
    np.testing.assert_allclose(np.asarray(jnp.arange(0.0, 1.0, 0.25)), np.arange(0.0, 1.0, 0.25))
    np.testing.assert_allclose(np.asarray(jnp.linspace(0, 1, 5, endpoint=False)), np.linspace(0, 1, 5, endpoint=False))
    np.testing.assert_array_equal(np.asarray(jnp.eye(3, 4, k=1)), np.eye(3, 4, k=1))
    a = RNG.standard_normal((3, 4))
    assert jnp.zeros_like(a).shape == (3, 4) and np.asarray(jnp.ones_like(a.astype(np.float32))).dtype == np.float32
    for gx, gy in zip(jnp.meshgrid(np.arange(3.0), np.arange(2.0)), np.meshgrid(np.arange(3.0), np.arange(2.0))):
        np.testing.assert_array_equal(np.asarray(gx), gy)
    for gx, gy in zip(jnp.meshgrid(np.arange(3.0), np.arange(2.0), indexing="ij"),
                      np.meshgrid(np.arange(3.0), np.arange(2.0), indexing="ij")):
        np.testing.assert_array_equal(np.asarray(gx), gy)
    np.testing.assert_array_equal(np.asarray(jnp.expand_dims(a, (0, 3))), np.expand_dims(a, (0, 3)))
    np.testing.assert_array_equal(np.asarray(jnp.squeeze(a[None, :, None])), a)
    np.testing.assert_array_equal(np.asarray(jnp.moveaxis(a[None], 0, -1)), np.moveaxis(a[None], 0, -1))
    for got, want in zip(jnp.split(np.arange(10.0), [3, 7]), np.split(np.arange(10.0), [3, 7])):
        np.testing.assert_array_equal(np.asarray(got), want)
    m = RNG.standard_normal((4, 4))
    for k in (-2, -1, 0, 1, 3):
        np.testing.assert_array_equal(np.asarray(jnp.diagonal(m, k)), np.diagonal(m, k))
        np.testing.assert_array_equal(np.asarray(jnp.diag(np.arange(1.0, 4.0), k)), np.diag(np.arange(1.0, 4.0), k))
        np.testing.assert_allclose(np.asarray(jnp.trace(m, k)), np.trace(m, k), rtol=1e-15)
        np.testing.assert_array_equal(np.asarray(jnp.triu(m, k)), np.triu(m, k))
    b3 = RNG.standard_normal((2, 4, 3))
    np.testing.assert_allclose(np.asarray(jnp.diagonal(b3, 1, 1, 2)), np.diagonal(b3, 1, 1, 2))
    v, w = RNG.standard_normal(4), RNG.standard_normal(3)
    np.testing.assert_allclose(np.asarray(jnp.dot(a, v)), a @ v, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jnp.dot(v, v)), v @ v, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jnp.outer(v, w)), np.outer(v, w), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(jnp.inner(a, a)), np.inner(a, a), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jnp.tensordot(b3, a, ([1], [1]))), np.tensordot(b3, a, ([1], [1])),
                               rtol=1e-14)
    c = RNG.standard_normal((2, 3, 5))
    for spec, ops in [("ij,jk->ik", (a.T, a)), ("bij,bjk->bik", (b3, c)), ("i,i->", (v, v)), ("ii->i", (m,)),
                      ("ij->ji", (a,)), ("ij,j->i", (a, v)), ("bij,bj->bi", (b3, RNG.standard_normal((2, 3)))),
                      ("ij,ik->jk", (a, a)), ("i,j->ij", (v, w)), ("ij,kj", (a, a)), ("ijk->", (c,)),
                      ("bij,jk->bik", (b3, RNG.standard_normal((3, 2))))]:
        np.testing.assert_allclose(np.asarray(jnp.einsum(spec, *ops)), np.einsum(spec, *ops), rtol=1e-13,
                                   atol=1e-14, err_msg=spec)
    check_grad(lambda u: jnp.einsum("ij,jk->", u, a), a.T.copy())
    # Ellipses (broadcast leading axes) and three or more operands, contracted left to right.
    d, e = RNG.standard_normal((2, 5, 6)), RNG.standard_normal((6, 1, 4))
    for spec, ops in [("...ij,...jk->...ik", (b3, c)), ("...i,i", (b3, w)), ("...ii->...i", (RNG.standard_normal(
                      (3, 4, 4)),)), ("ij...,jk...->ik...", (RNG.standard_normal((3, 4, 2)), RNG.standard_normal(
                      (4, 5, 1)))), ("bij,bjk,bkl->bil", (b3, c, d)), ("i,ij,j", (v, a.T, w)),
                      ("a,b,c->abc", (v, w, v)), ("bij,bjk,kl->bli", (b3, c, RNG.standard_normal((5, 2)))),
                      ("...j,jk,k...", (b3, RNG.standard_normal((3, 6)), e))]:
        np.testing.assert_allclose(np.asarray(jnp.einsum(spec, *ops, optimize=True)), np.einsum(spec, *ops),
                                   rtol=1e-13, atol=1e-14, err_msg=spec)
    check_grad(lambda u: jnp.einsum("...ij,jk,k->", b3, u, v[:2]), RNG.standard_normal((3, 2)))


def test_array_of_traced_scalars_and_unpacking():
    def f(theta):
        a, b, c = theta  # unpacking a 1-D tensor, as JAX code does
        m = jnp.array([[a, b], [b, c + 2.0]])
        return jnp.sum(m @ m) + jnp.linalg.norm(theta)

    theta = np.array([0.3, -0.7, 1.1])
    check_grad(f, theta)
    np.testing.assert_allclose(float(vt.jit(f)(theta)), float(f(theta)), rtol=1e-15)


def test_linalg_matches_numpy_and_scipy():
    a = RNG.standard_normal((5, 5))
    spd = a @ a.T + 5 * np.eye(5)
    b, bm = RNG.standard_normal(5), RNG.standard_normal((5, 2))
    np.testing.assert_allclose(np.asarray(jnp.linalg.solve(a, b)), np.linalg.solve(a, b), rtol=1e-11)
    np.testing.assert_allclose(np.asarray(jnp.linalg.solve(a, bm)), np.linalg.solve(a, bm), rtol=1e-11)
    np.testing.assert_allclose(np.asarray(jnp.linalg.inv(a)), np.linalg.inv(a), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jnp.linalg.cholesky(spd)), np.linalg.cholesky(spd), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jnp.linalg.norm(b)), np.linalg.norm(b), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(jnp.linalg.norm(a)), np.linalg.norm(a), rtol=1e-15)
    for ord_ in (1, np.inf, -np.inf, 0, 3):
        np.testing.assert_allclose(np.asarray(jnp.linalg.norm(b, ord_)), np.linalg.norm(b, ord_), rtol=1e-14)
    check_grad(lambda m: jnp.sum(jnp.linalg.solve(m, b) ** 2), a, rtol=1e-5)
    for lower in (False, True):
        c = jsl.cho_factor(spd, lower=lower)
        np.testing.assert_allclose(np.asarray(jsl.cho_solve(c, bm)), scipy.linalg.cho_solve(
            scipy.linalg.cho_factor(spd, lower=lower), bm), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(jsl.cholesky(spd, lower=lower)), scipy.linalg.cholesky(spd, lower=lower),
                                   rtol=1e-13)
        t = np.tril(a) + 4 * np.eye(5) if lower else np.triu(a) + 4 * np.eye(5)
        for trans in (0, 1, "T"):
            for unit in (False, True):
                np.testing.assert_allclose(
                    np.asarray(jsl.solve_triangular(t, b, trans=trans, lower=lower, unit_diagonal=unit)),
                    scipy.linalg.solve_triangular(t, b, trans=trans, lower=lower, unit_diagonal=unit), rtol=1e-12)
    check_grad(lambda m: jnp.sum(jsl.cho_solve(jsl.cho_factor(m @ m.T + 5 * np.eye(5)), b)), a, rtol=1e-5)


def test_special_stats_and_nn_match_scipy():
    x = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(np.asarray(jss.logsumexp(x, axis=1)), scipy.special.logsumexp(x, axis=1), rtol=1e-15)
    w = RNG.uniform(0.5, 2, (3, 4))
    np.testing.assert_allclose(np.asarray(jss.logsumexp(x, axis=0, b=w)), scipy.special.logsumexp(x, axis=0, b=w),
                               rtol=1e-14)
    p = RNG.uniform(0.01, 0.99, 6)
    np.testing.assert_allclose(np.asarray(jss.logit(p)), scipy.special.logit(p), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jss.expit(x)), scipy.special.expit(x), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(jss.gammaln(p * 10)), scipy.special.gammaln(p * 10), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jss.xlogy(np.array([0.0, 2.0]), np.array([0.0, 3.0]))),
                               scipy.special.xlogy([0.0, 2.0], [0.0, 3.0]))
    np.testing.assert_allclose(np.asarray(jss.ndtr(x)), scipy.special.ndtr(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(nn.softmax(x)), scipy.special.softmax(x, axis=-1), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(nn.log_softmax(x, axis=0)), scipy.special.log_softmax(x, axis=0), rtol=1e-14)
    np.testing.assert_array_equal(np.asarray(nn.relu(x)), np.maximum(x, 0))
    np.testing.assert_allclose(np.asarray(jst.norm.logpdf(x, 0.5, 2.0)), scipy.stats.norm.logpdf(x, 0.5, 2.0),
                               rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jst.norm.cdf(x)), scipy.stats.norm.cdf(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jst.t.logpdf(x, 3.5, 0.2, 1.5)), scipy.stats.t.logpdf(x, 3.5, 0.2, 1.5),
                               rtol=1e-13)
    g = np.array([-1.0, 0.0, 0.5, 2.0, 7.0])
    np.testing.assert_allclose(np.asarray(jst.gamma.logpdf(g, 2.5, 0.0, 1.5)), scipy.stats.gamma.logpdf(g, 2.5, 0, 1.5),
                               rtol=1e-13)
    a = RNG.standard_normal((4, 4))
    cov, mean = a @ a.T + np.eye(4), RNG.standard_normal(4)
    pts = RNG.standard_normal((5, 4))
    np.testing.assert_allclose(np.asarray(jst.multivariate_normal.logpdf(pts, mean, cov)),
                               scipy.stats.multivariate_normal.logpdf(pts, mean, cov), rtol=1e-13)
    check_grad(lambda m: jnp.sum(jst.multivariate_normal.logpdf(pts, m, cov)), mean)
    check_grad(lambda s: jnp.sum(jst.t.logpdf(x, s[0], 0.1, s[1])), np.array([3.5, 1.5]))


def test_lax_forms():
    # switch: a concrete index, a traced one under jit, and one per example under vmap (clamped, as JAX).
    branches = [lambda v: v * 2.0, lambda v: v - 1.0, lambda v: jnp.sin(v)]
    assert float(lax.switch(1, branches, 3.0)) == 2.0
    assert float(lax.switch(7, branches, 3.0)) == pytest.approx(math.sin(3.0))
    got = vt.vmap(lambda i, v: lax.switch(i, branches, v))(np.array([0, 1, 2, -3]), np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(np.asarray(got), [2.0, 1.0, math.sin(3.0), 8.0], rtol=1e-15)
    # map, select, stop_gradient.
    np.testing.assert_allclose(np.asarray(lax.map(lambda r: jnp.sum(r ** 2), np.arange(6.0).reshape(3, 2))),
                               [1.0, 13.0, 41.0])
    np.testing.assert_array_equal(np.asarray(lax.select(np.array([True, False]), np.ones(2), np.zeros(2))), [1.0, 0.0])
    assert float(vt.grad(lambda v: lax.stop_gradient(v) * v)(3.0)) == 3.0
    # dynamic_slice and dynamic_update_slice with traced starts, clamped as JAX.
    x = np.arange(20.0).reshape(4, 5)

    def window(i):
        return lax.dynamic_slice(x, (i, 1), (2, 3))

    for i in range(-5, 5):
        s = min(max(i + 4 if i < 0 else i, 0), 2)  # negative from the end, then clamped (JAX's rules)
        want = x[s:s + 2, 1:4]
        np.testing.assert_array_equal(np.asarray(vt.jit(window)(np.int64(i))), want)
    upd = np.full((2, 2), -1.0)
    for i in (0, 3, 9):
        want = x.copy()
        s = min(max(i, 0), 3)
        want[1:3, s:s + 2] = upd
        np.testing.assert_array_equal(np.asarray(vt.jit(lambda k: lax.dynamic_update_slice(x, upd, (1, k)))(
            np.int64(i))), want)
    check_grad(lambda v: jnp.sum(lax.dynamic_update_slice(v, upd * v[0, 0], (1, 2)) ** 2), x)


def test_tree_util_namedtuples_and_registered_nodes():
    Params = collections.namedtuple("Params", ["mu", "log_sigma"])
    p = Params(np.array([0.5, -1.0]), 0.3)

    def loss(p):
        return jnp.sum((p.mu - 1.0) ** 2) + jnp.exp(p.log_sigma)

    g = vt.grad(loss)(p)
    assert isinstance(g, Params)
    np.testing.assert_allclose(np.asarray(g.mu), 2 * (p.mu - 1.0))
    np.testing.assert_allclose(float(g.log_sigma), math.exp(0.3))

    class Box:
        def __init__(self, value, label):
            self.value, self.label = value, label

    vt.tree_util.register_pytree_node(Box, lambda b: ((b.value,), b.label), lambda label, kids: Box(kids[0], label))
    doubled = vt.tree_util.tree_map(lambda v: v * 2, [Box(np.array([1.0, 2.0]), "a")])
    assert isinstance(doubled[0], Box) and doubled[0].label == "a"
    np.testing.assert_array_equal(np.asarray(doubled[0].value), [2.0, 4.0])
    assert vt.tree_util.tree_leaves({"b": 1, "a": (2, None)}) == [2, 1]


def test_the_edges_a_review_found_match_numpy_scipy_and_jax():
    # jit's static arguments: number 0 too, and functions with *args and **kwargs.
    def repeat(n, x):
        for _ in range(n):
            x = x * 2.0
        return x

    f = vt.jit(repeat, static_argnums=0)
    np.testing.assert_array_equal(np.asarray(f(3, np.ones(2))), [8.0, 8.0])

    def rest(x, scale, *more, **named):
        return x * scale + sum(more) + named.get("shift", 0.0)

    g = vt.jit(rest, static_argnums=1)
    np.testing.assert_allclose(np.asarray(g(np.ones(2), 3.0, np.ones(2), shift=np.ones(2))), [5.0, 5.0])
    # Integer results stay integers: where with a Python int, argmax, clip, relu.
    i = np.arange(-2, 3)
    assert np.asarray(jnp.where(i > 0, i, 0)).dtype == np.int64
    assert np.asarray(jnp.argmax(np.array([1.0, 3.0, 2.0]))).dtype == np.int64
    assert np.asarray(jnp.clip(i, -1, 1)).dtype == np.int64 and np.asarray(nn.relu(i)).dtype == np.int64
    a = RNG.standard_normal((2, 3, 4))
    assert jnp.argmax(a, keepdims=True).shape == np.argmax(a, keepdims=True).shape
    assert int(jnp.prod(np.array([True, True]))) == 1 and np.asarray(jnp.prod(np.array([True]))).dtype == np.int64
    got = jnp.sum(a, 1, np.float32)  # numpy's positional order: (a, axis, dtype)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.sum(a, 1, np.float32), rtol=1e-6)
    assert np.isinf(float(jnp.var(np.array([1.0, 2.0]), ddof=2)))
    # Matrix norms other than Frobenius are refused, not answered wrongly.
    with pytest.raises(NotImplementedError):
        jnp.linalg.norm(np.eye(2), 1)
    with pytest.raises(NotImplementedError):
        jnp.linalg.norm(a, 2, axis=(1, 2))
    np.testing.assert_allclose(np.asarray(jnp.linalg.norm(a, axis=(1, 2))), np.linalg.norm(a, axis=(1, 2)), rtol=1e-15)
    # A negative start counts from the end (JAX's dynamic_slice), then clamps.
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(np.arange(5.0), (-1,), (1,))), [4.0])
    np.testing.assert_array_equal(np.asarray(vt.jit(lambda s: lax.dynamic_slice(np.arange(5.0), (s,), (2,)))(
        np.int64(-2))), [3.0, 4.0])
    # numpy's rule for an array index apart from an int index: the array's axes first.
    t = vt.asarray(a)
    for index in [(0, slice(None), [0, 1]), (slice(None), 0, [0, 1]), ([1, 0], slice(None), 2)]:
        np.testing.assert_array_equal(np.asarray(t[index]), a[index[0], index[1], np.asarray(index[2])]
                                      if isinstance(index[2], list) else a[np.asarray(index[0]), index[1], index[2]])
    for got, want in zip(jnp.split(np.arange(5.0), [-2]), np.split(np.arange(5.0), [-2])):
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_allclose(np.asarray(jnp.tensordot(a, a, axes=(1, 1))), np.tensordot(a, a, axes=(1, 1)))
    # Solves of a batch of matrices by one vector.
    m = RNG.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    b = RNG.standard_normal(4)
    np.testing.assert_allclose(np.asarray(jnp.linalg.solve(m, b)), np.linalg.solve(m, b[None, :, None])[..., 0],
                               rtol=1e-12)
    spd = m @ np.swapaxes(m, -1, -2)
    np.testing.assert_allclose(np.asarray(jsl.cho_solve(jsl.cho_factor(spd), b)),
                               np.stack([scipy.linalg.cho_solve(scipy.linalg.cho_factor(s), b) for s in spd]),
                               rtol=1e-11)
    # Densities at their edges and in far tails, as scipy's.
    np.testing.assert_allclose(np.asarray(jst.gamma.logpdf(np.array([0.0, 0.0]), np.array([1.0, 3.0]))),
                               scipy.stats.gamma.logpdf([0.0, 0.0], [1.0, 3.0]))
    z = np.array([-40.0, -25.0, -20.5, -19.5, -3.0, 0.0, 4.0])
    np.testing.assert_allclose(np.asarray(jst.norm.logcdf(z)), scipy.stats.norm.logcdf(z), rtol=1e-12)
    assert math.isnan(float(jst.norm.logpdf(0.0, 0.0, -1.0)))
