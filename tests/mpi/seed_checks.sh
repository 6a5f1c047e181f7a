#!/usr/bin/env bash
# examples/seed_cholesky_grad under mpirun gives the single-process value and gradient: on the
# numpy reference (tests/data/seed, B = 3, so 3 ranks hold one example each and 4 leave one empty),
# and at B = 4096, random parameters, against one process (value to 1e-12 relative).
# Arguments: the example, tests/data/seed, compare_seed, then the launcher's command up to the
# rank count (e.g. mpirun --oversubscribe --allow-run-as-root -np).
set -euo pipefail
example=$1 data=$2 compare=$3
shift 3
launch=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1
"$example" --nobs 32 --ngp 4 --reps 1 --json --pars "$data/P.npy" --grad-out "$out/grad1.npy" > "$out/one.json"
for ranks in 2 3 4; do
  "${launch[@]}" "$ranks" "$example" --nobs 32 --ngp 4 --reps 1 --json --pars "$data/P.npy" \
    --grad-out "$out/grad$ranks.npy" > "$out/run$ranks.json"
  cat "$out/run$ranks.json"
  grep -q "\"ranks\": $ranks," "$out/run$ranks.json" || { echo "FAIL: not sharded over $ranks ranks"; exit 1; }
  "$compare" "$out/run$ranks.json" "$data/value.npy" "$out/grad$ranks.npy" "$data/grad.npy"
  "$compare" "$out/run$ranks.json" "$data/value.npy" "$out/grad$ranks.npy" "$out/grad1.npy"
done
value() { grep -o '"value": [-0-9.eE+]*' "$1" | head -1 | cut -d' ' -f2; }
"$example" --nobs 32 --ngp 4 --reps 1 --json --nbatch 4096 > "$out/big1.json"
"${launch[@]}" 2 "$example" --nobs 32 --ngp 4 --reps 1 --json --nbatch 4096 > "$out/big2.json"
cat "$out/big2.json"
one=$(value "$out/big1.json") two=$(value "$out/big2.json")
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; s = a < 0 ? -a : a;
  printf "B = 4096: one process %s, 2 ranks %s\n", a, b; exit !(d <= 1e-12 * s) }' || { echo "FAIL: values differ"; exit 1; }
echo "seed under mpirun ok"
