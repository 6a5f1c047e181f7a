#!/usr/bin/env python3
"""vtape from Python against its C++ example, JAX and scikit-learn, side by side in one run, as ratios.

Each round runs, one after another, each in its own process:
  seed (B, default 256): build/examples/seed_cholesky_grad --nbatch B; examples/python/seed_cholesky_grad.py with
      --as-batch (one trace for every batch size) and in JAX's form (a plain [B, p] array); the same script with
      --framework jax (needs pip jax). run_ms: the median of --reps calls of each.
  co2: examples/python/gp_co2_fit.py (scipy's L-BFGS-B on vtape's jitted value and gradient) against
      tools/bench/sklearn_co2.py --starts 1 (scikit-learn's default fit): the fits' wall times.
Ratios are taken within a round; the medians over rounds are printed last. Threads are what the environment gives
(vtape's Python processes get OPENBLAS_NUM_THREADS=1 unless it is set: see VTAPE_ENV); for one core:
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 XLA_FLAGS=... taskset -c 0 (see docs/performance.md).

    PYTHONPATH=build/python python3 tools/bench/compare_python.py --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip().splitlines()[-1]
    return json.loads(out)


# vtape's Python processes run numpy with one OpenBLAS thread unless told otherwise: OpenBLAS's threads spin after
# each numpy call and take the cores vtape's OpenMP threads need (docs/guide.md, "Python"). scikit-learn and JAX keep
# the environment's settings, their BLAS being where they compute.
VTAPE_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nbatch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build", default=os.environ.get("VTAPE_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--skip-jax", action="store_true")
    args = ap.parse_args()
    py, seed_py = sys.executable, os.path.join(ROOT, "examples", "python", "seed_cholesky_grad.py")
    common = ["--nbatch", str(args.nbatch), "--reps", str(args.reps)]
    ratios = {"python/C++": [], "python (JAX's form)/C++": [], "JAX/python": [], "co2 python/scikit-learn": []}
    for r in range(args.rounds):
        cpp = run_json([os.path.join(args.build, "examples", "seed_cholesky_grad"), *common, "--json"])["runs"][0]
        batch = run_json([py, seed_py, *common, "--as-batch"], VTAPE_ENV)["runs"][0]
        plain = run_json([py, seed_py, *common], VTAPE_ENV)["runs"][0]
        line = (f"round {r}: seed B={args.nbatch} run_ms: C++ {cpp['run_ms']:.1f}, python {batch['run_ms']:.1f}, "
                f"python in JAX's form {plain['run_ms']:.1f}")
        ratios["python/C++"].append(batch["run_ms"] / cpp["run_ms"])
        ratios["python (JAX's form)/C++"].append(plain["run_ms"] / cpp["run_ms"])
        if not args.skip_jax:
            jax = run_json([py, seed_py, *common, "--framework", "jax"])["runs"][0]
            line += f", JAX {jax['run_ms']:.1f}"
            ratios["JAX/python"].append(jax["run_ms"] / plain["run_ms"])
        fit = run_json([py, os.path.join(ROOT, "examples", "python", "gp_co2_fit.py")], VTAPE_ENV)
        sk = run_json([py, os.path.join(ROOT, "tools", "bench", "sklearn_co2.py"), "--starts", "1"])
        ratios["co2 python/scikit-learn"].append(fit["fit_seconds"] / sk["fit_seconds"])
        line += (f"; co2 fit s: python {fit['fit_seconds']:.3f} ({fit['evaluations']} evaluations, lml "
                 f"{fit['lml']:.4f}), scikit-learn {sk['fit_seconds']:.3f} ({sk['evaluations']}, {sk['lml']:.4f})")
        print(line, flush=True)
    for name, values in ratios.items():
        if values:
            print(f"{name}: {', '.join(f'{v:.3f}' for v in values)} (median {statistics.median(values):.3f})")


if __name__ == "__main__":
    main()
