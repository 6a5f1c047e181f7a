"""JAX twin of zoo::grouped (tools/bench/zoo/models/pta.cpp; the model of examples/gp_grouped.cpp): per-class EFAC
and per-group ECORR on closed-form synthetic data, take + segment_sum."""
import jax
import jax.numpy as jnp
import numpy as np


def make(data_dir):
    n, groups, classes = 2000, 200, 4
    i = np.arange(n)
    group_of_point = i * groups // n
    class_of_group = np.arange(groups) % classes
    class_of_point = class_of_group[group_of_point]
    error = 1.0 + 0.5 * np.sin(0.37 * i) ** 2
    residual = np.sin(0.1 * i) + 0.3 * np.cos(1.7 * i)
    log_2pi = np.log(2.0 * np.pi)

    def log_density(theta):
        log_efac, log_ecorr = theta[:classes], theta[classes:]
        sigma2 = (jnp.take(jnp.exp(log_efac), class_of_point) * error) ** 2
        w = 1.0 / sigma2
        s = jax.ops.segment_sum(w, group_of_point, groups)
        a = jax.ops.segment_sum(w * residual, group_of_point, groups)
        J = jnp.exp(jnp.take(log_ecorr, class_of_group) * 2.0)
        quadratic = jnp.sum(w * residual**2) - jnp.sum(J * a**2 / (1.0 + J * s))
        log_det = jnp.sum(jnp.log(sigma2)) + jnp.sum(jnp.log1p(J * s))
        return (quadratic + log_det + n * log_2pi) * -0.5

    return [0.1, -0.05, 0.2, 0.0, -1.0, -0.5, -0.8, -1.2], log_density
