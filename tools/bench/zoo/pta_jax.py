"""JAX twin of tools/bench/zoo/pta_chunks.cpp: the pulsar-timing white-noise + ECORR likelihood in the
same two forms (segment_sum; products by the shared 7758 x 360 indicator), jit(vmap(value_and_grad)),
the same parameter vectors; median ms per call of `reps` steady calls per B, and the compile time.

    python3 tools/bench/zoo/pta_jax.py [--data ../shared/data/pta_B1855+09] [--batches 1,8,64,1024] [--reps 5]

Run it with the same thread count as the C++ bench (taskset -c 0 and
XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" for one thread).
"""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/pta_B1855+09")
    ap.add_argument("--batches", default="1,8,64,1024")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    d = a.data
    y = np.load(f"{d}/residuals.npy")
    sigma = np.load(f"{d}/toaerrs.npy")
    backend = np.load(f"{d}/backend.npy").astype(np.int64)
    epoch = np.load(f"{d}/epoch.npy").astype(np.int64)
    epoch_backend = np.load(f"{d}/epoch_backend.npy").astype(np.int64)
    theta0 = np.load(f"{d}/theta_noisedict.npy")
    n, epochs = y.shape[0], epoch_backend.shape[0]
    U = np.zeros((n, epochs))
    U[np.arange(n), epoch] = 1.0
    y2, s2 = y**2, sigma**2
    U = jnp.asarray(U)

    def white(theta):
        efac, equad = theta[0:4], theta[4:8]
        return efac[backend] ** 2 * (s2 + 10.0 ** (2.0 * equad[backend]))

    def finish(theta, N, av, dv):
        phi = 10.0 ** (2.0 * theta[8:12][epoch_backend])
        quad = jnp.sum(y2 / N) - jnp.sum(av**2 / (1.0 / phi + dv))
        logdet = jnp.sum(jnp.log(N)) + jnp.sum(jnp.log(1.0 + phi * dv))
        return -0.5 * (quad + logdet)

    def segment_form(theta):
        N = white(theta)
        return finish(theta, N, jax.ops.segment_sum(y / N, epoch, epochs), jax.ops.segment_sum(1.0 / N, epoch, epochs))

    def shared_form(theta):
        N = white(theta)
        return finish(theta, N, (y / N) @ U, (1.0 / N) @ U)

    print(f"pta white+ECORR (JAX {jax.__version__}), {n} TOAs, {epochs} epochs; ms per call (median of {a.reps})")
    print(f"{'form':>8} {'B':>6} {'jax':>10} {'compile':>10}")
    for name, f in (("segment", segment_form), ("shared", shared_form)):
        step = jax.jit(jax.vmap(jax.value_and_grad(f)))
        for b in [int(x) for x in a.batches.split(",")]:
            th = np.array([[theta0[k] + 0.01 * ((i * 7 + k) % 5) for k in range(12)] for i in range(b)])
            th = jnp.asarray(th)
            t = time.perf_counter()
            jax.block_until_ready(step(th))
            compile_ms = (time.perf_counter() - t) * 1e3
            times = []
            for _ in range(a.reps):
                t = time.perf_counter()
                jax.block_until_ready(step(th))
                times.append((time.perf_counter() - t) * 1e3)
            print(f"{name:>8} {b:>6} {sorted(times)[len(times) // 2]:>10.3f} {compile_ms:>10.1f}")


if __name__ == "__main__":
    main()
