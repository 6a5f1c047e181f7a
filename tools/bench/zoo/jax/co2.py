"""JAX twin of tools/bench/zoo/models/co2.cpp (examples/gp_co2's evaluation, examples/gp_model.hpp): the log
marginal likelihood of scikit-learn's Mauna Loa CO2 kernel over the 11 natural-log hyperparameters
[c1, l1, c2, l2, l_sine, c3, alpha, l3, c4, l4, noise], on the centred monthly series (n = 521)."""
import pathlib

import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np


def make(data_dir):
    # The bundled series, as gp_co2 reads it (header line, then 't,value' rows); data_dir is not used.
    path = pathlib.Path(__file__).resolve().parents[4] / "examples/data/co2_monthly.csv"
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    t, y = data[:, 0], data[:, 1]
    n = t.shape[0]
    mean = 0.0
    for v in y:  # gp_co2 centres y (the mean accumulated in its order); no scaling
        mean += v / n
    y = y - mean
    d = t[:, None] - t[None, :]
    sq = jnp.asarray(d * d)
    sin2 = jnp.asarray(np.sin(np.pi * d) ** 2)  # ExpSineSquared with periodicity fixed at 1
    y = jnp.asarray(y)
    identity = jnp.eye(n)

    def log_density(theta):
        p = jnp.exp(theta)
        long_term = p[0] * jnp.exp(-0.5 * sq / p[1] ** 2)
        seasonal = p[2] * jnp.exp(-0.5 * sq / p[3] ** 2 - 2.0 * sin2 / p[4] ** 2)
        medium = p[5] * (1.0 + sq / (2.0 * p[6] * p[7] ** 2)) ** (-p[6])
        noise_corr = p[8] * jnp.exp(-0.5 * sq / p[9] ** 2)
        # 1e-10 on the diagonal: scikit-learn's GaussianProcessRegressor default (alpha), as gp_model.hpp adds it.
        K = long_term + seasonal + medium + noise_corr + (p[10] + 1e-10) * identity
        L = jnp.linalg.cholesky(K)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
        return -0.5 * (jnp.dot(y, jsl.cho_solve((L, True), y)) + logdet) - 0.5 * n * np.log(2.0 * np.pi)

    # scikit-learn's initial kernel (gp::sklearn_initial), gp_co2's first start.
    base = [np.log(50.0 * 50.0), np.log(50.0), np.log(2.0 * 2.0), np.log(100.0), np.log(1.0), np.log(0.5 * 0.5),
            np.log(1.0), np.log(1.0), np.log(0.1 * 0.1), np.log(0.1), np.log(0.1 * 0.1)]
    return [float(v) for v in base], log_density
