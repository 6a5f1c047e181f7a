#!/usr/bin/env python3
"""eigh's accuracy against LAPACK's: vtape's CPU kernel ("new"), the Eigen solver it replaced ("old"),
numpy.linalg.eigh (LAPACK syevd; numpy computes float32 in double) and scipy.linalg.eigh with
driver="evd" (ssyevd in float32 itself, as JAX's CPU eigh) and driver="ev" (syev: LAPACK's QR
iteration, the method vtape uses).

    python3 tools/bench/eigh_accuracy.py [--bench build/tools/bench_eigh] [--sizes 10,100,300,512] [--seeds 3]

For each dtype, kind of matrix and order n, the median over the seeds of, in units of eps (the
dtype's machine epsilon), all computed in float64:
  res    ||A V - V diag(w)||_F / ||A||_2
  orth   ||V^T V - I||_F
  werr   max |w - w_ref| / ||A||_2, w_ref the float64 eigenvalues of the same (rounded) matrix
Kinds: random (X + X^T) / 2, lowrank B B^T with B n x n/2 (half the eigenvalues 0), cluster (half
the eigenvalues within 1e-9 of 1, the rest normal).
"""
import argparse
import pathlib
import subprocess
import tempfile

import numpy as np
import scipy.linalg

ROOT = pathlib.Path(__file__).resolve().parents[2]


def matrix(kind, n, seed):
    rng = np.random.default_rng([seed, n])
    if kind == "random":
        x = rng.standard_normal((n, n))
        return (x + x.T) / 2
    if kind == "lowrank":
        b = rng.standard_normal((n, max(1, n // 2)))
        return b @ b.T
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    w = np.concatenate([1 + 1e-9 * rng.standard_normal(n // 2), rng.standard_normal(n - n // 2)])
    a = (q * w) @ q.T
    return (a + a.T) / 2


def measures(a, w, v):
    a, w, v = (np.asarray(x, dtype=np.float64) for x in (a, w, v))
    norm = np.linalg.norm(a, 2)
    ref = np.linalg.eigvalsh(a)
    res = np.linalg.norm(a @ v - v * w) / norm
    orth = np.linalg.norm(v.T @ v - np.eye(len(w)))
    werr = np.max(np.abs(np.sort(w) - ref)) / norm
    return np.array([res, orth, werr])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default=str(ROOT / "build" / "tools" / "bench_eigh"))
    parser.add_argument("--sizes", default="10,100,300,512")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = ["random", "lowrank", "cluster"]
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        for dtype in (np.float64, np.float32):
            for kind in kinds:
                for n in sizes:
                    for seed in range(args.seeds):
                        np.save(d / f"{dtype.__name__}_{kind}_{n}_{seed}.a.npy", matrix(kind, n, seed).astype(dtype))
        subprocess.run([args.bench, "--solve", str(d)], check=True)
        solvers = ["new", "old", "numpy", "evd", "ev"]
        print(f"units of eps: res ||AV - VW||_F / ||A||_2 | orth ||V^T V - I||_F | werr max|w - w_ref| / ||A||_2"
              f" (medians of {args.seeds} seeds)")
        print(f"{'':8} {'':8} {'n':>4}  " + "  ".join(f"{s:>20}" for s in solvers))
        for dtype in (np.float64, np.float32):
            eps = np.finfo(dtype).eps
            for kind in kinds:
                for n in sizes:
                    rows = {s: [] for s in solvers}
                    for seed in range(args.seeds):
                        stem = d / f"{dtype.__name__}_{kind}_{n}_{seed}"
                        a = np.load(f"{stem}.a.npy")
                        for s in ("new", "old"):
                            rows[s].append(measures(a, np.load(f"{stem}.{s}_w.npy"), np.load(f"{stem}.{s}_v.npy")))
                        rows["numpy"].append(measures(a, *np.linalg.eigh(a)))
                        for driver in ("evd", "ev"):
                            w, v = scipy.linalg.eigh(a, driver=driver)
                            assert w.dtype == dtype
                            rows[driver].append(measures(a, w, v))
                    cells = []
                    for s in solvers:
                        res, orth, werr = np.median(np.array(rows[s]), axis=0) / eps
                        cells.append(f"{res:6.1f} {orth:6.1f} {werr:6.1f}")
                    print(f"{dtype.__name__:8} {kind:8} {n:4d}  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
