"""scan, fori_loop, while_loop and cond from Python: against Python loops, finite differences, vmap and jit."""

import numpy as np
import pytest

import vtape as vt

rng = np.random.default_rng(5)


def ar1_loss(params, xs):
    """An AR(1) filter's squared one-step errors over xs, with a dict carry and a pytree of ys."""

    def step(carry, x):
        pred = params[0] * carry["level"]
        err = x - pred
        return {"level": x, "total": carry["total"] + err * err}, {"err": err, "pred": pred}

    carry, ys = vt.scan(step, {"level": vt.asarray(0.0), "total": vt.asarray(0.0)}, xs)
    return carry["total"] * params[1], ys


def test_scan_equals_a_python_loop_with_pytree_carries_and_ys():
    xs, params = rng.standard_normal(12), np.array([0.7, 1.5])
    total, ys = ar1_loss(params, xs)
    level, want_total, errs = 0.0, 0.0, []
    for x in xs:
        e = x - 0.7 * level
        errs.append(e)
        want_total += e * e
        level = x
    np.testing.assert_allclose(float(total), want_total * 1.5, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(ys["err"]), errs, rtol=1e-13)
    assert ys["pred"].shape == (12,)
    rev_carry, rev_ys = vt.scan(lambda c, x: (c + x, c), vt.asarray(0.0), np.arange(4.0), reverse=True)
    assert float(rev_carry) == 6.0
    np.testing.assert_array_equal(np.asarray(rev_ys), [6.0, 5.0, 3.0, 0.0])  # from the last step back, in xs' order


def test_scan_gradients_match_central_differences_and_checkpointing():
    xs, params = rng.standard_normal(20), np.array([0.6, 1.2])
    g = vt.grad(lambda p: ar1_loss(p, xs)[0])(params)
    fd = [(float(ar1_loss(params + h, xs)[0]) - float(ar1_loss(params - h, xs)[0])) / 2e-6
          for h in np.eye(2) * 1e-6]
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6)

    def checkpointed(p):
        step = lambda c, x: (c * p[0] + x, c * c)  # noqa: E731
        carry, ys = vt.scan(step, vt.asarray(0.5), xs, checkpoint_every=4)
        return vt.sum(ys) + carry * p[1]

    def plain(p):
        step = lambda c, x: (c * p[0] + x, c * c)  # noqa: E731
        carry, ys = vt.scan(step, vt.asarray(0.5), xs)
        return vt.sum(ys) + carry * p[1]

    np.testing.assert_allclose(np.asarray(vt.grad(checkpointed)(params)), np.asarray(vt.grad(plain)(params)),
                               rtol=1e-12)


def test_fori_loop_while_loop_and_cond():
    # fori_loop: x_{i+1} = x_i + i
    assert float(vt.fori_loop(2, 6, lambda i, x: x + vt.astype(i, "float64"), vt.asarray(1.0))) == 1 + 2 + 3 + 4 + 5
    assert float(vt.fori_loop(3, 3, lambda i, x: x * 0, vt.asarray(4.0))) == 4.0
    # while_loop: halve until below 1
    out = vt.while_loop(lambda c: c["x"] > 1.0, lambda c: {"x": c["x"] * 0.5, "n": c["n"] + 1.0},
                        {"x": vt.asarray(40.0), "n": vt.asarray(0.0)})
    assert float(out["x"]) == 0.625 and float(out["n"]) == 6.0
    with pytest.raises(vt.Error, match="while_loop"):
        vt.grad(lambda x: vt.while_loop(lambda c: c > 1.0, lambda c: c * 0.5, x))(np.array(3.0))
    # cond: a concrete predicate runs one branch; under vmap both run and select
    assert float(vt.cond(vt.asarray(1.0), lambda a: a * 2, lambda a: a * 3, vt.asarray(5.0))) == 10.0
    picked = vt.vmap(lambda x: vt.cond(x > 0, lambda a: a * 2, lambda a: -a, x))(np.array([-1.0, 2.0, -3.0]))
    np.testing.assert_array_equal(np.asarray(picked), [1.0, 4.0, 3.0])
    with pytest.raises(TypeError, match="structure"):
        vt.vmap(lambda x: vt.cond(x > 0, lambda: (x,), lambda: [x]))(np.ones(2))


def test_loops_under_vmap_and_jit_trace_once():
    xs = rng.standard_normal((3, 10))
    per_row = [float(ar1_loss(np.array([0.5, 1.0]), x)[0]) for x in xs]
    f = vt.jit(vt.vmap(lambda x: ar1_loss(np.array([0.5, 1.0]), x)[0]))
    np.testing.assert_allclose(np.asarray(f(xs)), per_row, rtol=1e-13)
    f(rng.standard_normal((5, 10)))
    assert f.counters()["traces"] == 1
    # a batched while_loop runs until every example is done; the finished keep their values
    halves = vt.vmap(lambda x: vt.while_loop(lambda c: c > 1.0, lambda c: c * 0.5, x))(np.array([0.5, 3.0, 9.0]))
    np.testing.assert_array_equal(np.asarray(halves), [0.5, 0.75, 0.5625])


def test_loop_errors_name_the_loop():
    with pytest.raises(ValueError, match="length"):
        vt.scan(lambda c, x: (c, c), vt.asarray(0.0))
    with pytest.raises(TypeError, match="structure"):
        vt.scan(lambda c, x: ((c, c), c), vt.asarray(0.0), np.ones(3))
    with pytest.raises(vt.Error, match="scan"):
        vt.scan(lambda c, x: (vt.stack([c, c]), c), vt.asarray(0.0), np.ones(3))  # the carry changes shape


def test_integer_and_bool_carries_xs_and_ys_keep_their_dtypes():
    # An integer counter beside a float carry, integer xs (arange) and an integer y, as JAX models write them.
    def model(theta, xs):
        def step(carry, t):
            n, acc, seen = carry
            acc = acc * theta + vt.astype(t, "float64")
            return (n + 1, acc, seen | (acc > 10.0)), n * t

        return vt.scan(step, (0, vt.asarray(1.0), False), xs)

    xs = np.arange(5)
    (n, acc, seen), ys = model(np.array(1.5), xs)
    reference, flags = 1.0, False
    for t in range(5):
        reference = reference * 1.5 + t
        flags = flags or reference > 10.0
    assert n.dtype == np.int64 and int(n) == 5
    assert seen.dtype == np.bool_ and bool(seen) == flags
    assert ys.dtype == np.int64 and ys.tolist() == [k * k for k in range(5)]
    assert float(acc) == pytest.approx(reference, rel=1e-15)
    # The gradient through the float carry, under jit(vmap(grad)) with one trace for two batch sizes.
    loss = vt.jit(vt.vmap(vt.grad(lambda th: model(th, xs)[0][1])))
    thetas = np.array([0.5, 1.5, 2.0])
    h = 1e-6
    fd = [(float(model(th + h, xs)[0][1]) - float(model(th - h, xs)[0][1])) / (2 * h) for th in thetas]
    np.testing.assert_allclose(np.asarray(loss(thetas)), fd, rtol=1e-7)
    loss(thetas[:2])
    assert loss.counters()["traces"] == 1


def test_integer_carries_of_while_and_fori_loops():
    # A while loop counting in int64 beside a float32 carry: both keep their dtypes; the float32 values are float32's.
    n, x = vt.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * np.float32(1.1)), (0, np.float32(1.0)))
    assert n.dtype == np.int64 and int(n) == 4
    expected = np.float32(1.0)
    for _ in range(4):
        expected = expected * np.float32(1.1)
    assert x.dtype == np.float32 and float(x) == float(expected)
    # Batched: each example counts to its own end.
    counts = vt.vmap(lambda m: vt.while_loop(lambda c: c[1] < m, lambda c: (c[0] + 2, c[1] + 1), (0, 0)))(
        np.array([0, 3, 1]))
    assert counts[0].tolist() == [0, 6, 2]
    # fori_loop with a bound known only when the plan runs: an int64 counter in the carry.
    power = vt.jit(lambda k, b: vt.fori_loop(0, k, lambda i, c: c * b, 1.0))
    assert float(power(np.int64(5), np.array(2.0))) == 32.0
    # The body returns each carry in init's dtype, or a TypeError names it (as JAX's).
    with pytest.raises(TypeError, match="carry 0 as float64 where init's is int64"):
        vt.fori_loop(0, 3, lambda i, c: c + 0.5, 0)
