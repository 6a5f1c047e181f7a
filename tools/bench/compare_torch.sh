#!/usr/bin/env bash
# vtape's seed_cholesky_grad against the same program in PyTorch (Debian's python3-torch, 2
# threads), in one invocation on one machine: median run time of value_and_grad per batch size.
#   tools/bench/compare_torch.sh [NBATCH_LIST=256] [REPS=5]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nbatch=${1:-256} reps=${2:-5}
dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed" ||
  { echo "installing python3-torch" >&2; apt-get install -y -qq python3-torch >/dev/null; }
"$root/tools/setup.sh" --target seed_cholesky_grad >/dev/null
vt=$(OMP_NUM_THREADS=2 "${VTAPE_BUILD_DIR:-$root/build}/examples/seed_cholesky_grad" --nbatch "$nbatch" --reps "$reps" --json)
pt=$(/usr/bin/python3 "$root/tools/bench/torch_seed_cholesky_grad.py" --nbatch "$nbatch" --reps "$reps" --threads 2)
/usr/bin/python3 - "$vt" "$pt" <<'PY'
import json, sys
vt, pt = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{'nbatch':>7} {'vtape ms':>10} {'torch ms':>10} {'torch/vtape':>12}   (torch {pt['torch']}, {pt['threads']} threads)")
for a, b in zip(vt["runs"], pt["runs"]):
    assert a["nbatch"] == b["nbatch"]
    print(f"{a['nbatch']:>7} {a['run_ms']:>10.1f} {b['run_ms']:>10.1f} {b['run_ms'] / a['run_ms']:>12.1f}")
PY
