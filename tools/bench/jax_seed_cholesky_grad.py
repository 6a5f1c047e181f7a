#!/usr/bin/env python3
"""The JAX-issue program (jax-ml/jax#21313) in JAX, on the CPU (or a GPU where JAX has one).

jit(value_and_grad(lambda P: vmap(func)(P).mean())), func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones)),
exactly as in the issue. For each batch size: compile_ms = jit(...).lower(P).compile() time, run_ms = median of
`reps` calls after a warm-up. Prints one JSON object; peak_rss_mib is this process's peak so far.

    python3 tools/bench/jax_seed_cholesky_grad.py --nbatch 16,256 --reps 5
"""
import argparse
import json
import resource
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nbatch", default="16,32,64,128,256,512,1024,2048")
    ap.add_argument("--nobs", type=int, default=256)
    ap.add_argument("--ngp", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    nobs, ngp = args.nobs, args.ngp
    t = np.linspace(0, 1, nobs)
    f = np.arange(1, ngp + 1, dtype=np.float64)
    fmat = np.zeros((nobs, 2 * ngp), dtype=np.float64)
    fmat[:, ::2] = np.sin(2.0 * np.pi * f * t[:, np.newaxis])
    fmat[:, 1::2] = np.cos(2.0 * np.pi * f * t[:, np.newaxis])
    one, ones = jnp.identity(nobs, dtype=np.float64), jnp.ones(nobs, dtype=np.float64)

    def func(pars):
        ftf = fmat @ jnp.diag(pars**2) @ fmat.T + one
        cf = jax.scipy.linalg.cho_factor(ftf)
        b = jax.scipy.linalg.cho_solve(cf, ones)
        return b.mean()

    jvg = jax.value_and_grad(lambda pars: jax.vmap(func)(pars).mean())
    runs = []
    for b in [int(x) for x in args.nbatch.split(",")]:
        pars = jax.random.normal(jax.random.PRNGKey(0), (b, 2 * ngp), dtype=jnp.float64)
        t0 = time.perf_counter()
        compiled = jax.jit(jvg).lower(pars).compile()
        compile_ms = (time.perf_counter() - t0) * 1e3
        jax.block_until_ready(compiled(pars))  # warm-up
        times, cpu = [], []
        for _ in range(args.reps):
            c0 = time.process_time()  # every thread of this process
            t0 = time.perf_counter()
            value, grad = compiled(pars)
            jax.block_until_ready(grad)
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        times.sort()
        cpu.sort()
        runs.append({"nbatch": b, "compile_ms": compile_ms, "run_ms": times[len(times) // 2],
                     "run_cpu_ms": cpu[len(cpu) // 2], "value": float(value),
                     "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    print(json.dumps({"jax": jax.__version__, "device": str(jax.devices()[0].platform), "runs": runs}))


if __name__ == "__main__":
    main()
