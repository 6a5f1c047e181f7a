"""JAX twin of the zoo's seed model (tools/bench/zoo/models/seed.cpp), as jax-ml/jax#21313 writes it."""
import jax
import jax.numpy as jnp
import numpy as np


def make(data_dir):
    n, ngp = 256, 64
    t = np.arange(n) / (n - 1)
    f = np.arange(1, ngp + 1, dtype=np.float64)
    fmat = np.zeros((n, 2 * ngp))
    fmat[:, ::2] = np.sin(2.0 * np.pi * f * t[:, None])
    fmat[:, 1::2] = np.cos(2.0 * np.pi * f * t[:, None])
    one, ones = jnp.identity(n), jnp.ones(n)

    def log_density(p):
        a = fmat @ jnp.diag(p**2) @ fmat.T + one
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), ones).mean()

    base = [0.5 + 0.3 * np.sin(k) for k in range(2 * ngp)]
    return base, log_density
