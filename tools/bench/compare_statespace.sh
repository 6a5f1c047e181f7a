#!/usr/bin/env bash
# examples/gp_statespace against its JAX twin (tools/bench/jax_statespace.py, lax.scan), the same
# Kalman filter's jit(value_and_grad) at N observations, one thread each, in alternating rounds:
# each round runs both and prints their medians and the ratio vtape / JAX; the last line is the
# median ratio over the rounds.
#   tools/bench/compare_statespace.sh [N=100000] [ROUNDS=3] [REPS=3]     (needs pip jax)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
n=${1:-100000} rounds=${2:-3} reps=${3:-3}
"$root/tools/setup.sh" --target gp_statespace >/dev/null
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
python3 - "${VTAPE_BUILD_DIR:-$root/build}/examples/gp_statespace" "$root/tools/bench/jax_statespace.py" "$n" \
  "$rounds" "$reps" <<'PY'
import json, statistics, subprocess, sys

exe, jax_script, n, rounds, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
ratios = []
for r in range(rounds):
    vt = json.loads(subprocess.run([exe, "--npoints", n, "--ncheck", "200", "--reps", reps, "--json"], check=True,
                                   capture_output=True, text=True).stdout.strip().splitlines()[-1])
    jx = json.loads(subprocess.run([sys.executable, jax_script, "--npoints", n, "--reps", reps], check=True,
                                   capture_output=True, text=True).stdout.strip().splitlines()[-1])
    ratio = vt["value_and_grad_ms"] / jx["value_and_grad_ms"]
    ratios.append(ratio)
    print(f"round {r}: vtape {vt['value_and_grad_ms']:.1f} ms (first call {vt['first_call_ms']:.1f}), "
          f"JAX {jx['value_and_grad_ms']:.1f} ms (first call {jx['first_call_ms']:.1f}), ratio {ratio:.2f}")
print(f"N = {n}: vtape / JAX, value and gradient: median {statistics.median(ratios):.2f} over {rounds} rounds")
PY
