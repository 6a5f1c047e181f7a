"""The program of JAX issue 21313 from Python, in vtape or in JAX: the same lines, only the imports differ.

    jit(value_and_grad(lambda P: vmap(func)(P).mean())),
    func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones)), F the nobs x 2 ngp Fourier design matrix.

For each batch size: compile_ms, the first call (trace and plan, or JAX's compile, and one run), then run_ms, the
median of `reps` calls. Prints one JSON object.

    PYTHONPATH=build/python python3 examples/python/seed_cholesky_grad.py --nbatch 16,256
    python3 examples/python/seed_cholesky_grad.py --framework jax          (pip install jax)

Both trace once per batch size here, as JAX does, since P is a plain [B, 2 ngp] array. vtape's way of never tracing
again is to pass vt.as_batch(P) and reduce with vt.batch_mean (docs/guide.md, "Python"); --as-batch does that.
"""
import argparse
import json
import time

import numpy as np


def imports(framework):
    """numpy's namespace, cho_factor, cho_solve and the transforms, from the framework asked for."""
    if framework == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from jax.scipy.linalg import cho_factor, cho_solve

        return jnp, cho_factor, cho_solve, jax.value_and_grad, jax.vmap, jax.jit, jax.block_until_ready
    import vtape as vt

    return vt, vt.cho_factor, vt.cho_solve, vt.value_and_grad, vt.vmap, vt.jit, np.asarray


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", choices=["vtape", "jax"], default="vtape")
    ap.add_argument("--nbatch", default="16,32,64,128,256,512,1024,2048")
    ap.add_argument("--nobs", type=int, default=256)
    ap.add_argument("--ngp", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--as-batch", action="store_true", help="vtape: P as a batch, one trace for every batch size")
    args = ap.parse_args()
    xnp, cho_factor, cho_solve, value_and_grad, vmap, jit, ready = imports(args.framework)

    nobs, ngp = args.nobs, args.ngp
    t = np.linspace(0, 1, nobs)
    f = np.arange(1, ngp + 1, dtype=np.float64)
    fmat = np.zeros((nobs, 2 * ngp), dtype=np.float64)
    fmat[:, ::2] = np.sin(2.0 * np.pi * f * t[:, np.newaxis])
    fmat[:, 1::2] = np.cos(2.0 * np.pi * f * t[:, np.newaxis])
    one, ones = xnp.eye(nobs), xnp.ones(nobs)

    def func(pars):
        ftf = (fmat * pars**2) @ fmat.T + one  # F diag(p^2) F^T + I
        cf = cho_factor(ftf)
        b = cho_solve(cf, ones)
        return b.mean()

    if args.as_batch:
        import vtape as vt

        jvg = value_and_grad(lambda pars: vt.batch_mean(vmap(func)(pars)))
        prepare = vt.as_batch
    else:
        jvg = value_and_grad(lambda pars: vmap(func)(pars).mean())
        prepare = lambda pars: pars  # noqa: E731
    step = jit(jvg)
    runs = []
    for b in [int(x) for x in args.nbatch.split(",")]:
        pars = prepare(np.random.default_rng(b).standard_normal((b, 2 * ngp)))
        t0 = time.perf_counter()
        ready(step(pars)[1])
        compile_ms = (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            value, grad = step(pars)
            ready(grad)
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        runs.append({"nbatch": b, "compile_ms": compile_ms, "run_ms": times[len(times) // 2], "value": float(value)})
    out = {"framework": args.framework, "as_batch": args.as_batch, "runs": runs}
    if args.framework == "vtape":
        out["traces"] = step.counters()["traces"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
