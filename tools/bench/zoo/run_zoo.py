"""Runs the model zoo side by side and writes docs/zoo.md: per model, batch size and thread count,
vtape (tools/bench/zoo/zoo.cpp, with each model's hand-fused limit in the same process) and the JAX
twins (tools/bench/zoo/zoo_jax.py), in alternating rounds; each ratio is taken within a round and the
median over rounds reported.

    python3 tools/bench/zoo/run_zoo.py [--build-dir build] [--rounds 3] [--threads 1,2]
        [--batches 1,8,64,1024] [--reps 5] [--models seed,...] [--data ../shared/data] [--out docs/zoo.md]
        [--timeout 900] [--raw FILE] [--from-raw FILE,...] [--note TEXT]

Each model runs on its own (vtape, then JAX) with a timeout, so a run that hangs or outlives it loses
that model's cells of one round only. --raw keeps every result line; --from-raw writes the page from
such files without running (to merge runs).

Threads: vtape with OMP_NUM_THREADS=t, JAX with XLA_FLAGS="--xla_cpu_multi_thread_eigen=(t > 1)
intra_op_parallelism_threads=t", both pinned to the first t CPUs (taskset).
"""
import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def run_lines(cmd, env, timeout):
    """The JSON lines a run printed; a run that fails or outlives `timeout` seconds gives what it printed."""
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(f"  timed out after {timeout} s: {' '.join(cmd[3:6])}", file=sys.stderr, flush=True)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def machine():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,8,64,1024")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--models", default="seed,co2,grouped,pta_segment,pta_shared,woodbury,hierarchical,logistic,kalman,mixture,eight_schools,"
                    "kepler")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--max-call-ms", type=float, default=20000)
    ap.add_argument("--out", default=str(ROOT / "docs" / "zoo.md"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds for one model's run in one round")
    ap.add_argument("--raw", default="", help="append every result line to this file (JSON lines)")
    ap.add_argument("--from-raw", default="", help="write the page from such files (comma-separated) instead")
    ap.add_argument("--note", default="", help="a paragraph for the page's header (how the figures were taken)")
    a = ap.parse_args()
    binary = pathlib.Path(a.build_dir) / "tools" / "bench_zoo"
    common = ["--batches", a.batches, "--reps", str(a.reps), "--data", a.data, "--max-call-ms", str(a.max_call_ms)]
    results = []  # every line, tagged with its round and thread count
    if a.from_raw:
        for path in a.from_raw.split(","):
            results += [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
    else:
        raw = open(a.raw, "a") if a.raw else None
        for rnd in range(a.rounds):
            for t in [int(x) for x in a.threads.split(",")]:
                cpus = ",".join(str(c) for c in range(t))
                env = dict(os.environ, OMP_NUM_THREADS=str(t), VTAPE_ZOO_THREADS=str(t),
                           XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if t > 1 else 'false'} "
                                     f"intra_op_parallelism_threads={t}")
                # One model at a time, vtape then JAX: a run that hangs loses one model's cell of one round.
                for model in a.models.split(","):
                    print(f"round {rnd + 1}/{a.rounds}, {t} thread(s), {model}", file=sys.stderr, flush=True)
                    for tool, cmd in (("vtape", ["taskset", "-c", cpus, str(binary), "--json", "--models", model]),
                                      ("jax", ["taskset", "-c", cpus, sys.executable, str(HERE / "zoo_jax.py"),
                                               "--models", model])):
                        for r in run_lines(cmd + common, env, a.timeout):
                            r.update(tool=tool, round=rnd, nthreads=t)
                            results.append(r)
                            if raw:
                                raw.write(json.dumps(r) + "\n")
                                raw.flush()
    # by (model, threads, batch): per round, the vtape row and the JAX row
    rows, about, skipped = {}, {}, {}
    for r in results:
        if "skipped" in r:
            skipped.setdefault(r["model"], r["skipped"])
            continue
        key = (r["model"], r["nthreads"], r["batch"])
        if r["tool"] == "vtape":
            about[r["model"]] = r["about"]
        rows.setdefault(key, {}).setdefault(r["round"], {})[r["tool"]] = r
    rows = {k: [v[rnd] for rnd in sorted(v) if "vtape" in v[rnd]] for k, v in rows.items()}

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [
        "# The model zoo",
        "",
        "Models nobody tuned vtape's planner for, each written as a user writes it from the README (a log",
        "density of one parameter vector; `jit(vmap(value_and_grad(f)))` over a batch), with a hand-fused Eigen",
        "limit of the same mathematics and a JAX twin (`tools/bench/zoo/`). Generated by",
        f"`python3 tools/bench/zoo/run_zoo.py --rounds {a.rounds} --threads {a.threads} --batches {a.batches} "
        f"--reps {a.reps}` on {datetime.date.today()} at {commit}, on {machine()} ({os.cpu_count()} CPUs), "
        f"JAX {{jax}}.",
        "",
        "Times are medians of the rounds' medians (ms per call); ratios are taken within a round. `first` is the",
        "first call at that batch size over a steady call (vtape traces once for every B; JAX compiles each B).",
        "`agrees` is the largest difference between vtape's values and gradients and the limit's (relative to",
        "the largest entry) and whether JAX's value at example 0 equals the limit's to 1e-6 (CO2's condition",
        "number, about 1e8, allows no closer).",
        "",
    ] + ([a.note, ""] if a.note else [])
    head, lines = lines, []
    jax_version = "?"
    goals = {"jax": [0, 0], "limit": [0, 0], "small": [0, 0], "first": [0, 0], "compile": [0, 0], "again": [0, 0]}
    for model in a.models.split(","):
        if model in skipped and model not in about:
            lines += [f"## {model}", "", f"Skipped: {skipped[model]}", ""]
            continue
        if model not in about:
            continue
        lines += [f"## {model}", "", about[model] + ".", "",
                  "| threads | B | vtape ms | limit ms | JAX ms | vtape / limit | vtape / JAX | per example | first | "
                  "chunk | agrees |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        compile_ms, again_ms = [], []
        for t in [int(x) for x in a.threads.split(",")]:
            per_example = {}
            for b in [int(x) for x in a.batches.split(",")]:
                rs = rows.get((model, t, b))
                if not rs:
                    continue
                v = [r["vtape"] for r in rs]
                j = [r.get("jax") for r in rs]
                if any(j):
                    jax_version = next(x for x in j if x)["jax"]
                vt_ms = med([x["vtape_ms"] for x in v])
                lim_ms = med([x["limit_ms"] for x in v])
                jax_ms = med([x["jax_ms"] if x else None for x in j])
                r_lim = med([x["vtape_ms"] / x["limit_ms"] for x in v])
                r_jax = med([x["vtape_ms"] / y["jax_ms"] if y else None for x, y in zip(v, j)])
                first = med([x["first_ms"] / x["vtape_ms"] for x in v]) if b > 1 else None
                compile_ms += [x["compile_ms"] for x in v]
                again_ms += [x["compile_again_ms"] for x in v if "compile_again_ms" in x]
                per_example[b] = vt_ms / b
                diff = max(max(x["value_rel_diff"], x["grad_rel_diff"]) for x in v)
                twin = [abs(x["value0"] - y["value0"]) <= 1e-6 * max(1.0, abs(x["value0"])) for x, y in zip(v, j) if y]
                agrees = f"{diff:.0e}" + ("" if not twin else (", JAX yes" if all(twin) else ", JAX NO"))
                lines.append(f"| {t} | {b} | {fmt(vt_ms, 3)} | {fmt(lim_ms, 3)} | {fmt(jax_ms, 3)} | {fmt(r_lim)} | "
                             f"{fmt(r_jax)} | {fmt(vt_ms / b, 4)} | {fmt(first)} | {v[-1]['chunk'] or b} | {agrees} |")
                if b >= 8 and r_jax is not None:
                    goals["jax"][0] += r_jax <= 1.0
                    goals["jax"][1] += 1
                if b >= 64:
                    goals["limit"][0] += r_lim <= 1.5
                    goals["limit"][1] += 1
                if first is not None:
                    goals["first"][0] += first <= 1.5
                    goals["first"][1] += 1
            if 8 in per_example and max(per_example) >= 1024:
                goals["small"][0] += per_example[8] <= 1.5 * per_example[max(per_example)]
                goals["small"][1] += 1
        c, again = med(compile_ms), med(again_ms)
        goals["compile"][0] += c is not None and c <= 1.0
        goals["compile"][1] += 1
        goals["again"][0] += again is not None and again <= 1.0
        goals["again"][1] += 1
        lines += ["", f"Compile (trace and plan, first call): {fmt(c, 3)} ms; again over the same data (a second jit): "
                  f"{fmt(again, 3)} ms.", ""]
    summary = [
        "## Goals (issue 29)",
        "",
        "| goal | cells that meet it |",
        "| --- | ---: |",
        f"| vtape ≤ 1.0x JAX at B ≥ 8 | {goals['jax'][0]} of {goals['jax'][1]} |",
        f"| vtape ≤ 1.5x the limit at B ≥ 64 | {goals['limit'][0]} of {goals['limit'][1]} |",
        f"| time per example at B = 8 ≤ 1.5x that at the largest B | {goals['small'][0]} of {goals['small'][1]} |",
        f"| first call at a new B ≤ 1.5x a steady call | {goals['first'][0]} of {goals['first'][1]} |",
        f"| compile ≤ 1 ms | {goals['compile'][0]} of {goals['compile'][1]} |",
        f"| compile again over the same captured data ≤ 1 ms | {goals['again'][0]} of {goals['again'][1]} |",
        "",
    ]
    lines = [line.replace("{jax}", jax_version) for line in head + summary + lines]
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
