#!/usr/bin/env python3
"""What each optional jit pass buys on the zoo: for every model and every pass that changes its plan,
bench_zoo with the pass turned off (VTAPE_JIT_PASSES=-name) against the plan as built, in alternating
rounds. The figure is the ratio of vtape's time to the model's limit, measured in one process (so
load on the machine moves both), off over on: above 1, the pass pays.

    python3 tools/bench/zoo/pass_value.py [--build build] [--models seed,co2] [--batch 64] [--reps 5]
                                          [--rounds 3] [--threads 1] [--data ../shared/data] [--passes a,b]

Prints one line per (model, pass) and, last, the passes that changed no model or paid on none.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run(bench, args, passes=None, threads=1):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.pop("VTAPE_JIT_PASSES", None)
    if passes:
        env["VTAPE_JIT_PASSES"] = passes
    out = subprocess.run([bench] + args, env=env, capture_output=True, text=True, check=True).stdout
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="seed,co2,grouped,pta_segment,pta_shared,woodbury,hierarchical,logistic")
    ap.add_argument("--passes", default="", help="only these passes (comma-separated); all by default")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    a = ap.parse_args()
    bench = os.path.join(a.build, "tools", "bench_zoo")
    # The passes that can be turned off: the error for an unknown name lists them.
    probe = subprocess.run([bench, "--models", "logistic", "--batches", "1", "--reps", "1"],
                           env=dict(os.environ, VTAPE_JIT_PASSES="-no_such_pass"), capture_output=True, text=True)
    m = re.search(r"the passes are (.*)", probe.stderr + probe.stdout)
    if not m:
        sys.exit("pass_value: could not read the list of passes from bench_zoo's error for an unknown pass:\n"
                 + probe.stderr + probe.stdout)
    optional = [p.strip() for p in m.group(1).split(",")]
    paid = set()
    fired = set()
    for model in a.models.split(","):
        base = ["--models", model, "--data", a.data, "--batches", str(a.batch)]
        text = run(bench, base + ["--reps", "1", "--explain"], threads=a.threads)
        m = re.search(r"passes that changed it: (.*)", text)
        changed = [p.strip() for p in m.group(1).split(",")] if m else []
        for p in changed:
            if p not in optional or (a.passes and p not in a.passes.split(",")):
                continue  # a stage that cannot be turned off, or one not asked for
            fired.add(p)
            on, off = [], []
            for _ in range(a.rounds):
                for passes, into in ((None, on), ("-" + p, off)):
                    out = run(bench, base + ["--reps", str(a.reps), "--json"], passes, a.threads)
                    row = json.loads(out.strip().splitlines()[-1])
                    into.append(row["vtape_ms"] / row["limit_ms"])
            gain = statistics.median(off) / statistics.median(on)
            if gain > 1.03:
                paid.add(p)
            print(f"{model:>13} B {a.batch:5} {p:>36}: vtape/limit {statistics.median(on):7.3f} as built, "
                  f"{statistics.median(off):7.3f} without it: {gain:5.2f}x", flush=True)
    print("optional passes:", ", ".join(optional))
    print("passes that changed no model's plan:", ", ".join(p for p in optional if p not in fired) or "none")
    print("passes that changed a plan:", ", ".join(sorted(fired)) or "none")
    print("passes that paid 3% or more somewhere:", ", ".join(sorted(paid)) or "none")
    print("passes that changed a plan and paid nowhere:", ", ".join(sorted(fired - paid)) or "none")


if __name__ == "__main__":
    sys.exit(main())
