"""JAX twin of zoo::logistic (tools/bench/zoo/models/logistic.cpp): Bayesian logistic regression, 1000 observations,
20 weights, standard normal prior."""
import jax
import jax.numpy as jnp
import numpy as np


def make(data_dir):
    n, p = 1000, 20
    i, j = np.arange(n)[:, None], np.arange(p)[None, :]
    X = np.sin(0.7 * i + 1.3 * j) + 0.1 * np.cos(3.1 * i * j)
    y = (np.sin(2.1 * np.arange(n)) > 0.0).astype(np.float64)

    def log_density(w):
        z = X @ w
        return jnp.sum(y * z - jax.nn.softplus(z)) - 0.5 * jnp.sum(w**2)

    return [float(0.1 * np.cos(k)) for k in range(p)], log_density
