#!/usr/bin/env bash
# examples/gp_co2 --starts K under mpirun spreads the starts across ranks and reports the same fit
# as one process (the same lml, theta, best start and status; times aside). On the first 150
# months of the series, so that it is quick. Arguments: the example, the CSV, then the launcher's
# command up to the rank count.
set -euo pipefail
example=$1 data=$2
shift 2
launch=("$@")
export OMP_NUM_THREADS=1
strip() { sed -E 's/"fit_seconds": [0-9.]+, //'; }
one=$("$example" --data "$data" --starts 3 --json 2>/dev/null | strip)
echo "one process: $one"
for ranks in 2 4; do  # 3 starts over 2 ranks (2 + 1) and over 4 (one rank without a start)
  many=$("${launch[@]}" "$ranks" "$example" --data "$data" --starts 3 --json 2>/dev/null | strip)
  echo "$ranks ranks: $many"
  [ "$one" = "$many" ] || { echo "FAIL: $ranks ranks differ from one process"; exit 1; }
done
echo "gp_co2 under mpirun ok"
