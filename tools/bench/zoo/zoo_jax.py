"""The zoo's JAX twins, timed as tools/bench/zoo/zoo.cpp times vtape: per model and batch size,
jax.jit(jax.vmap(jax.value_and_grad(log_density))) on the same parameter vectors (example i:
base[k] + 0.01 ((7 i + k) mod 5)); the first call at each batch size (JAX compiles each anew), then the
median of `reps` calls. One JSON object per line, with example 0's value for the cross-check.

    python3 tools/bench/zoo/zoo_jax.py [--models seed,co2,...] [--batches 1,8,64,1024] [--reps 5] [--data ../shared/data]
        [--max-call-ms 20000]
"""
import argparse
import importlib.util
import json
import os
import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
MODELS = ["seed", "co2", "grouped", "pta_segment", "pta_shared", "woodbury", "hierarchical", "logistic",
          "kalman", "mixture", "eight_schools", "kepler"]


def load(name):
    sys.path.insert(0, str(HERE / "jax"))  # the twins may share private modules there
    spec = importlib.util.spec_from_file_location(f"zoo_twin_{name}", HERE / "jax" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def examples(base, b):
    p = len(base)
    return np.array([[base[k] + 0.01 * ((7 * i + k) % 5) for k in range(p)] for i in range(b)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8,64,1024")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--max-call-ms", type=float, default=20000)
    a = ap.parse_args()
    threads = os.environ.get("VTAPE_ZOO_THREADS", "")
    for name in a.models.split(","):
        try:
            base, f = load(name).make(a.data)
        except (OSError, FileNotFoundError) as e:
            print(json.dumps({"model": name, "skipped": str(e)}), flush=True)
            continue
        step = jax.jit(jax.vmap(jax.value_and_grad(f)))
        ms_per_example = 0.0
        for b in [int(x) for x in a.batches.split(",")]:
            if ms_per_example * b > a.max_call_ms:
                print(json.dumps({"model": name, "batch": b, "skipped": "over --max-call-ms"}), flush=True)
                continue
            th = jax.numpy.asarray(examples(base, b))
            t = time.perf_counter()
            value, grad = jax.block_until_ready(step(th))
            first_ms = (time.perf_counter() - t) * 1e3
            times = []
            for _ in range(a.reps):
                t = time.perf_counter()
                jax.block_until_ready(step(th))
                times.append((time.perf_counter() - t) * 1e3)
            times.sort()
            ms_per_example = times[len(times) // 2] / b
            print(json.dumps({"model": name, "threads": threads, "batch": b, "jax_ms": times[len(times) // 2],
                              "first_ms": first_ms, "value0": float(value[0]), "jax": jax.__version__}), flush=True)


if __name__ == "__main__":
    main()
