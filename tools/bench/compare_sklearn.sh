#!/usr/bin/env bash
# examples/gp_co2 against scikit-learn's fit of the same kernel on the same data and machine, in
# one invocation. First, one start each: `gp_co2 --starts 1` against scikit-learn's default fit
# (n_restarts_optimizer=0), both L-BFGS-B from scikit-learn's initial kernel: wall time of the fit,
# the ratio, evaluations and time per evaluation, log marginal likelihood, fitted kernel. With
# STARTS > 1, the multi-start fits are compared the same way afterwards.
#   tools/bench/compare_sklearn.sh [STARTS=1]      (needs pip scikit-learn)
# Threads: both use what the environment gives them (OMP_NUM_THREADS for vtape, numpy's BLAS for
# scikit-learn); set OMP_NUM_THREADS=1 and pin with taskset -c 0 for a one-core comparison.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
starts=${1:-1}
if [ -z "${VTAPE_SKIP_BUILD:-}" ]; then "$root/tools/setup.sh" --target gp_co2 >/dev/null; fi
compare() {
  local k=$1 vt sk
  vt=$("${VTAPE_BUILD_DIR:-$root/build}/examples/gp_co2" --starts "$k" --json 2>/dev/null)
  sk=$(python3 "$root/tools/bench/sklearn_co2.py" --starts "$k")
  python3 - "$vt" "$sk" <<'PY'
import json, sys
vt, sk = json.loads(sys.argv[1]), json.loads(sys.argv[2])
k = vt["starts"]
print(f"{k} start{'s' if k > 1 else ''} ({'scikit-learn default fit, n_restarts_optimizer=0' if k == 1 else f'n_restarts_optimizer={k - 1}'}):")
print(f"  {'':14} {'fit s':>8} {'evals':>6} {'ms/eval':>8} {'lml':>12}  kernel")
for name, r in (("vtape", vt), ("scikit-learn", sk)):
    per = r["fit_seconds"] * 1e3 / r["evaluations"] if r.get("evaluations") else float("nan")
    print(f"  {name:14} {r['fit_seconds']:>8.3f} {r.get('evaluations', 0):>6} {per:>8.2f} {r['lml']:>12.4f}  {r['kernel']}")
print(f"  vtape / scikit-learn fit wall time: {vt['fit_seconds'] / sk['fit_seconds']:.3f} "
      f"({vt['evaluations']} vtape evaluations in {vt['rounds']} batched rounds, {vt['traces']} trace)")
PY
}
compare 1
if [ "$starts" -gt 1 ]; then compare "$starts"; fi
