"""JAX twin of zoo::woodbury (tools/bench/zoo/models/woodbury.cpp): log N(y | 0, sigma2 I + Phi diag(s) Phi^T) with
100 Fourier features on 2000 points, by Woodbury and the determinant lemma (one 100 x 100 Cholesky)."""
import jax
import jax.numpy as jnp
import numpy as np


def make(data_dir):
    n, features = 2000, 50
    i = np.arange(n)
    t = 10.0 * i / n
    omega = np.repeat(2.0 * np.pi * np.arange(1, features + 1) / 20.0, 2)  # each frequency twice: cos, sin
    phi = np.empty((n, 2 * features))
    phi[:, 0::2] = np.cos(omega[0::2] * t[:, None])
    phi[:, 1::2] = np.sin(omega[1::2] * t[:, None])
    y = np.sin(1.3 * t) + 0.3 * np.cos(7.1 * t) + 0.05 * np.sin(1000.0 * i)
    log_2pi = np.log(2.0 * np.pi)

    def log_density(theta):
        log_sigma2 = theta[0]
        sigma2, amp, ell = jnp.exp(theta[0]), jnp.exp(theta[1]), jnp.exp(theta[2])
        s = amp * jnp.exp(-0.5 * (omega * ell) ** 2)
        A = jnp.diag(1.0 / s) + phi.T @ phi / sigma2
        b = phi.T @ y / sigma2
        factor = jax.scipy.linalg.cho_factor(A, lower=True)
        quad = jnp.sum(y**2) / sigma2 - jnp.sum(b * jax.scipy.linalg.cho_solve(factor, b))
        logdet_a = 2.0 * jnp.sum(jnp.log(jnp.diagonal(factor[0])))
        logdet = n * log_sigma2 + jnp.sum(jnp.log(s)) + logdet_a
        return -0.5 * (quad + logdet + n * log_2pi)

    return [float(np.log(0.01)), float(np.log(1.0)), float(np.log(0.5))], log_density
