"""Transforms composed where functions close over values of an enclosing transform, and the other defects that JAX's
own tests and random programs found (issue 45): each against the same program unrolled by hand, central differences,
or eager against jit. The C++ side of each is in tests/test_composition.cpp."""

import numpy as np
import pytest

import vtape as vt


def central(f, x, h=1e-6):
    return (float(f(x + h)) - float(f(x - h))) / (2 * h)


# ---------------------------------------------------------------- a loop body that takes a gradient of a closure


def _descend(p, x):
    return x - 0.1 * vt.grad(lambda y: vt.sum(y * p))(x)


def test_scan_body_taking_the_gradient_of_a_closure_over_the_parameter():
    def loss(p):
        x, _ = vt.scan(lambda x, _: (_descend(p, x), None), vt.ones((3,)), None, length=1)
        return vt.sum(x)

    np.testing.assert_allclose(np.asarray(vt.grad(loss)(np.array([1.0, 2.0, 3.0]))), [-0.1, -0.1, -0.1], rtol=1e-15)


@pytest.mark.parametrize("loop", ["scan", "fori_loop"])
def test_issue711_gradient_through_75_descent_steps(loop):
    # JAX's testIssue711: reverse mode through a loop whose body takes a reverse-mode gradient.
    def minimize(p):
        x0 = vt.asarray(np.array([1.0, 2.0, 3.0]))
        if loop == "scan":
            return vt.scan(lambda x, _: (_descend(p, x), None), x0, np.zeros((75, 0)))[0]
        return vt.fori_loop(0, 75, lambda i, x: _descend(p, x), x0)

    def loss(p):
        return vt.sum(vt.sin(1.0 - minimize(p)))

    def unrolled(p):
        x = vt.asarray(np.array([1.0, 2.0, 3.0]))
        for _ in range(75):
            x = _descend(p, x)
        return vt.sum(vt.sin(1.0 - x))

    expected = central(unrolled, 0.25)
    assert expected == pytest.approx(10.0024576, rel=1e-6)
    for g in (vt.grad(loss), vt.jit(vt.grad(loss)), vt.grad(vt.jit(loss))):
        assert float(g(0.25)) == pytest.approx(expected, rel=1e-7)
    assert float(vt.jvp(loss, (0.25,), (1.0,))[1]) == pytest.approx(expected, rel=1e-7)
    np.testing.assert_allclose(np.asarray(vt.hessian(loss)(0.25)), np.asarray(vt.hessian(unrolled)(0.25)), rtol=1e-10)


# ---------------------------------------------------------------- cond


def test_cond_no_nan_gradient_through_the_branch_not_taken():
    f = lambda x: vt.cond(x < 1e-3, lambda x: 1e-3 * x, vt.sqrt, x)  # noqa: E731
    for g in (vt.grad(f), vt.jit(vt.grad(f)), vt.grad(vt.jit(f))):
        assert float(g(0.0)) == 1e-3
        assert float(g(4.0)) == 0.25


def test_cond_grad_vmap_nan():
    # JAX's testCondGradVmapNan: the branches close over x, the predicate is batched.
    eps = 1e-3

    def safe1(x):
        return vt.cond(x < eps, lambda _: eps + 0.0 * x, lambda _: vt.sqrt(x), ())

    for g in (vt.grad(lambda x: vt.vmap(safe1)(x).sum()), vt.jit(vt.grad(lambda x: vt.vmap(safe1)(x).sum()))):
        out = np.asarray(g(np.zeros(10)))
        assert not np.isnan(out).any()
        np.testing.assert_array_equal(out, np.zeros(10))
    xs = np.array([0.0, 4.0, 9.0])
    np.testing.assert_allclose(np.asarray(vt.vmap(vt.grad(safe1))(xs)), [0.0, 0.25, 1 / 6], rtol=1e-15)


def test_cond_branches_of_different_structures_raise_type_error():
    with pytest.raises(TypeError, match="structures"):
        vt.jit(lambda x: vt.cond(x > 0, lambda: (x, x), lambda: [x, x]))(1.0)


# ---------------------------------------------------------------- empty scans, out_axes, while_loop


def test_scan_of_no_steps_gives_the_carry_and_empty_ys():
    # JAX's testForiLoopIssue8152.
    assert float(vt.fori_loop(0, 0, lambda i, x: x + i, 1.0)) == 1.0
    for run in (lambda f: f, vt.jit):
        carry, ys = run(lambda xs: vt.scan(lambda c, x: (c + x, x), 0.0, xs))(np.array([]))
        assert float(carry) == 0.0 and tuple(ys.shape) == (0,)
        carry, ys = run(lambda xs: vt.scan(lambda c, x: (c + vt.sum(x), x * 2.0), 1.5, xs))(np.zeros((0, 3)))
        assert float(carry) == 1.5 and tuple(ys.shape) == (0, 3)
    assert float(vt.grad(lambda c0: vt.scan(lambda c, x: (c * x, x), c0, np.array([]))[0])(2.0)) == 1.0


def test_vmap_negative_out_axes_count_from_the_end():
    x = np.arange(60.0).reshape(3, 4, 5)
    assert tuple(vt.vmap(lambda x: x, out_axes=-1)(x).shape) == (4, 5, 3)
    np.testing.assert_array_equal(np.asarray(vt.vmap(lambda x: x, out_axes=-1)(x)), np.moveaxis(x, 0, -1))
    np.testing.assert_array_equal(np.asarray(vt.vmap(lambda x: 2.0 * x, out_axes=-2)(x)), np.moveaxis(2 * x, 0, -2))
    assert not vt.vmap(lambda x: x, out_axes=-1)(x).is_batched


def test_while_loop_never_runs_its_body_on_the_exit_state():
    table = vt.asarray(np.arange(5.0))

    def body(c):
        i, s = c
        # take raises for an index out of range: the exit state (i = 5) must never reach it.
        return i + 1, s + vt.sum(vt.take(table, vt.reshape(vt.astype(i, vt.int64), (1,))))

    for run in (lambda f: f, vt.jit):
        i, s = run(lambda a: vt.while_loop(lambda c: c[0] < 5, body, (a, vt.asarray(0.0))))(0.0)
        assert (float(i), float(s)) == (5.0, 10.0)
    # A false predicate at the start: the body never runs on the carry (it is traced once, symbolically).
    i, s = vt.while_loop(lambda c: c[0] < 5, body, (vt.asarray(7.0), vt.asarray(0.0)))
    assert (float(i), float(s)) == (7.0, 0.0)
    # Batched: the finished examples keep their values.
    out = vt.vmap(lambda a: vt.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + c[0]), (a, 0.0 * a))[1])(
        np.array([0.0, 2.0, 7.0])
    )
    np.testing.assert_array_equal(np.asarray(out), [10.0, 9.0, 0.0])


# ---------------------------------------------------------------- exception types, cholesky's input


def test_structure_mismatches_raise_type_errors_as_jax():
    with pytest.raises(TypeError, match="scalar"):
        vt.grad(lambda x: x * 2.0)(np.ones(3))
    with pytest.raises(TypeError):
        vt.grad(lambda x: vt.sum(x))(np.arange(3))  # an integer variable
    with pytest.raises(TypeError, match="structure"):
        vt.jvp(lambda x: x, ((1.0, 2.0),), ([1.0, 2.0],))
    with pytest.raises(TypeError, match="structure"):
        out, pull = vt.vjp(lambda x: (x, x), 1.0)
        pull([1.0, 1.0])
    # Both a vtape.Error and a TypeError.
    with pytest.raises(vt.Error):
        vt.grad(lambda x: x * 2.0)(np.ones(3))


def test_cholesky_symmetrizes_its_input_as_jax():
    rng = np.random.default_rng(4)
    b = rng.standard_normal((4, 4))
    a = b @ b.T + 4 * np.eye(4)
    direction = rng.standard_normal((4, 4))  # not symmetric
    f = lambda a: vt.sum(vt.cholesky(a) * vt.asarray(b))  # noqa: E731
    h = 1e-6
    numeric = (float(f(a + h * direction)) - float(f(a - h * direction))) / (2 * h)
    analytic = float(np.sum(np.asarray(vt.grad(f)(a)) * direction))
    assert analytic == pytest.approx(numeric, rel=1e-7)
    np.testing.assert_allclose(np.asarray(vt.cholesky(a)), np.linalg.cholesky(a), rtol=1e-14)
    # The lower triangle only, on request (the C++ rule): the upper one is not read.
    upper = a + np.triu(np.full((4, 4), 100.0), 1)
    np.testing.assert_allclose(np.asarray(vt.cholesky(upper, symmetrize_input=False)), np.linalg.cholesky(a), rtol=1e-14)
    w, v = vt.eigh(a + np.triu(np.ones((4, 4)), 1))  # an asymmetric input: its symmetric part's eigenvalues
    sym = a + 0.5 * (np.triu(np.ones((4, 4)), 1) + np.tril(np.ones((4, 4)), -1))
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(sym), rtol=1e-13)


# ---------------------------------------------------------------- closures at the trace boundary (random programs)


def test_scan_body_vmapping_a_function_that_reads_an_outer_value():
    def F(p):
        v = vt.reshape(p, (4, 1))

        def body(c, x):
            def m(a):
                p[0:2]  # the unused read was enough to crash
                return a

            return c, vt.vmap(m)(v)

        _, ys = vt.scan(body, p, None, length=3)
        return vt.sum(p) + 0.5 * vt.sum(ys)

    p = np.array([0.5, -0.25, 0.75, 0.125])
    np.testing.assert_allclose(np.asarray(vt.grad(F)(p)), np.full(4, 2.5), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(vt.jit(vt.grad(F))(p)), np.full(4, 2.5), rtol=1e-15)
    assert float(vt.jvp(F, (p,), (np.ones(4),))[1]) == pytest.approx(10.0, rel=1e-15)


def test_scan_body_returning_a_closed_over_value_as_its_y():
    def G(p):
        w = p[0:1] * 2.0
        c, ys = vt.scan(lambda c, x: (c + 1.0, w), vt.asarray(np.zeros(2)), None, length=2)
        return vt.sum(ys) + vt.sum(c)

    p = np.array([0.3, -0.7, 0.2])
    np.testing.assert_array_equal(np.asarray(vt.grad(G)(p)), [4.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(vt.jit(vt.grad(G))(p)), [4.0, 0.0, 0.0])
    assert float(vt.jit(G)(p)) == pytest.approx(float(G(p)), rel=1e-15)


def test_a_carry_that_nothing_reads_gets_no_derivative_where_the_body_s_is_infinite():
    # The fuzzer's seeds 50899 and 87192, reduced: b starts at 0 p, sqrt'(0) is infinite, only a is read. JAX drops
    # the unread carry and the ys; a zero cotangent for them would give 0 x inf = NaN for p. d/dp sum(a_3) = 3 p^2.
    def F(p):
        def body(c, _):
            a, b = c
            return (a * p, vt.sqrt(b) * p), vt.sqrt(b) * p

        (a, b), ys = vt.scan(body, (vt.ones((2,)), p * 0.0), None, length=3)
        return vt.sum(a)

    def G(p):  # fori_loop, a dict carry
        def body(i, c):
            return {"a": c["a"] * p, "b": vt.sqrt(c["b"]) * p}

        return vt.sum(vt.fori_loop(0, 3, body, {"a": vt.ones((2,)), "b": p * 0.0})["a"])

    p = np.array([0.5, -1.5])
    for f in (F, G):
        for g in (vt.grad(f), vt.jit(vt.grad(f)), vt.grad(vt.jit(f))):
            np.testing.assert_allclose(np.asarray(g(p)), 3 * p**2, rtol=1e-15)
    ps = np.array([[0.5, -1.5], [2.0, 0.25]])
    np.testing.assert_allclose(np.asarray(vt.vmap(vt.grad(F))(ps)), 3 * ps**2, rtol=1e-15)


def test_a_carry_that_nothing_reads_still_carries_the_derivative_of_the_carries_it_feeds():
    def step(p, a, b):
        return a * p + b, b * p

    def looped(p):
        (a, b), _ = vt.scan(lambda c, _: (step(p, *c), None), (vt.ones((2,)), p * 2.0), None, length=4)
        return vt.sum(a)

    def unrolled(p):
        a, b = vt.ones((2,)), p * 2.0
        for _ in range(4):
            a, b = step(p, a, b)
        return vt.sum(a)

    p = np.array([0.5, -1.5])
    np.testing.assert_allclose(np.asarray(vt.grad(looped)(p)), np.asarray(vt.grad(unrolled)(p)), rtol=1e-13)
    x = p.copy()
    for i in range(2):  # against central differences too
        e = np.eye(2)[i]
        assert float(vt.grad(looped)(p)[i]) == pytest.approx(central(lambda t: looped(x + t * e), 0.0), rel=1e-7)


def test_a_dead_vmap_in_a_scan_body_does_not_batch_the_scan():
    def H(p):
        def body(c, x):
            vt.vmap(lambda a: vt.reshape(p[1:2], (1, 1)))(p)  # dead
            return c + 1.0, None

        return vt.scan(body, vt.asarray(np.zeros(3)), None, length=1)[0]

    p = np.array([0.3, -0.7, 0.2, 0.9])
    for run in (lambda f: f, vt.jit):
        out = run(H)(p)
        assert not out.is_batched
        np.testing.assert_array_equal(np.asarray(out), np.ones(3))


def test_jit_of_two_vmaps_of_different_sizes_equals_eager():
    C43 = np.arange(12.0).reshape(4, 3)

    def K(p):
        s = vt.sum(p)
        a = vt.vmap(lambda r: vt.maximum(r, s))(C43)
        b = vt.vmap(lambda r: r)(vt.reshape(p[:3], (3, 1)))
        return vt.sum(a) + vt.sum(b)

    p = np.array([0.3, -0.7, 0.2, 0.9])
    assert float(vt.jit(K)(p)) == float(K(p))
    np.testing.assert_array_equal(np.asarray(vt.jit(vt.grad(K))(p)), np.asarray(vt.grad(K)(p)))


def test_jit_of_jacrev_through_vmaps_of_two_sizes_equals_eager():
    # Found by tools/fuzz_compose.py (seed 6692): the pullbacks of two vmaps of sizes 2 and 1 leave batched constants
    # of both sizes in the plan of jacrev, which jit refused at the call; it now runs op by op.
    K21 = np.array([[-0.65, -0.6, -0.89], [0.24, -0.02, 0.25]])
    K22 = np.array([[0.18, 0.24, -0.54], [-0.83, -0.59, 0.08]])

    def F(p):
        v13, v14 = p[::2], p[0:2]
        v19 = vt.vmap(lambda r, u: vt.mean(p), in_axes=(0, None))(v14, v14)
        return vt.vmap(lambda r: v19 @ K21 - (r @ K22 - vt.concatenate([v14, v14], 0)[0:3]))(vt.reshape(v13, (1, 2)))

    x = np.array([0.614122, 0.834586, 0.232768])
    expected = np.asarray(vt.jacrev(F)(x))
    assert expected.shape == (1, 3, 3)
    np.testing.assert_allclose(np.asarray(vt.jit(vt.jacrev(F))(x)), expected, rtol=1e-14, atol=1e-15)
    # F is linear in p: its Jacobian is F's change along each unit vector.
    cols = [np.asarray(F(x + e)) - np.asarray(F(x)) for e in np.eye(3)]
    np.testing.assert_allclose(expected, np.stack(cols, -1), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- grad(jit(f)) traces once


def test_grad_of_jit_traces_once_and_matches():
    F = np.random.default_rng(3).standard_normal((6, 3))
    runs = []

    def model(p):
        runs.append(1)
        k = vt.matmul(F * p * p, F.T) + 2.0 * np.eye(6)
        return vt.logdet(vt.cho_factor(k)) + vt.sum(vt.sin(p))

    jm = vt.jit(model)
    p0 = np.array([0.3, -0.2, 0.5])
    expected = [np.asarray(vt.grad(model)(p0 * (1 + 0.1 * i))) for i in range(4)]
    runs.clear()
    for i in range(4):
        np.testing.assert_allclose(np.asarray(vt.grad(jm)(p0 * (1 + 0.1 * i))), expected[i], rtol=1e-12)
    assert len(runs) == 2  # the trace of the function and of its pullback, nothing after
    h = np.asarray(vt.hessian(model)(p0))
    runs.clear()
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(vt.hessian(jm)(p0)), h, rtol=1e-10)
    assert len(runs) <= 2  # the jvp of the pullback (and the jvp), once
    runs.clear()
    np.testing.assert_allclose(np.asarray(vt.hessian(jm)(p0)), h, rtol=1e-10)
    assert runs == []
