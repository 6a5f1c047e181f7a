#!/usr/bin/env python3
"""Side-by-side benchmark of the JAX-issue program: vtape vs its hand-written limit vs JAX (jit) vs PyTorch, one run.

Builds vtape's examples/seed_cholesky_grad and tools/bench_limit, then, at each thread count (--threads, default
1,2) and each batch size, runs every implementation in its own process, pinned to the first T cores with taskset
(OMP_NUM_THREADS=T for vtape and the limit, torch.set_num_threads(T) for PyTorch; for JAX the pinning is what limits
its threads: with XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" and no pinning, JAX
0.10.2 still spent 2.1 s of CPU a call at B = 64 against 0.55 s pinned to one core). Measured per call: wall time
(median after a warm-up) and CPU time of the whole process (every thread; CLOCK_PROCESS_CPUTIME_ID); per process:
peak RSS; for vtape and JAX, compile time (vtape: trace + plan; JAX: jit(...).lower(...).compile()).

The limit (tools/bench/bench_limit.cpp) is the same mathematics written by hand in Eigen, fused per example; it
runs vtape's jitted value_and_grad in the same process, so the ratio vtape / limit is taken at one moment. The CO2
row is one log-marginal-likelihood-and-gradient evaluation of examples/gp_co2's kernel (n = 521), vtape vs its
limit. JAX and PyTorch stop at the first batch size whose calls take (or, from the last size, would take) longer
than --max-call-seconds, and use at most 3 timed calls each. Writes OUT/benchmarks.json, OUT/benchmarks.md and
three PNG plots (compile, run and CPU time); progress on stderr.

    python3 tools/bench/run_benchmarks.py                                 # regenerates docs/benchmarks.*
    python3 tools/bench/run_benchmarks.py --nbatch 16,256 --reps 3 --out /tmp/bench   # quick (or --quick)

Needs: pip jax (CPU) and matplotlib for the python3 running this; Debian's python3-torch for /usr/bin/python3;
taskset (util-linux) for the pinning.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(ROOT, "tools", "bench")
PEERS = ("jax", "torch")
NAMES = {"vtape": "vtape", "limit": "limit", "jax": "JAX", "torch": "PyTorch"}


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


def pin(cmd, threads):
    """cmd limited to the first `threads` cores, where taskset exists and the machine has that many."""
    if shutil.which("taskset") and threads <= (os.cpu_count() or 1):
        return ["taskset", "-c", f"0-{threads - 1}"] + cmd
    return cmd


def measure_threads(t, sizes, args, example, limit, results):
    env = dict(os.environ, OMP_NUM_THREADS=str(t))
    res = {"vtape": [], "limit": [], "jax": [], "torch": [], "stopped": {}}
    peers = {
        "jax": [sys.executable, os.path.join(BENCH, "jax_seed_cholesky_grad.py")],
        "torch": ["/usr/bin/python3", os.path.join(BENCH, "torch_seed_cholesky_grad.py"), "--threads", str(t)],
    }
    for b in sizes:
        log(f"T={t} B={b}: vtape (compile time, peak memory)")
        res["vtape"].append(run_json(pin([example, "--nbatch", str(b), "--reps", "1", "--json"], t), env)["runs"][0])
        log(f"T={t} B={b}: limit, and vtape in the same process")
        res["limit"].append(run_json(pin([limit, "--program", "seed", "--nbatch", str(b), "--reps", str(args.reps),
                                          "--json"], t), env)["runs"][0])
        for name, cmd in peers.items():
            if name in res["stopped"]:
                continue
            if res[name]:  # its time a call grows linearly in B: skip a size that would only time out
                prev = res[name][-1]
                guess = prev["run_ms"] * b / prev["nbatch"] / 1e3
                if guess > args.max_call_seconds:
                    res["stopped"][name] = (f"was not run from B = {b}: {guess:.0f} s a call expected from B = "
                                            f"{prev['nbatch']}, over the {args.max_call_seconds:.0f} s limit")
                    log(f"{name}: {res['stopped'][name]}")
                    continue
            log(f"T={t} B={b}: {name}")
            try:
                r = run_json(pin(cmd + ["--nbatch", str(b), "--reps", str(min(args.reps, 3))], t), env,
                             timeout=args.peer_timeout)
            except subprocess.TimeoutExpired:
                res["stopped"][name] = f"did not finish B = {b} within {args.peer_timeout:.0f} s (compile and calls) and was stopped"
                log(f"{name}: {res['stopped'][name]}")
                continue
            except (subprocess.CalledProcessError, FileNotFoundError, json.JSONDecodeError) as e:
                log(f"{name} failed: {e}")
                res["stopped"][name] = f"failed at B = {b} ({type(e).__name__})"
                continue
            results["versions"][name] = r[name]
            res[name].append(r["runs"][0])
            if r["runs"][0]["run_ms"] / 1e3 > args.max_call_seconds:
                res["stopped"][name] = (f"stopped after B = {b}: {r['runs'][0]['run_ms'] / 1e3:.1f} s a call, over the "
                                        f"{args.max_call_seconds:.0f} s limit that keeps the run to a sane time")
                log(f"{name}: {res['stopped'][name]}")
    log(f"T={t}: CO2 likelihood and gradient, limit and vtape")
    res["co2"] = run_json(pin([limit, "--program", "co2", "--reps", str(args.reps), "--json"], t), env)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nbatch", default="16,32,64,128,256,512,1024,2048")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="1,2", help="thread counts, each measured in full (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="a quick try: --nbatch 16,256 --reps 3")
    ap.add_argument("--max-call-seconds", type=float, default=20.0,
                    help="stop JAX or PyTorch after the first batch size whose calls take longer than this")
    ap.add_argument("--peer-timeout", type=float, default=300.0,
                    help="give up on a JAX or PyTorch process (compile and all its calls) after this many seconds")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.nbatch, args.reps = "16,256", 3
    sizes = [int(b) for b in args.nbatch.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.out, exist_ok=True)

    build = os.environ.get("VTAPE_BUILD_DIR", os.path.join(ROOT, "build"))
    if not args.skip_build:
        log("building vtape (tools/setup.sh)")
        subprocess.run([os.path.join(ROOT, "tools", "setup.sh"), "--target", "seed_cholesky_grad", "bench_limit"],
                       check=True, stdout=subprocess.DEVNULL)
    example = os.path.join(build, "examples", "seed_cholesky_grad")
    limit = os.path.join(build, "tools", "bench_limit")

    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
               "versions": versions(), "reps": args.reps, "threads": threads, "load_before": os.getloadavg(),
               "pinning": "taskset" if shutil.which("taskset") else "none", "by_threads": {}}
    log("vtape, one process for every batch size (one shared jit cache)")
    shared = run_json([example, "--nbatch", args.nbatch, "--reps", "1", "--json"],
                      dict(os.environ, OMP_NUM_THREADS=str(max(threads))))
    results["vtape_shared_cache"] = shared["shared_cache"]
    for t in threads:
        results["by_threads"][str(t)] = measure_threads(t, sizes, args, example, limit, results)
    results["load_after"] = os.getloadavg()
    # The most threads' rows, at the top level as before.
    top = results["by_threads"][str(max(threads))]
    for key in ("vtape", "jax", "torch", "stopped"):
        results[key] = top[key]
    with open(os.path.join(args.out, "benchmarks.json"), "w") as f:
        json.dump(results, f, indent=1)
    plots(results, args.out)
    report(results, args.out, " ".join(["python3", "tools/bench/run_benchmarks.py"] + sys.argv[1:]))
    log(f"wrote {args.out}/benchmarks.md, benchmarks.json and plots")


def by_b(rows):
    return {r["nbatch"]: r for r in rows}


def series(res, t, name, key):
    """(B, value) of one implementation's `key` at t threads; the limit's vtape figures are vtape_*."""
    rows = res["by_threads"][str(t)][name]
    return [(r["nbatch"], r[key]) for r in rows if key in r]


def plots(res, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tmax, tmin = max(res["threads"]), min(res["threads"])
    plot_sets = [
        ("compile time", "bench_compile.png", [("vtape", "compile_ms", "o"), ("jax", "compile_ms", "s")]),
        ("run time per call", "bench_run.png", [("limit", "wall_ms", "D"), ("limit", "vtape_wall_ms", "o"),
                                                 ("jax", "run_ms", "s"), ("torch", "run_ms", "^")]),
        ("CPU time per call", "bench_cpu.png", [("limit", "cpu_ms", "D"), ("limit", "vtape_cpu_ms", "o"),
                                                 ("jax", "run_cpu_ms", "s"), ("torch", "run_cpu_ms", "^")]),
    ]
    colors = {"vtape": "tab:blue", "limit": "tab:gray", "JAX": "tab:orange", "PyTorch": "tab:green"}
    for title, fname, lines in plot_sets:
        fig, ax = plt.subplots(figsize=(6, 4))
        for t, style in [(tmax, "-"), (tmin, "--")] if tmin != tmax else [(tmax, "-")]:
            for name, key, marker in lines:
                pts = series(res, t, name, key)
                label = "vtape" if key.startswith("vtape_") else NAMES[name]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=marker, color=colors[label],
                            label=f"{label}, {t} thread{'s' if t > 1 else ''}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size B")
        ax.set_ylabel("milliseconds")
        ax.set_title(f"JAX issue 21313 program, value_and_grad: {title} (CPU)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)


def fmt_ms(x):
    return "-" if x is None else (f"{x:.0f}" if x >= 1000 else f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def report(res, out, command):
    m, v = res["machine"], res["versions"]
    tmax = max(res["threads"])
    lines = [
        "# Benchmarks: the JAX issue 21313 program", "",
        "`jit(value_and_grad(mean(vmap(func))))`, `func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones))`,",
        "F the 256 x 128 Fourier matrix, float64, in vtape (`examples/seed_cholesky_grad`), JAX (`jax.jit`, CPU) and",
        "PyTorch (autograd; `torch.linalg.cholesky`, `torch.cholesky_solve`), against the *limit*: the same mathematics",
        "written by hand in Eigen and fused per example (`tools/bench/bench_limit.cpp`: rank-k update, in-place LLT,",
        "two triangular solves, the gradient in closed form; static chunks of examples over the threads). vtape's run",
        "times are taken in the limit's process, right after it, so vtape / limit compares one moment. Each",
        "implementation and batch size runs in its own process, pinned to the first T cores (`taskset`), with",
        "OMP_NUM_THREADS=T (vtape, limit), `torch.set_num_threads(T)`; JAX's threads are limited by the pinning alone.",
        f"Wall times are medians of {res['reps']} calls after a warm-up (JAX and PyTorch: of at most 3); CPU times are the",
        "whole process's (every thread) per call, so CPU > wall means several busy threads, and CPU < wall time spent",
        "waiting: on a machine loaded past its core count (see the load average below), compare CPU times.", "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; {m['os']}. Load average (1, 5, 15 min) "
        f"{'/'.join(f'{x:.1f}' for x in res['load_before'])} before, {'/'.join(f'{x:.1f}' for x in res['load_after'])} after.  ",
        f"Versions: vtape {v['vtape']}, {v['compiler']}, Eigen {v['eigen']}, JAX {v.get('jax', 'n/a')}, "
        f"PyTorch {v.get('torch', 'n/a')}, Python {v['python']}.  ",
        f"Measured {res['date']}. Regenerate everything with `{command}`.", "",
        f"One vtape jitted callable run at every batch size traced {res['vtape_shared_cache']['traces']} time(s) "
        f"({res['vtape_shared_cache']['cache_hits']} cache hits).", ""]

    for t in res["threads"]:
        r = res["by_threads"][str(t)]
        lim, jx, pt = by_b(r["limit"]), by_b(r["jax"]), by_b(r["torch"])
        th = f"{t} thread{'s' if t > 1 else ''}"
        lines += [f"## Run time per call, {th}", "",
                  "| B | limit ms | vtape ms | JAX ms | PyTorch ms | vtape / limit | JAX / limit | PyTorch / limit | JAX / vtape |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for b in sorted(lim):
            L, j, p = lim[b], jx.get(b, {}), pt.get(b, {})
            lw, vw, jw, pw = L["wall_ms"], L.get("vtape_wall_ms"), j.get("run_ms"), p.get("run_ms")
            lines.append(f"| {b} | {fmt_ms(lw)} | {fmt_ms(vw)} | {fmt_ms(jw)} | {fmt_ms(pw)} | {ratio(vw, lw)} | "
                         f"{ratio(jw, lw)} | {ratio(pw, lw)} | {ratio(jw, vw)} |")
        lines += ["", f"CPU time per call, {th} (ms of every thread of the process):", "",
                  "| B | limit | vtape | JAX | PyTorch | vtape / limit | JAX / limit | PyTorch / limit | limit GFLOP/s per core |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for b in sorted(lim):
            L, j, p = lim[b], jx.get(b, {}), pt.get(b, {})
            lc, vc, jc, pc = L["cpu_ms"], L.get("vtape_cpu_ms"), j.get("run_cpu_ms"), p.get("run_cpu_ms")
            lines.append(f"| {b} | {fmt_ms(lc)} | {fmt_ms(vc)} | {fmt_ms(jc)} | {fmt_ms(pc)} | {ratio(vc, lc)} | "
                         f"{ratio(jc, lc)} | {ratio(pc, lc)} | {L.get('gflops_per_core', 0):.1f} |")
        for name, why in r["stopped"].items():
            lines += ["", f"{NAMES[name]} ({th}) {why}."]
        lines.append("")
    lines += ["![run time](bench_run.png)", "", "![CPU time](bench_cpu.png)", "",
              "## The CO2 likelihood: one value and gradient", "",
              "`examples/gp_co2`'s log marginal likelihood and its gradient in the 11 log-hyperparameters at "
              "scikit-learn's initial kernel (n = 521; vtape: `jit(value_and_grad(gp::log_marginal_likelihood))`) "
              "against the limit (K and the 11 derivative contractions in fused passes over the lower triangle, LLT, "
              "K^-1 from the inverse of L; single-threaded).", "",
              "| threads | limit ms | vtape ms | vtape / limit | limit CPU ms | vtape CPU ms | vtape / limit (CPU) |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in res["threads"]:
        c = res["by_threads"][str(t)]["co2"]
        lines.append(f"| {t} | {fmt_ms(c['wall_ms'])} | {fmt_ms(c.get('vtape_wall_ms'))} | "
                     f"{ratio(c.get('vtape_wall_ms'), c['wall_ms'])} | {fmt_ms(c['cpu_ms'])} | "
                     f"{fmt_ms(c.get('vtape_cpu_ms'))} | {ratio(c.get('vtape_cpu_ms'), c['cpu_ms'])} |")

    top = res["by_threads"][str(tmax)]
    vt, jx = by_b(top["vtape"]), by_b(top["jax"])
    lines += ["", f"## Compile time ({tmax} threads)", "", "| B | vtape ms | JAX ms | JAX / vtape |",
              "| ---: | ---: | ---: | ---: |"]
    for b in sorted(vt):
        j = jx.get(b)
        lines.append(f"| {b} | {vt[b]['compile_ms']:.3f} | {j['compile_ms']:.0f} | {j['compile_ms'] / vt[b]['compile_ms']:.0f}x |"
                     if j else f"| {b} | {vt[b]['compile_ms']:.3f} | - | - |")
    lines += ["", "![compile time](bench_compile.png)", ""]
    for t in res["threads"]:
        r = res["by_threads"][str(t)]
        lim, vt, jx, pt = by_b(r["limit"]), by_b(r["vtape"]), by_b(r["jax"]), by_b(r["torch"])
        lines += [f"## Peak resident memory, {t} thread{'s' if t > 1 else ''} (MiB, whole process)", "",
                  "| B | limit | vtape | JAX | PyTorch |", "| ---: | ---: | ---: | ---: | ---: |"]
        for b in sorted(vt):
            cell = lambda rows, key="peak_rss_mib": f"{rows[b][key]:.0f}" if b in rows else "-"  # noqa: E731
            lines.append(f"| {b} | {cell(lim)} | {cell(vt)} | {cell(jx)} | {cell(pt)} |")
        lines.append("")
    lines += ["The limit's figure is its process's peak before vtape runs there (the binary holds both); vtape's is "
              "`seed_cholesky_grad`'s own process.", "",
              "GPU: none was used for this run (see docs/gpu.md for an H200).", ""]
    with open(os.path.join(out, "benchmarks.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
