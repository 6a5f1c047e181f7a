"""Confirms with JAX the expected values that python/tests/conformance derives in closed form where JAX's own test
asserts only "doesn't crash" (testIssue711, testIssue757, test_scan_hoisting_consts, test_issue_3204,
test_while_loop_fixed_point_with_batched_pred_and_consts, testIssue1361, BatchingTest.testHessian). Needs jax;
the tests themselves never import it.

    python3 tools/conformance/jax_expected.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def close(name, got, want, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-14, err_msg=name)
    print(f"{name}: JAX agrees")


# testIssue711: x_final = x0 - 7.5 p, and its loss's gradient.
def minimize_structure(p):
    def apply_carry(carry, _):
        i, x = carry
        return (i + 1, x - 0.1 * jax.grad(lambda conf: jnp.sum(conf * p))(x)), _

    (_, x), _ = lax.scan(apply_carry, (0, jnp.array([1.0, 2.0, 3.0])), jnp.zeros((75, 0)))
    return x


close("testIssue711 x_final", minimize_structure(0.5), np.array([1.0, 2.0, 3.0]) - 7.5 * 0.5)
close("testIssue711 grad", jax.grad(lambda p: jnp.sum(jnp.sin(1.0 - minimize_structure(p))))(0.25),
      np.sum(np.cos(1.0 - np.array([1.0, 2.0, 3.0]) + 7.5 * 0.25) * 7.5))

# testIssue757: the chain rule through x -> -sin(x), ten times.
loop = lambda v: lax.scan(lambda x, i: (jax.grad(jnp.cos)(x), i), v, jnp.arange(10))[0]  # noqa: E731
x, want = 0.5, 1.0
for _ in range(10):
    want *= -np.cos(x)
    x = -np.sin(x)
close("testIssue757", jax.jit(jax.jacfwd(loop))(0.5), want)

# test_scan_hoisting_consts: f is linear in x.
A = jnp.arange(4.0).reshape(2, 2)
B = A + 1.0


def hoisting(x):
    def body(c, _):
        c1, c2, c3 = c
        return (A @ c1, B @ c2, jnp.sin(B) @ c3), None

    (c1, c2, c3), _ = lax.scan(body, (x * jnp.ones(2),) * 3, None, length=3)
    return jnp.sum(c1) + jnp.sum(c2) + jnp.sum(c3)


m = np.linalg.matrix_power
close("test_scan_hoisting_consts", jax.grad(hoisting)(1.0),
      sum(np.sum(m(M, 3) @ np.ones(2)) for M in (np.asarray(A), np.asarray(B), np.sin(np.asarray(B)))))


# test_issue_3204: sum over i <= a, j <= b of i + j.
def test(a, b):
    def bodyfun_1(inp):
        val, i, j = inp
        val = lax.while_loop(lambda inp: inp[2] < b + 1, lambda inp: (inp[0] + inp[1] + inp[2], inp[1], inp[2] + 1),
                             (val, i, 0))[0]
        return (val, i + 1, j)

    return lax.while_loop(lambda inp: inp[1] < a + 1, bodyfun_1, (0, 0, 0))[0]


close("test_issue_3204", jax.vmap(test)(jnp.arange(5), jnp.arange(5)),
      [sum(i + j for i in range(n + 1) for j in range(n + 1)) for n in range(5)])


# test_while_loop_fixed_point_with_batched_pred_and_consts: z = 1 + (5 - i) x.
def fixed_point(i, x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + x), (i, jnp.ones(3)))[1]


close("test_while_loop_fixed_point_with_batched_pred_and_consts",
      jax.vmap(fixed_point, in_axes=(0, 1))(jnp.arange(4), jnp.ones((3, 4))),
      1.0 + (5.0 - np.arange(4.0))[:, None] * np.ones((4, 3)))


# testIssue1361: d(8x)/dx.
@jax.jit
def jit_run_scan(x):
    (x, _), _ = lax.scan(lambda carry, _: ((2 * carry[0], 0.0), None), (x, 0.0), jnp.arange(3))
    return x


close("testIssue1361", jax.grad(jit_run_scan)(0.0), 8.0)

# BatchingTest.testHessian: maximum's derivative at a tie.
close("testHessian", jax.hessian(lambda x: jnp.sum(jnp.maximum(x, 0.0) ** 2))(jnp.array([-1.0, -0.5, 0.0, 0.5, 1.0])),
      np.diag([0.0, 0.0, 0.5, 2.0, 2.0]))

# JAX's side of the cases python/tests/conformance marks as vtape defects (and of one that is not).
try:  # a Python int branch against a float operand: JAX raises too (int64[] against float64[])
    jax.jit(lambda x: lax.cond(x < 3, lambda x: 5, lambda x: x, x))(0.0)
    raise AssertionError("JAX did not raise")
except TypeError:
    pass
assert lax.while_loop(lambda _: False, lambda _: (), ()) == ()
assert jax.grad(lambda x: sum(lax.scan(lambda c, _: ((0.0, 0.0), ()), (x, 0.0), (), length=5)[0]))(1.0) == 0.0
for call in (lambda: jax.vmap(lambda x: x, in_axes=False)(jnp.zeros(3)), lambda: jax.jit(3),
             lambda: jax.grad(jnp.sin)(1 + 2j), lambda: jax.jacfwd(lambda x: x**2)(3.0 + 1j)):
    try:
        call()
        raise AssertionError("JAX did not raise")
    except TypeError:
        pass
print("the defects' JAX behaviour: confirmed")
