"""JAX twin of tools/bench/zoo/models/kepler.cpp: Kepler radial velocities at 200 times, a 20-step Newton
fori_loop for E - e sin E = M, theta = [log P, log K, logit e, omega, M0, gamma]."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def make(data_dir):
    n, steps = 200, 20
    i = np.arange(n, dtype=np.float64)
    t = 0.5 * i + 0.3 * np.sin(i)
    e, m = 0.3, 2.0 * np.pi * t / 17.3 + 0.4
    big_e = m.copy()
    for _ in range(steps):
        big_e -= (big_e - e * np.sin(big_e) - m) / (1.0 - e * np.cos(big_e))
    d = 1.0 - e * np.cos(big_e)
    cos_nu, sin_nu = (np.cos(big_e) - e) / d, np.sqrt(1.0 - e * e) * np.sin(big_e) / d
    y = jnp.asarray(5.0 * (cos_nu * np.cos(1.0) - sin_nu * np.sin(1.0) + e * np.cos(1.0)) + 0.5 + 0.5 * np.sin(3.7 * i))
    t = jnp.asarray(t)

    def log_density(theta):
        period, amp, e = jnp.exp(theta[0]), jnp.exp(theta[1]), jax.nn.sigmoid(theta[2])
        omega, gamma = theta[3], theta[5]
        m = 2.0 * jnp.pi * t / period + theta[4]
        big_e = lax.fori_loop(0, steps, lambda _, ea: ea - (ea - e * jnp.sin(ea) - m) / (1.0 - e * jnp.cos(ea)), m)
        d = 1.0 - e * jnp.cos(big_e)
        cos_nu, sin_nu = (jnp.cos(big_e) - e) / d, jnp.sqrt(1.0 - e**2) * jnp.sin(big_e) / d
        v = amp * (cos_nu * jnp.cos(omega) - sin_nu * jnp.sin(omega) + e * jnp.cos(omega)) + gamma
        return -0.5 * jnp.sum((y - v) ** 2)

    return [float(np.log(17.3)), float(np.log(5.0)), float(np.log(0.3 / 0.7)), 1.0, 0.4, 0.5], log_density
