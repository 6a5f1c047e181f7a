#!/usr/bin/env python3
"""Strong and weak scaling of the seed (examples/seed_cholesky_grad) over MPI ranks on this machine.

  tools/bench/mpi_scaling.py [--build build] [--nbatch 2048] [--launches 3] [--reps 5]
                             [--json docs/mpi_scaling.json] [--png docs/mpi_scaling.png]

Strong scaling: the global batch B fixed (2048), one process with 1 and 2 OpenMP threads against
mpirun -np 2 with one thread a rank. Weak scaling: B / ranks fixed (1024 a rank), 1 and 2 ranks of
one thread. Each configuration is launched --launches times; a launch reports the median of --reps
calls (run_ms); the table gives the median over launches. Bytes sent per call and rank come from
the example's counter (vt::mpi::counters) at two batch sizes, to show they do not depend on B.
Needs vtape built with VTAPE_MPI (the example then shards under mpirun); matplotlib only for --png.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--nbatch", type=int, default=2048)
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--png", default="")
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    a = ap.parse_args()
    example = os.path.join(a.build, "examples", "seed_cholesky_grad")
    mpirun = [a.mpirun, "--oversubscribe", "--bind-to", "core"]
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")

    def seed(ranks, threads, nbatch):
        args = [example, "--nbatch", str(nbatch), "--reps", str(a.reps), "--json"]
        cmd = args if ranks == 1 else mpirun + ["-np", str(ranks)] + args
        runs = [run(cmd, threads) for _ in range(a.launches)]
        return {
            "ranks": ranks,
            "threads_per_rank": threads,
            "nbatch": nbatch,
            "run_ms": statistics.median(r["runs"][0]["run_ms"] for r in runs),
            "run_ms_launches": [r["runs"][0]["run_ms"] for r in runs],
            "value": runs[0]["runs"][0]["value"],
            "bytes_per_call": runs[0].get("bytes_per_call", 0),
        }

    b = a.nbatch
    strong = [seed(1, 1, b), seed(1, 2, b), seed(2, 1, b)]
    weak = [seed(1, 1, b // 2), seed(2, 1, b)]
    traffic = {str(n): run(mpirun + ["-np", "2", example, "--nbatch", str(n), "--reps", "1", "--json"], 1)["bytes_per_call"]
               for n in (16, b)}
    result = {
        "command": " ".join(sys.argv),
        "nproc": os.cpu_count(),
        "strong": strong,
        "weak": weak,
        "bytes_per_call_and_rank": traffic,
        "ratio_2ranks_vs_1proc_2threads": strong[2]["run_ms"] / strong[1]["run_ms"],
        "weak_efficiency_2ranks": weak[0]["run_ms"] / weak[1]["run_ms"],
    }
    print(f"seed, B = {b}: median run_ms over {a.launches} launches (each the median of {a.reps} calls)")
    for r in strong:
        print(f"  strong: {r['ranks']} rank(s) x {r['threads_per_rank']} thread(s), B = {r['nbatch']}: "
              f"{r['run_ms']:.1f} ms, value {r['value']:.15f}")
    for r in weak:
        print(f"  weak:   {r['ranks']} rank(s) x 1 thread, B = {r['nbatch']} ({r['nbatch'] // r['ranks']} a rank): "
              f"{r['run_ms']:.1f} ms")
    print(f"  2 ranks / (1 process, 2 threads): {result['ratio_2ranks_vs_1proc_2threads']:.3f}; "
          f"weak-scaling efficiency at 2 ranks: {result['weak_efficiency_2ranks']:.3f}")
    print(f"  bytes sent per call and rank: {traffic}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
        labels = ["1 proc\n1 thread", "1 proc\n2 threads", "2 ranks\n1 thread each"]
        ax1.bar(labels, [r["run_ms"] for r in strong], color=["#999", "#4a7", "#47a"])
        ax1.set_ylabel("ms per call (value and gradient)")
        ax1.set_title(f"strong scaling, B = {b}")
        ax2.plot([1, 2], [r["run_ms"] for r in weak], "o-", color="#47a")
        ax2.set_xticks([1, 2])
        ax2.set_xlabel("ranks (1 thread each)")
        ax2.set_ylim(0, max(r["run_ms"] for r in weak) * 1.3)
        ax2.set_title(f"weak scaling, B = {b // 2} per rank")
        fig.suptitle(f"seed (nobs 256, ngp 64) under mpirun on a {os.cpu_count()}-core machine; "
                     f"{traffic[str(b)]} bytes a call and rank at every B", fontsize=9)
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
