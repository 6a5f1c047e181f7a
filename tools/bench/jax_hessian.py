"""JAX twin of tools/bench/bench_hessian.cpp: a Hessian-vector product (forward over reverse, as JAX's
documentation writes it) and a whole Hessian (jax.hessian, jacfwd of jacrev), each against one
value_and_grad call of the same function, all jitted, on one theta: the seed and CO2 programs of the
zoo's JAX twins (tools/bench/zoo/jax). Medians of --reps calls after a first; compile_ms is the first
call less a later one.

    python3 tools/bench/jax_hessian.py [--reps 7] [--json]
"""
import argparse
import json
import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "zoo" / "jax"))
import co2  # noqa: E402  (tools/bench/zoo/jax/co2.py)
import seed  # noqa: E402


def timed(f, *args):
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    return (time.perf_counter() - t0) * 1e3


def measure(program, log_density, theta, with_hessian, reps, as_json):
    x = jnp.asarray(theta)
    v = jnp.asarray(jax.random.normal(jax.random.PRNGKey(3), x.shape, dtype=jnp.float64))
    fns = {
        "gradient": (jax.jit(jax.value_and_grad(log_density)), (x,)),
        "hvp": (jax.jit(lambda y, w: jax.jvp(jax.grad(log_density), (y,), (w,))[1]), (x, v)),
    }
    if with_hessian:
        fns["hessian"] = (jax.jit(jax.hessian(log_density)), (x,))
    results = {}
    for name, (f, args) in fns.items():
        first = timed(f, *args)
        times = sorted(timed(f, *args) for _ in range(reps))
        results[name] = (times[len(times) // 2], max(0.0, first - times[len(times) // 2]))
    gradient = results["gradient"][0]
    for name, (ms, compile_ms) in results.items():
        if as_json:
            print(json.dumps({"program": program, "what": name, "ms": ms, "per_gradient": ms / gradient,
                              "compile_ms": compile_ms}))
        else:
            print(f"{program:5} {name:9}: {ms:9.3f} ms  {ms / gradient:6.2f}x the gradient  compile {compile_ms:.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    theta, f = seed.make(None)
    measure("seed", f, theta, False, args.reps, args.json)
    theta, f = co2.make(None)
    measure("co2", lambda t: -f(t), theta, True, args.reps, args.json)


if __name__ == "__main__":
    main()
