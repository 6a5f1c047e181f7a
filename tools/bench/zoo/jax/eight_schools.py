"""JAX twin of tools/bench/zoo/models/eight_schools.cpp: eight schools, non-centred, theta = [mu, log tau, eta(8)]."""
import jax.numpy as jnp
import numpy as np


def make(data_dir):
    y = jnp.array([28.0, 8, -3, 7, -1, 1, 18, 12])
    sigma = jnp.array([15.0, 10, 16, 11, 9, 11, 10, 18])

    def log_density(theta):
        mu, log_tau, eta = theta[0], theta[1], theta[2:]
        tau = jnp.exp(log_tau)
        prior = -mu**2 / 50.0 - jnp.log1p((tau / 5.0) ** 2) + log_tau - 0.5 * jnp.sum(eta**2)
        return prior - 0.5 * jnp.sum(((y - (mu + tau * eta)) / sigma) ** 2)

    return [4.0, float(np.log(3.0))] + [float(0.1 * np.sin(j)) for j in range(8)], log_density
