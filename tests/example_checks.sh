#!/usr/bin/env bash
# Runs examples/seed_cholesky_grad on the numpy reference of tools/reference/make_seed_reference.py
# and compares its value and gradient (written with --grad-out). Arguments: the example binary,
# tests/data/seed, and a helper that compares two .npy files.
set -euo pipefail
example=$1 data=$2 compare=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$example" --nobs 32 --ngp 4 --reps 1 --json --pars "$data/P.npy" --grad-out "$out/grad.npy" > "$out/run.json"
cat "$out/run.json"
"$compare" "$out/run.json" "$data/value.npy" "$out/grad.npy" "$data/grad.npy"
