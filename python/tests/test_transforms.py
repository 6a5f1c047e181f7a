"""The transforms from Python: against finite differences, closed forms and loops; jit's traces; threads."""

import threading

import numpy as np
import pytest

import vtape as vt

from finite_differences import central_differences

rng = np.random.default_rng(11)
X = np.linspace(0, 5, 30)
Y = np.sin(X) + 0.1 * rng.standard_normal(30)
D2 = (X[:, None] - X[None, :]) ** 2


def nll(params):
    """A GP's negative log marginal likelihood in a dict of log-hyperparameters."""
    k = vt.exp(params["log_amp"] * 2) * vt.exp(-0.5 * D2 / vt.exp(params["log_len"] * 2))
    k = k + vt.eye(30) * vt.exp(params["log_noise"] * 2)
    c = vt.cho_factor(k)
    return 0.5 * vt.sum(Y * vt.cho_solve(c, Y)) + 0.5 * vt.logdet(c)


P = {"log_amp": np.array(0.2), "log_len": np.array(-0.3), "log_noise": np.array(-1.5)}


def test_grad_of_a_pytree_against_central_differences():
    g = vt.grad(nll)(P)
    assert set(g) == set(P)
    for k in P:
        fd = central_differences(lambda v: nll({**P, k: v}), P[k])
        np.testing.assert_allclose(np.asarray(g[k]), fd, rtol=1e-6, atol=1e-8)


def test_a_chain_of_30000_ops_jits_and_differentiates():
    """An unrolled Python loop: the plan builder and the freeing of the trace walk it without one frame an op."""
    n, a, b = 15000, 1.0000001, 0.5

    def chain(x):
        for _ in range(n):
            x = x * a + b
        return vt.sum(x)

    x0 = np.array([1.0, -2.0, 0.25])
    an = a**n
    expected = an * x0.sum() + 3 * b * (an - 1) / (a - 1)
    assert float(vt.jit(chain)(x0)) == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(np.asarray(vt.jit(vt.grad(chain))(x0)), [an, an, an], rtol=1e-9)


def test_value_and_grad_argnums_and_aux():
    f = lambda a, b: (vt.sum(a * b * b), {"twice": a * 2})  # noqa: E731
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    (value, aux), (ga, gb) = vt.value_and_grad(f, argnums=(0, 1), has_aux=True)(a, b)
    np.testing.assert_allclose(float(value), np.sum(a * b * b), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(aux["twice"]), 2 * a, rtol=0)
    np.testing.assert_allclose(np.asarray(ga), b * b, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(gb), 2 * a * b, rtol=1e-14)
    with pytest.raises(vt.Error):
        vt.grad(lambda a: a * 2)(a)  # not a scalar


def test_vjp_and_jvp_are_transposes_and_match_differences():
    f = lambda x, w: vt.tanh(vt.matmul(w, x)) * x[0]  # noqa: E731
    x, w = rng.standard_normal(4), rng.standard_normal((3, 4))
    u, v = rng.standard_normal(3), rng.standard_normal(4)
    out, pullback = vt.vjp(f, x, w)
    gx, gw = pullback(u)
    assert gw.shape == (3, 4)
    _, jv = vt.jvp(f, (x, w), (v, np.zeros((3, 4))))
    np.testing.assert_allclose(float(np.dot(np.asarray(jv), u)), float(np.dot(v, np.asarray(gx))), rtol=1e-12)
    h = 1e-6
    fd = (np.asarray(f(x + h * v, w)) - np.asarray(f(x - h * v, w))) / (2 * h)
    np.testing.assert_allclose(np.asarray(jv), fd, rtol=1e-6, atol=1e-9)


def test_jacobians_hessian_and_hvp():
    f = lambda x: vt.sum(vt.exp(x) * x) + vt.logdet(vt.eye(3) + vt.matmul(x.reshape(3, 1), x.reshape(1, 3)))  # noqa
    x = rng.standard_normal(3) * 0.5
    g = lambda v: np.asarray(vt.grad(f)(v))  # noqa: E731
    fd_h = np.stack([(g(x + 1e-6 * e) - g(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)], axis=1)
    H = vt.hessian(f)(x)
    np.testing.assert_allclose(np.asarray(H), fd_h, rtol=1e-6, atol=1e-8)
    v = rng.standard_normal(3)
    np.testing.assert_allclose(np.asarray(vt.hvp(f)(x, v)), np.asarray(H) @ v, rtol=1e-12)
    m = lambda x: vt.sin(x) * vt.sum(x * x)  # noqa: E731
    np.testing.assert_allclose(np.asarray(vt.jacfwd(m)(x)), np.asarray(vt.jacrev(m)(x)), rtol=1e-13)


def test_jacobians_and_hessian_of_pytrees_in_jaxs_structure():
    # f: {"x": [3], "y": [2]} -> (a [3], [b [2]]); J[result][leaf] is result.shape + leaf.shape.
    def f(p):
        return vt.exp(p["x"]) * p["y"][0], [vt.sum(p["x"] * p["x"]) * p["y"]]

    p = {"x": rng.standard_normal(3), "y": rng.standard_normal(2)}
    x, y = p["x"], p["y"]
    exact = {  # closed forms
        ("a", "x"): np.diag(np.exp(x) * y[0]),
        ("a", "y"): np.stack([np.exp(x), np.zeros(3)], axis=1),
        ("b", "x"): 2 * np.outer(y, x),
        ("b", "y"): np.sum(x * x) * np.eye(2),
    }
    for jacobian in (vt.jacfwd, vt.jacrev):
        ja, (jb,) = jacobian(f)(p)
        assert set(ja) == {"x", "y"} and set(jb) == {"x", "y"}
        for (r, leaf), want in exact.items():
            got = np.asarray((ja if r == "a" else jb)[leaf])
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    # A tuple of argnums: a tuple of Jacobians per result; has_aux passes aux through.
    g = lambda a, b, c: (vt.sin(a) * b + c, "aux")  # noqa: E731
    a, b, c = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal(2)
    (ja, jb), aux = vt.jacrev(g, argnums=(0, 1), has_aux=True)(a, b, c)
    assert aux == "aux"
    np.testing.assert_allclose(np.asarray(ja), np.diag(np.cos(a) * b), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jb), np.diag(np.sin(a)), rtol=1e-14)
    # The Hessian of a pytree against finite differences of the gradient: H[i][j] is X_i + X_j.
    nll = lambda p: vt.sum(vt.exp(p["x"]) * p["y"][0]) + vt.sum(p["y"] ** 2) * vt.sum(p["x"])  # noqa: E731
    H = vt.hessian(nll)(p)
    flat = lambda p: np.concatenate([np.asarray(v) for v in (p["x"], p["y"])])  # noqa: E731
    gflat = lambda v: flat(vt.grad(nll)({"x": v[:3], "y": v[3:]}))  # noqa: E731
    v0 = np.concatenate([x, y])
    fd = np.stack([(gflat(v0 + 1e-6 * e) - gflat(v0 - 1e-6 * e)) / 2e-6 for e in np.eye(5)], axis=1)
    blocks = np.block([[np.asarray(H["x"]["x"]), np.asarray(H["x"]["y"])], [np.asarray(H["y"]["x"]), np.asarray(H["y"]["y"])]])
    np.testing.assert_allclose(blocks, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(blocks, blocks.T, rtol=1e-13, atol=1e-14)
    # An empty pytree argument: empty structures, f still called.
    assert vt.jacfwd(lambda t, z: vt.sum(z), argnums=0)((), np.ones(2)) == ()
    # Integer leaves and results have no derivative.
    with pytest.raises(vt.Error, match=r"jacrev: leaf 0 of argument 0 is int64 of shape \(2,\), which has no derivative"):
        vt.jacrev(lambda q: q["w"] * 2.0)({"w": np.ones(2), "i": np.arange(2)})
    with pytest.raises(vt.Error, match="jacfwd: the function returns int64"):
        vt.jacfwd(lambda q: (q, vt.astype(q, "int64")))(np.ones(2))


def test_vmap_equals_a_loop_with_in_axes_and_out_axes():
    f = lambda a, w: vt.sum(vt.exp(a) * w, axis=0)  # noqa: E731
    A, w = rng.standard_normal((5, 3, 2)), rng.standard_normal((3, 2))
    loop = np.stack([np.asarray(f(a, w)) for a in A])
    np.testing.assert_allclose(np.asarray(vt.vmap(f, in_axes=(0, None))(A, w)), loop, rtol=1e-14)
    At = np.moveaxis(A, 0, 2)  # the batch as axis 2
    np.testing.assert_allclose(np.asarray(vt.vmap(f, in_axes=(2, None))(At, w)), loop, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(vt.vmap(f, (0, None), out_axes=1)(A, w)), loop.T, rtol=1e-14)
    kept = vt.vmap(f, (0, None), out_axes=vt.batched)(A, w)
    assert kept.is_batched and kept.batch_size == 5 and kept.shape == (2,)
    # per-example gradients of a pytree
    batch = {k: np.stack([v, v + 0.1]) for k, v in P.items()}
    per = vt.vmap(vt.grad(nll))(batch)
    # in_axes as a pytree of the argument's structure: the noise shared, the others mapped
    shared = {**batch, "log_noise": P["log_noise"]}
    axes = {"log_amp": 0, "log_len": 0, "log_noise": None}
    mixed = vt.vmap(vt.grad(nll), in_axes=(axes,))(shared)
    np.testing.assert_allclose(np.asarray(mixed["log_len"])[0], np.asarray(per["log_len"])[0], rtol=1e-12)
    with pytest.raises(ValueError, match="structure"):
        vt.vmap(vt.grad(nll), in_axes=({"log_amp": 0},))(batch)
    for i in range(2):
        one = vt.grad(nll)({k: v[i] for k, v in batch.items()})
        for k in P:
            np.testing.assert_allclose(np.asarray(per[k])[i], np.asarray(one[k]), rtol=1e-12)


def test_jit_equals_eager_and_traces_once_for_every_batch_size():
    step = vt.jit(vt.vmap(vt.value_and_grad(nll)))
    for b in (1, 4, 9):
        batch = {k: v + 0.05 * rng.standard_normal(b) for k, v in P.items()}
        values, grads = step(batch)
        assert values.shape == (b,) and not values.is_batched
        for i in range(b):
            v, g = vt.value_and_grad(nll)({k: x[i] for k, x in batch.items()})
            np.testing.assert_allclose(np.asarray(values)[i], float(v), rtol=1e-12)
            np.testing.assert_allclose(np.asarray(grads["log_len"])[i], float(g["log_len"]), rtol=1e-10)
    c = step.counters()
    assert c["traces"] == 1 and c["calls"] == 3
    # a plain jit traces again for a new shape
    total = vt.jit(lambda x: vt.sum(x * x))
    for n in (2, 3, 3):
        assert float(total(np.ones(n))) == n
    assert total.counters()["traces"] == 2
    assert "steps" in total.compile(np.ones(5)) and "cho_factor" in step.explain(
        {k: np.full(2, float(v)) for k, v in P.items()})
    # the rewrites by pass name, for the passes that changed the plan
    chain = vt.jit(lambda a, b, c: (a @ b) @ c).compile(np.ones((50, 2)), np.ones((2, 50)), np.ones((50, 50)))
    assert chain["rewrites"]["reassociate_matmuls"] == 1
    assert set(chain["rewrites"]) == set(chain["passes"])


def test_jit_inside_grad_runs_op_by_op_and_differentiates():
    inner = vt.jit(lambda x: vt.sum(vt.sin(x) * x))
    x = rng.standard_normal(4)
    np.testing.assert_allclose(np.asarray(vt.grad(inner)(x)), np.cos(x) * x + np.sin(x), rtol=1e-14)


def test_errors_inside_a_jitted_batch_name_the_example():
    mats = np.stack([np.eye(3), np.eye(3), -np.eye(3)])
    f = vt.jit(vt.vmap(lambda a: vt.logdet(a)))
    with pytest.raises(vt.NotPositiveDefinite) as e:
        f(mats)
    assert e.value.batch_index == 2
    np.testing.assert_allclose(np.asarray(f(mats[:2])), [0.0, 0.0], atol=1e-15)


def test_python_errors_in_the_traced_function_propagate():
    def bad(x):
        raise KeyError("from the model")

    with pytest.raises(KeyError):
        vt.jit(bad)(np.ones(2))
    with pytest.raises(KeyError):
        vt.grad(bad)(np.ones(2))


def test_threads_call_one_jitted_function_with_the_gil_released():
    step = vt.jit(vt.vmap(vt.value_and_grad(nll)))
    batches = [{k: v + 0.01 * i * np.ones(6) for k, v in P.items()} for i in range(4)]
    want = [np.asarray(step(b)[0]) for b in batches]
    got = [None] * 4

    def work(i):
        for _ in range(5):
            got[i] = np.asarray(step(batches[i])[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert step.counters()["traces"] == 1


def test_batches_in_give_batches_out_and_one_trace_for_a_loss_over_the_batch():
    # The C++ idiom: the batch a first-class dimension, reduced by batch_mean; one trace for every batch size.
    func = lambda p: vt.mean(vt.exp(p) * p)  # noqa: E731
    step = vt.jit(vt.value_and_grad(lambda P: vt.batch_mean(vt.vmap(func)(P))))
    for b in (2, 5, 7):
        P = rng.standard_normal((b, 3))
        value, g = step(vt.as_batch(P))
        np.testing.assert_allclose(float(value), np.mean(np.mean(np.exp(P) * P, axis=1)), rtol=1e-13)
        assert g.is_batched and g.batch_size == b
        np.testing.assert_allclose(np.asarray(g), (np.exp(P) * (1 + P)) / (3 * b), rtol=1e-13)
    assert step.counters()["traces"] == 1
    mapped = vt.vmap(func)(vt.as_batch(rng.standard_normal((4, 3))))
    assert mapped.is_batched and mapped.batch_size == 4
    kept = vt.jit(vt.vmap(func))(vt.as_batch(rng.standard_normal((4, 3))))
    assert kept.is_batched


def test_vmap_out_axes_none_and_pytrees():
    x = np.arange(6.0).reshape(3, 2)
    w = np.array([0.5, -1.0])
    # A result that does not depend on the mapped argument comes back as it is under out_axes None.
    scaled, norm = vt.vmap(lambda r, v: (r * v, vt.sum(v * v)), in_axes=(0, None), out_axes=(1, None))(x, w)
    np.testing.assert_array_equal(np.asarray(scaled), (x * w).T)
    assert norm.shape == () and float(norm) == 1.25
    # A pytree prefix: the dict's parts at their own axes, -1 counting from the end.
    out = vt.vmap(lambda r: {"a": r, "b": (r[0], r * 2)}, out_axes={"a": -1, "b": 0})(x)
    np.testing.assert_array_equal(np.asarray(out["a"]), x.T)
    np.testing.assert_array_equal(np.asarray(out["b"][0]), x[:, 0])
    np.testing.assert_array_equal(np.asarray(out["b"][1]), x * 2)
    with pytest.raises(ValueError, match="out_axes None for result 0, which depends on the mapped arguments"):
        vt.vmap(lambda r: r * 2, out_axes=None)(x)
    with pytest.raises(ValueError, match="not a prefix"):
        vt.vmap(lambda r: (r, r), out_axes=(0, 0, 0))(x)
    with pytest.raises(TypeError, match="out_axes must be ints or None"):
        vt.vmap(lambda r: r, out_axes=(np.array([1.0]),))(x)
    # A cond whose branches forward the same unmapped value keeps it unmapped (JAX's forwarding).
    pair = vt.vmap(lambda a, b: vt.cond(a > 1, lambda a, b: (a * 2, b), lambda a, b: (a * 3, b), a, b),
                   in_axes=(0, None), out_axes=(0, None))(np.arange(3.0), np.array(7.0))
    np.testing.assert_array_equal(np.asarray(pair[0]), [0.0, 3.0, 4.0])
    assert float(pair[1]) == 7.0
    # The gradient through a pytree out_axes, against the closed form.
    g = vt.grad(lambda v: vt.sum(vt.vmap(lambda r, v: (r @ v, v * v), in_axes=(0, None), out_axes=(0, None))(x, v)[0]
                                 ** 2))(w)
    np.testing.assert_allclose(np.asarray(g), 2 * x.T @ (x @ w), rtol=1e-14)


def test_vmap_passes_non_arrays_through_and_takes_axis_size():
    ans = vt.vmap(lambda f, x, name: f(x) if name == "plus one" else x, (None, 0, None))(lambda v: v + 1,
                                                                                         np.arange(3.0), "plus one")
    np.testing.assert_array_equal(np.asarray(ans), [1.0, 2.0, 3.0])
    # No argument mapped: axis_size says how many; each result is repeated, at its out axis.
    rep = vt.vmap(lambda v: v * 2, in_axes=None, axis_size=3, out_axes=1)(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(rep), [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    with pytest.raises(ValueError, match="axis_size 4"):
        vt.vmap(lambda v: v, axis_size=4)(np.ones(3))
    with pytest.raises(ValueError):
        vt.vmap(lambda v: v, in_axes=None)(np.ones(3))  # nothing mapped and no axis_size


def test_grad_allow_int_gives_integer_arguments_zeros():
    f = lambda x, i, scale: vt.sum(x * x) * scale + x[i]  # noqa: E731
    gx, gi, gs = vt.grad(f, argnums=(0, 1, 2), allow_int=True)(np.array([1.0, 2.0]), 1, np.array(3.0))
    np.testing.assert_allclose(np.asarray(gx), [6.0, 13.0])
    assert gi.dtype == np.int64 and int(gi) == 0
    assert float(gs) == 5.0
    with pytest.raises(TypeError, match="int64"):
        vt.grad(f, argnums=(0, 1))(np.array([1.0, 2.0]), 1, np.array(3.0))


def test_dynamic_slices_along_one_axis_match_numpy():
    x = np.arange(12.0).reshape(3, 4)
    f = vt.jit(lambda x, i: (vt.lax.dynamic_slice_in_dim(x, i, 2, axis=1), vt.lax.dynamic_index_in_dim(x, i, 0, False),
                             vt.lax.dynamic_update_index_in_dim(x, np.array([-1.0, -2.0, -3.0]), i, 1)))
    for i in [0, 2, 3]:
        sliced, row, updated = f(x, np.int64(i))
        s = min(i, 2)  # clamped so that two columns fit
        np.testing.assert_array_equal(np.asarray(sliced), x[:, s:s + 2])
        np.testing.assert_array_equal(np.asarray(row), x[min(i, 2)])
        expected = x.copy()
        expected[:, i] = [-1.0, -2.0, -3.0]
        np.testing.assert_array_equal(np.asarray(updated), expected)


def test_vmap_maps_keyword_arguments_over_axis_0_whatever_in_axes_says():
    f = lambda a, b: a * 10 + b  # noqa: E731
    a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_array_equal(np.asarray(vt.vmap(f, in_axes=1)(a, b=b)), a.T * 10 + b[:, None])
    np.testing.assert_array_equal(np.asarray(vt.vmap(f, in_axes=(None,))(np.array(1.0), b=b)), 10 + b)
