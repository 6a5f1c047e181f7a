#!/usr/bin/env python3
"""Side-by-side benchmark of the JAX-issue program: vtape vs JAX (jit) vs PyTorch, one machine, one run.

Builds vtape's examples/seed_cholesky_grad, then for each batch size runs each implementation in its own
process (so peak resident memory is per batch size): compile time (vtape: trace + plan; JAX:
jit(...).lower(...).compile()), median run time of value_and_grad after a warm-up, peak RSS. PyTorch has no
ahead-of-time compile. JAX and PyTorch stop at the first batch size whose calls take longer than
--max-call-seconds (larger batches take longer still), and use at most 3 timed calls each. Writes OUT/benchmarks.json,
OUT/benchmarks.md and two PNG plots, and shows progress on stderr.

    python3 tools/bench/run_benchmarks.py                 # regenerates docs/benchmarks.*
    python3 tools/bench/run_benchmarks.py --nbatch 16,64 --reps 3 --out /tmp/bench

Needs: pip jax (CPU) and matplotlib for the python3 running this; Debian's python3-torch for /usr/bin/python3.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(ROOT, "tools", "bench")


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_json(cmd, env=None, timeout=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=timeout).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            model = m.group(1) if m else model
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(mem, 1), "os": platform.platform()}


def versions():
    def cmd(c):
        try:
            return subprocess.run(c, capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        except (OSError, subprocess.CalledProcessError):
            return "unavailable"
    eigen = "unknown"
    try:
        with open("/usr/include/eigen3/Eigen/src/Core/util/Macros.h") as f:
            v = dict(re.findall(r"#define EIGEN_(WORLD|MAJOR|MINOR)_VERSION (\d+)", f.read()))
            eigen = f"{v['WORLD']}.{v['MAJOR']}.{v['MINOR']}"
    except (OSError, KeyError):
        pass
    return {"vtape": cmd(["git", "-C", ROOT, "describe", "--always", "--dirty"]), "compiler": cmd(["c++", "--version"]),
            "eigen": eigen, "python": platform.python_version()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nbatch", default="16,32,64,128,256,512,1024,2048")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-call-seconds", type=float, default=20.0,
                    help="stop JAX or PyTorch after the first batch size whose calls take longer than this")
    ap.add_argument("--peer-timeout", type=float, default=300.0,
                    help="give up on a JAX or PyTorch process (compile and all its calls) after this many seconds")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    sizes = [int(b) for b in args.nbatch.split(",")]
    os.makedirs(args.out, exist_ok=True)

    build = os.environ.get("VTAPE_BUILD_DIR", os.path.join(ROOT, "build"))
    if not args.skip_build:
        log("building vtape (tools/setup.sh)")
        subprocess.run([os.path.join(ROOT, "tools", "setup.sh"), "--target", "seed_cholesky_grad"], check=True,
                       stdout=subprocess.DEVNULL)
    example = os.path.join(build, "examples", "seed_cholesky_grad")
    env = dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count()))

    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
               "versions": versions(), "reps": args.reps, "vtape": [], "jax": [], "torch": []}
    log("vtape, one process for every batch size (one shared jit cache)")
    shared = run_json([example, "--nbatch", args.nbatch, "--reps", "1", "--json"], env)
    results["vtape_shared_cache"] = shared["shared_cache"]
    peers = {
        "jax": [sys.executable, os.path.join(BENCH, "jax_seed_cholesky_grad.py")],
        "torch": ["/usr/bin/python3", os.path.join(BENCH, "torch_seed_cholesky_grad.py"), "--threads", str(os.cpu_count())],
    }
    stopped = {}
    for b in sizes:
        log(f"B={b}: vtape")
        results["vtape"].append(run_json([example, "--nbatch", str(b), "--reps", str(args.reps), "--json"], env)["runs"][0])
        for name, cmd in peers.items():
            if name in stopped:
                continue
            log(f"B={b}: {name}")
            try:
                r = run_json(cmd + ["--nbatch", str(b), "--reps", str(min(args.reps, 3))], timeout=args.peer_timeout)
            except subprocess.TimeoutExpired:
                stopped[name] = f"did not finish B = {b} within {args.peer_timeout:.0f} s (compile and calls) and was stopped"
                log(f"{name}: {stopped[name]}")
                continue
            except (subprocess.CalledProcessError, FileNotFoundError, json.JSONDecodeError) as e:
                log(f"{name} failed: {e}")
                stopped[name] = f"failed at B = {b} ({type(e).__name__})"
                continue
            results["versions"][name] = r[name]
            results[name].append(r["runs"][0])
            if r["runs"][0]["run_ms"] / 1e3 > args.max_call_seconds:
                stopped[name] = (f"stopped after B = {b}: {r['runs'][0]['run_ms'] / 1e3:.1f} s a call, over the "
                                 f"{args.max_call_seconds:.0f} s limit that keeps the run to a sane time")
                log(f"{name}: {stopped[name]}")
    results["stopped"] = stopped
    with open(os.path.join(args.out, "benchmarks.json"), "w") as f:
        json.dump(results, f, indent=1)
    plots(results, args.out)
    report(results, args.out, " ".join(["python3", "tools/bench/run_benchmarks.py"] + sys.argv[1:]))
    log(f"wrote {args.out}/benchmarks.md, benchmarks.json and plots")


def by_b(rows):
    return {r["nbatch"]: r for r in rows}


def plots(res, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for key, title, fname in [("compile_ms", "compile time", "bench_compile.png"), ("run_ms", "run time per call", "bench_run.png")]:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, marker in [("vtape", "o"), ("jax", "s"), ("torch", "^")]:
            rows = [r for r in res[name] if key in r]
            if rows:
                ax.plot([r["nbatch"] for r in rows], [r[key] for r in rows], marker=marker, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size B")
        ax.set_ylabel("milliseconds")
        ax.set_title(f"JAX issue 21313 program, value_and_grad: {title} (CPU)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)


def report(res, out, command):
    vt, jx, pt = by_b(res["vtape"]), by_b(res["jax"]), by_b(res["torch"])
    m, v = res["machine"], res["versions"]
    lines = [
        "# Benchmarks: the JAX issue 21313 program", "",
        "`jit(value_and_grad(mean(vmap(func))))`, `func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones))`,",
        "F the 256 x 128 Fourier matrix, float64, in vtape (`examples/seed_cholesky_grad`), JAX (`jax.jit`, CPU) and",
        "PyTorch (autograd; `torch.linalg.cholesky`, `torch.cholesky_solve`). Each batch size runs in its own process;",
        f"run times are medians of {res['reps']} calls after a warm-up (PyTorch: of at most 3).", "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; {m['os']}.  ",
        f"Versions: vtape {v['vtape']}, {v['compiler']}, Eigen {v['eigen']}, JAX {v.get('jax', 'n/a')}, "
        f"PyTorch {v.get('torch', 'n/a')}, Python {v['python']}.  ",
        f"Measured {res['date']}. Regenerate everything with `{command}`.", "",
        f"One vtape jitted callable run at every batch size traced {res['vtape_shared_cache']['traces']} time(s) "
        f"({res['vtape_shared_cache']['cache_hits']} cache hits).", "",
        "## Compile time", "", "| B | vtape ms | JAX ms | JAX / vtape |", "| ---: | ---: | ---: | ---: |"]
    for b in sorted(vt):
        j = jx.get(b)
        lines.append(f"| {b} | {vt[b]['compile_ms']:.3f} | {j['compile_ms']:.0f} | {j['compile_ms'] / vt[b]['compile_ms']:.0f}x |"
                     if j else f"| {b} | {vt[b]['compile_ms']:.3f} | - | - |")
    lines += ["", "![compile time](bench_compile.png)", "", "## Run time per call", "",
              "| B | vtape ms | JAX ms | PyTorch ms | JAX / vtape | PyTorch / vtape |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in sorted(vt):
        j, t = jx.get(b), pt.get(b)
        lines.append(f"| {b} | {vt[b]['run_ms']:.1f} | {j['run_ms']:.1f} | " if j else f"| {b} | {vt[b]['run_ms']:.1f} | - | ")
        lines[-1] += (f"{t['run_ms']:.0f} | " if t else "- | ")
        lines[-1] += (f"{j['run_ms'] / vt[b]['run_ms']:.2f} | " if j else "- | ")
        lines[-1] += (f"{t['run_ms'] / vt[b]['run_ms']:.1f} |" if t else "- |")
    for name, why in res.get("stopped", {}).items():
        lines += ["", f"{'JAX' if name == 'jax' else 'PyTorch'} {why}."]
    lines += ["", "![run time](bench_run.png)", "", "## Peak resident memory (MiB, whole process)", "",
              "| B | vtape | JAX | PyTorch |", "| ---: | ---: | ---: | ---: |"]
    for b in sorted(vt):
        j, t = jx.get(b), pt.get(b)
        lines.append(f"| {b} | {vt[b]['peak_rss_mib']:.0f} | {j['peak_rss_mib']:.0f} | " if j else f"| {b} | {vt[b]['peak_rss_mib']:.0f} | - | ")
        lines[-1] += f"{t['peak_rss_mib']:.0f} |" if t else "- |"
    lines += ["", "GPU: no GPU was available for this run; vtape's CUDA backend is not built yet.", ""]
    with open(os.path.join(out, "benchmarks.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
