"""JAX twin of tools/bench/zoo/models/hierarchical.cpp: 64 groups of 16 points, a per-group RBF GP with
shared theta = [log amp, log ell, log sigma, mu], sum_g log N(y_g - mu 1 | 0, K_g), batched Cholesky."""
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np


def make(data_dir):
    groups, m = 64, 16
    g = np.arange(groups, dtype=np.float64)[:, None]
    j = np.arange(m, dtype=np.float64)[None, :]
    t = j / 16.0 + 0.01 * g
    y = np.sin(3.0 * t + 0.1 * g) + 0.2 * np.cos(11.0 * t) + 0.05 * np.sin(97.0 * (16.0 * g + j))
    D = jnp.asarray((t[:, :, None] - t[:, None, :]) ** 2)
    Y = jnp.asarray(y)
    identity = jnp.eye(m)
    log_2pi_terms = 0.5 * groups * m * np.log(2.0 * np.pi)

    def log_density(theta):
        amp, ell, sigma, mu = jnp.exp(theta[0]), jnp.exp(theta[1]), jnp.exp(theta[2]), theta[3]
        K = amp**2 * jnp.exp(-D / (2.0 * ell**2)) + sigma**2 * identity
        L = jnp.linalg.cholesky(K)
        r = (Y - mu)[:, :, None]
        alpha = jsl.cho_solve((L, True), r)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))
        return -0.5 * (jnp.sum(r * alpha) + logdet) - log_2pi_terms

    return [0.0, float(np.log(0.3)), float(np.log(0.1)), 0.05], log_density
