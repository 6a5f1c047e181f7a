#!/usr/bin/env python3
"""Reads what tools/gpu-check.sh left in OUT_DIR and writes OUT_DIR/report.json: whether the seed's
values on the GPU equal the CPU's (1e-10 relative, the check's pass mark), vtape's run time as a
ratio of JAX's and PyTorch's on the same GPU in the same run, the FP64 rate on the seed's flops, and
the CO2 fit's time per round on the GPU and on the CPU. Prints the report; exits 1 when the seed's
GPU and CPU values disagree (or either run is missing).

    python3 tools/gpu_report.py OUT_DIR
"""
import json
import os
import sys

# H200 SXM: FP64 on tensor cores (DGEMM) and on the vector units, in TFLOP/s (NVIDIA's datasheet).
H200_FP64_TENSOR_TFLOPS = 67.0
H200_FP64_VECTOR_TFLOPS = 34.0


def load(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def seed_flops(nobs, ngp):
    """Flops of one example's value and gradient, counting the O(n^3) and O(n^2 m) steps: A = F diag(p^2) F^T
    (2 n^2 m, m = 2 ngp), the factorization (n^3 / 3), the adjoint's L^T Lbar (2 n^3) and two triangular solves
    with n right-hand sides (2 n^3), and the contraction of Abar with F for the gradient (2 n^2 m)."""
    n, m = nobs, 2 * ngp
    return 2 * n * n * m + n ** 3 / 3 + 2 * n ** 3 + 2 * n ** 3 + 2 * n * n * m


def main():
    out = sys.argv[1]
    report = {}
    cuda, cpu = load(out, "seed_cuda.json"), load(out, "seed_cpu.json")
    agree = False
    if cuda and cpu:
        by_b = {r["nbatch"]: r for r in cpu["runs"]}
        worst = max(abs(r["value"] - by_b[r["nbatch"]]["value"]) / abs(by_b[r["nbatch"]]["value"])
                    for r in cuda["runs"] if r["nbatch"] in by_b)
        agree = worst <= 1e-10
        report["seed_gpu_vs_cpu_max_relative_difference"] = worst
        flops = seed_flops(cuda["nobs"], cuda["ngp"])
        report["seed"] = []
        peers = {name: load(out, f"{name}_gpu.json") for name in ("jax", "torch")}
        for r in cuda["runs"]:
            b = r["nbatch"]
            row = {"nbatch": b, "vtape_gpu_ms": r["run_ms"], "vtape_compile_ms": r["compile_ms"],
                   "vtape_cpu_ms": by_b.get(b, {}).get("run_ms"),
                   "peak_device_mib": r["peak_device_mib"],
                   "fp64_tflops": flops * b / (r["run_ms"] * 1e-3) / 1e12}
            row["fraction_of_fp64_tensor_peak"] = row["fp64_tflops"] / H200_FP64_TENSOR_TFLOPS
            for name, peer in peers.items():
                match = [p for p in (peer or {}).get("runs", []) if p["nbatch"] == b]
                if match:
                    row[f"{name}_gpu_ms"] = match[0]["run_ms"]
                    row[f"vtape_over_{name}"] = r["run_ms"] / match[0]["run_ms"]
                    if "compile_ms" in match[0]:
                        row[f"{name}_compile_ms"] = match[0]["compile_ms"]
            report["seed"].append(row)
        report["peer_versions"] = {name: (peer or {}).get(name) for name, peer in peers.items()}
    fits = {}
    for name in ("gp_co2_cuda.json", "gp_co2_cpu.json", "gp_co2_cuda_batched.json"):
        fit = load(out, name)
        if fit and fit.get("rounds"):
            fits[name[:-5]] = {"fit_seconds": fit["fit_seconds"], "rounds": fit["rounds"],
                               "evaluations": fit["evaluations"], "lml": fit["lml"],
                               "ms_per_round": fit["fit_seconds"] / fit["rounds"] * 1e3}
    report["gp_co2_fits"] = fits
    if cuda:
        report["seed_shared_cache"] = cuda.get("shared_cache")
    nographs = load(out, "seed_cuda_nographs.json")
    if nographs:
        report["seed_without_graphs_ms"] = {r["nbatch"]: r["run_ms"] for r in nographs["runs"]}
    single = load(out, "seed_cuda_single.json")
    if single:
        report["seed_potrf_one_by_one_ms"] = {r["nbatch"]: r["run_ms"] for r in single["runs"]}
    report["seed_values_agree"] = agree
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
