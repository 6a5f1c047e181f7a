"""The JAX twin of examples/gp_statespace: a Matern-3/2 GP's log marginal likelihood by a Kalman
filter written with lax.scan, jit(value_and_grad), float64, on the CPU. The same series (times with
exponential gaps of mean 0.1, a smooth signal plus noise) drawn by numpy, so values differ from the
C++ example's draw; times are what this script compares (tools/bench/bench_statespace.sh runs both).

  python3 tools/bench/jax_statespace.py [--npoints 100000] [--reps 5]
"""
import argparse
import json
import math
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def simulate(n, seed=20261204):
    rng = np.random.default_rng(seed)
    dt = np.concatenate([[0.0], rng.exponential(0.1, n - 1)])
    t = np.cumsum(dt)
    y = np.sin(t) + 0.5 * np.sin(3.1 * t + 1.0) + 0.3 * rng.standard_normal(n)
    return jnp.asarray(t), jnp.asarray(y), jnp.asarray(dt)


def kalman_log_likelihood(theta, y, dt):
    s2 = jnp.exp(2 * theta[0])
    lam = math.sqrt(3.0) / jnp.exp(theta[1])
    noise = jnp.exp(2 * theta[2])
    e = jnp.exp(-lam * dt)
    ldt = lam * dt
    a00, a01, a10, a11 = e * (1 + ldt), e * dt, -e * lam * ldt, e * (1 - ldt)
    p0, p1 = s2, lam * lam * s2
    q00 = p0 - (a00 * a00 * p0 + a01 * a01 * p1)
    q01 = -(a00 * a10 * p0 + a01 * a11 * p1)
    q11 = p1 - (a10 * a10 * p0 + a11 * a11 * p1)
    xs = jnp.stack([a00, a01, a10, a11, q00, q01, q11, y], 1)
    init = jnp.stack([0.0, 0.0, p0, 0.0, p1])

    def step(c, x):
        m0, m1, P00, P01, P11 = c[0], c[1], c[2], c[3], c[4]
        A00, A01, A10, A11 = x[0], x[1], x[2], x[3]
        pm0, pm1 = A00 * m0 + A01 * m1, A10 * m0 + A11 * m1
        t00, t01 = A00 * P00 + A01 * P01, A00 * P01 + A01 * P11
        t10, t11 = A10 * P00 + A11 * P01, A10 * P01 + A11 * P11
        pP00 = t00 * A00 + t01 * A01 + x[4]
        pP01 = t00 * A10 + t01 * A11 + x[5]
        pP11 = t10 * A10 + t11 * A11 + x[6]
        S = pP00 + noise
        v = x[7] - pm0
        k0, k1 = pP00 / S, pP01 / S
        nxt = jnp.stack([pm0 + k0 * v, pm1 + k1 * v, pP00 - k0 * pP00, pP01 - k0 * pP01, pP11 - k1 * pP01])
        return nxt, -0.5 * (jnp.log(S) + v * v / S + math.log(2 * math.pi))

    return jnp.sum(jax.lax.scan(step, init, xs)[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--npoints", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    _, y, dt = simulate(args.npoints)
    theta = jnp.array([math.log(0.9), math.log(0.7), math.log(0.35)])
    f = jax.jit(jax.value_and_grad(kalman_log_likelihood))
    t0 = time.perf_counter()
    v, g = f(theta, y, dt)
    g.block_until_ready()
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        v, g = f(theta, y, dt)
        g.block_until_ready()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"npoints": args.npoints, "log_likelihood": float(v), "first_call_ms": first,
                      "value_and_grad_ms": sorted(times)[len(times) // 2]}))


if __name__ == "__main__":
    main()
