"""The pulsar-timing white-noise + ECORR likelihood (B1855+09, model "white_ecorr" of the data's README), shared by
pta_segment.py and pta_shared.py: the twins of tools/bench/zoo/models/pta.cpp."""
import jax
import jax.numpy as jnp
import numpy as np


def make(data_dir, shared):
    d = f"{data_dir}/pta_B1855+09"
    y = np.load(f"{d}/residuals.npy")
    sigma = np.load(f"{d}/toaerrs.npy")
    backend = np.load(f"{d}/backend.npy").astype(np.int64)
    epoch = np.load(f"{d}/epoch.npy").astype(np.int64)
    epoch_backend = np.load(f"{d}/epoch_backend.npy").astype(np.int64)
    theta0 = np.load(f"{d}/theta_noisedict.npy")
    n, epochs = y.shape[0], epoch_backend.shape[0]
    y2, s2 = y**2, sigma**2

    # theta: efac[4], log10_t2equad[4], log10_ecorr[4] (param_names.txt's order).
    def white(theta):
        efac, equad = theta[0:4], theta[4:8]
        return efac[backend] ** 2 * (s2 + 10.0 ** (2.0 * equad[backend]))

    def finish(theta, N, av, dv):
        phi = 10.0 ** (2.0 * theta[8:12][epoch_backend])
        quad = jnp.sum(y2 / N) - jnp.sum(av**2 / (1.0 / phi + dv))
        logdet = jnp.sum(jnp.log(N)) + jnp.sum(jnp.log(1.0 + phi * dv))
        return -0.5 * (quad + logdet)

    if shared:
        U = np.zeros((n, epochs))
        U[np.arange(n), epoch] = 1.0
        U = jnp.asarray(U)

        def log_density(theta):
            N = white(theta)
            return finish(theta, N, (y / N) @ U, (1.0 / N) @ U)
    else:

        def log_density(theta):
            N = white(theta)
            return finish(theta, N, jax.ops.segment_sum(y / N, epoch, epochs),
                          jax.ops.segment_sum(1.0 / N, epoch, epochs))

    return [float(t) for t in theta0], log_density
