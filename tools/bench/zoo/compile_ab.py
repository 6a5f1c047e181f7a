#!/usr/bin/env python3
"""Compile time of two (or more) builds of bench_zoo, side by side.

Wall time: the builds run alternately, model by model, round after round (one thread, pinned to one CPU), each a
fresh process; for each model and build, the medians over the rounds of the first compile of the process
(`compile_ms`) and of the median of the later ones (`compile_again_ms`), and the ratios to the first build.

    tools/bench/zoo/compile_ab.py OLD/bench_zoo NEW/bench_zoo --models kalman,kepler --rounds 21

With --instructions, the same builds under callgrind (deterministic, so one run each): the instructions inside
JitCache::get per later compile ((runs with 41 compiles - runs with 1) / 40) and for the first one (the rest).
A model whose first call runs loop bodies counts their plans in "first" too.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile


def run_zoo(binary, model, compiles, data, prefix=()):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [*prefix, binary, "--models", model, "--batches", "8", "--reps", "1", "--compiles", str(compiles),
               "--json", "--data", data]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=True)


def wall(binaries, models, rounds, compiles, data, cpu):
    times = {}
    for _ in range(rounds):
        for model in models:
            for binary in binaries:
                out = run_zoo(binary, model, compiles, data, ("taskset", "-c", cpu)).stdout
                row = json.loads(out.splitlines()[0])
                times.setdefault((model, binary), []).append((row["compile_ms"], row["compile_again_ms"]))
    print(f"| model | {' | '.join(f'build {i}: first / again (ms)' for i in range(len(binaries)))} |")
    print("| --- |" + " ---: |" * len(binaries))
    for model in models:
        cells, base = [], None
        for binary in binaries:
            first = statistics.median(t[0] for t in times[(model, binary)])
            again = statistics.median(t[1] for t in times[(model, binary)])
            cell = f"{first:.2f} / {again:.2f}"
            if base:
                cell += f" ({first / base[0]:.2f}x, {again / base[1]:.2f}x)"
            else:
                base = (first, again)
            cells.append(cell)
        print(f"| {model} | {' | '.join(cells)} |")


def instructions(binaries, models, data):
    def collected(binary, model, compiles):
        with tempfile.TemporaryDirectory() as d:
            prefix = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/out",
                      "--toggle-collect=vt::detail::JitCache::get*")
            err = run_zoo(binary, model, compiles, data, prefix).stderr
        return int(re.search(r"Collected : (\d+)", err).group(1))

    print("| model | " + " | ".join(f"build {i}: first / later (M instructions)" for i in range(len(binaries))) + " |")
    print("| --- |" + " ---: |" * len(binaries))
    for model in models:
        cells = []
        for binary in binaries:
            one, many = collected(binary, model, 1), collected(binary, model, 41)
            later = (many - one) / 40
            cells.append(f"{(one - later) / 1e6:.2f} / {later / 1e6:.2f}")
        print(f"| {model} | {' | '.join(cells)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="+", help="bench_zoo programs; the first is the baseline")
    parser.add_argument("--models", default="seed,logistic,eight_schools,hierarchical,grouped,woodbury,co2,kalman,"
                        "kepler,mixture,pta_shared,pta_segment")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--compiles", type=int, default=300, help="later compiles per process (their median)")
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../../../shared/data"))
    parser.add_argument("--cpu", default="1", help="the CPU every run is pinned to")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    args = parser.parse_args()
    models = args.models.split(",")
    if args.instructions:
        instructions(args.binaries, models, args.data)
    else:
        wall(args.binaries, models, args.rounds, args.compiles, args.data, args.cpu)


if __name__ == "__main__":
    main()
