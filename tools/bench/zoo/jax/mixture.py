"""JAX twin of tools/bench/zoo/models/mixture.cpp: a 1-D Gaussian mixture, 5000 points, 3 components, in the [N, K]
layout, theta = [logits(3), mu(3), log s(3)]."""
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp


def make(data_dir):
    n, k = 5000, 3
    i = np.arange(n)
    x = jnp.asarray(np.array([-2.0, 0.5, 3.0])[i % k] + 0.7 * np.sin(12.9898 * i))
    half_log_2pi = 0.5 * np.log(2.0 * np.pi)

    def log_density(theta):
        logits, mu, log_s = theta[:3], theta[3:6], theta[6:9]
        log_w = logits - logsumexp(logits)
        z = (x[:, None] - mu) / jnp.exp(log_s)
        components = log_w - 0.5 * z**2 - log_s - half_log_2pi
        return (jnp.sum(logsumexp(components, axis=1)) - 0.5 * jnp.sum(logits**2) - jnp.sum(mu**2) / 200.0
                - 0.5 * jnp.sum(log_s**2))

    return [0.0, 0.0, 0.0, -1.5, 0.3, 2.5] + [float(np.log(0.8))] * 3, log_density
