#!/usr/bin/env bash
# examples/gp_co2 against scikit-learn's fit of the same kernel on the same data and machine, in
# one invocation: wall time of the whole multi-start fit, log marginal likelihood, fitted kernel.
#   tools/bench/compare_sklearn.sh [STARTS=8]      (needs pip scikit-learn)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
starts=${1:-8}
"$root/tools/setup.sh" --target gp_co2 >/dev/null
vt=$("${VTAPE_BUILD_DIR:-$root/build}/examples/gp_co2" --starts "$starts" --json 2>/dev/null)
sk=$(python3 "$root/tools/bench/sklearn_co2.py" --starts "$starts")
python3 - "$vt" "$sk" <<'PY'
import json, sys
vt, sk = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{'':14} {'fit s':>8} {'lml':>12}  kernel")
print(f"{'vtape':14} {vt['fit_seconds']:>8.2f} {vt['lml']:>12.4f}  {vt['kernel']}")
print(f"{'scikit-learn':14} {sk['fit_seconds']:>8.2f} {sk['lml']:>12.4f}  {sk['kernel']}")
print(f"vtape / scikit-learn wall time: {vt['fit_seconds'] / sk['fit_seconds']:.2f} "
      f"({vt['starts']} starts, {vt['evaluations']} evaluations in {vt['rounds']} batched rounds, {vt['traces']} trace)")
PY
