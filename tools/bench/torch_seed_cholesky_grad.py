#!/usr/bin/env python3
"""The JAX-issue program (seed_cholesky_grad) in PyTorch, for a side-by-side run time.

value_and_grad of mean over the batch of mean(cholesky_solve(ones, cholesky(F diag(p^2) F^T + I))),
with torch.linalg.cholesky and torch.cholesky_solve on the batched tensor and autograd.

    /usr/bin/python3 tools/bench/torch_seed_cholesky_grad.py --nbatch 256 --threads 2 --reps 5
    python3 tools/bench/torch_seed_cholesky_grad.py --device cuda --nbatch 16,256,2048   # on a GPU

Prints one JSON object: {"torch": version, "threads": ..., "device": ..., "runs": [{"nbatch", "run_ms", "value", "peak_rss_mib"}]};
peak_rss_mib is this process's peak so far.
"""
import argparse
import json
import math
import resource
import time

import torch


def fourier(nobs, ngp):
    t = torch.linspace(0, 1, nobs, dtype=torch.float64)[:, None]
    f = torch.arange(1, ngp + 1, dtype=torch.float64)
    F = torch.zeros(nobs, 2 * ngp, dtype=torch.float64)
    F[:, ::2] = torch.sin(2 * math.pi * f * t)
    F[:, 1::2] = torch.cos(2 * math.pi * f * t)
    return F


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nbatch", default="256")
    ap.add_argument("--nobs", type=int, default=256)
    ap.add_argument("--ngp", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu or cuda; run times include waiting for the GPU")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    F = fourier(args.nobs, args.ngp).to(dev)
    eye = torch.eye(args.nobs, dtype=torch.float64, device=dev)
    ones = torch.ones(args.nobs, 1, dtype=torch.float64, device=dev)

    def value_and_grad(P):
        P = P.detach().requires_grad_(True)
        A = (F * P[:, None, :] ** 2) @ F.T + eye
        L = torch.linalg.cholesky(A)
        x = torch.cholesky_solve(ones.expand(P.shape[0], -1, -1), L)
        loss = x.mean(dim=(1, 2)).mean()
        (g,) = torch.autograd.grad(loss, P)
        return loss.item(), g

    runs = []
    for b in [int(x) for x in args.nbatch.split(",")]:
        P = torch.randn(b, 2 * args.ngp, dtype=torch.float64, generator=torch.Generator().manual_seed(b)).to(dev)
        value_and_grad(P)  # warm-up
        times, cpu = [], []
        for _ in range(args.reps):
            c0 = time.process_time()  # every thread of this process
            t0 = time.perf_counter()
            value, _ = value_and_grad(P)
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        times.sort()
        cpu.sort()
        runs.append({"nbatch": b, "run_ms": times[len(times) // 2],
                     "run_cpu_ms": cpu[len(cpu) // 2], "value": value,
                     "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    print(json.dumps({"torch": torch.__version__, "threads": args.threads, "device": args.device, "runs": runs}))


if __name__ == "__main__":
    main()
