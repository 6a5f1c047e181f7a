"""JAX twin of tools/bench/zoo/models/kalman.cpp: a Matérn-3/2 Kalman filter by lax.scan over 1000 observations,
theta = [log ell, log sigma, log noise]. `matern32_kalman` takes its numpy and lax namespaces as arguments, so that
tools/bench/kalman_vmap.py runs the same code under vtape's Python package."""
import numpy as np


def matern32_kalman(theta, y, jnp, lax, dt=0.1):
    ell, sigma, noise = jnp.exp(theta[0]), jnp.exp(theta[1]), jnp.exp(theta[2])
    lam = jnp.sqrt(3.0) / ell
    A = jnp.array([[1.0 + lam * dt, dt], [-lam**2 * dt, 1.0 - lam * dt]]) * jnp.exp(-lam * dt)
    p_inf = jnp.array([[sigma**2, 0.0], [0.0, lam**2 * sigma**2]])
    Q = p_inf - A @ p_inf @ A.T
    H = jnp.array([1.0, 0.0])

    def step(carry, yt):
        m, P, ll = carry
        m = A @ m
        P = A @ P @ A.T + Q
        S = H @ P @ H + noise**2
        K = P @ H / S
        r = yt - H @ m
        m = m + K * r
        P = P - jnp.outer(K, K) * S
        ll = ll - 0.5 * (jnp.log(2 * jnp.pi * S) + r**2 / S)
        return (m, P, ll), None

    (_, _, ll), _ = lax.scan(step, (jnp.zeros(2), p_inf, 0.0), y)
    return ll


def make(data_dir):
    import jax.numpy as jnp
    from jax import lax

    i = np.arange(1000, dtype=np.float64)
    y = jnp.asarray(np.sin(0.1 * i) + 0.1 * np.sin(7.3 * i))
    return [0.0, 0.0, float(np.log(0.1))], lambda theta: matern32_kalman(theta, y, jnp, lax)
