#!/usr/bin/env bash
# examples/gp_co2 against scikit-learn's fit of the same kernel on the same data and machine, in
# one invocation. First, one start each: `gp_co2 --starts 1` against scikit-learn's default fit
# (n_restarts_optimizer=0), both L-BFGS-B from scikit-learn's initial kernel: wall time of the fit
# and the ratio, CPU time, evaluations and time per evaluation, log marginal likelihood, fitted
# kernel. With STARTS > 1, the multi-start fits are compared the same way afterwards.
#   tools/bench/compare_sklearn.sh [STARTS=1]      (needs pip scikit-learn)
# CPU time: vtape's is its whole process's (every thread, start-up included: a few ms), scikit-learn's
# that of its fit; on a machine loaded past its cores, compare those. Threads: both use what the
# environment gives them (OMP_NUM_THREADS for vtape, numpy's BLAS for scikit-learn); for one core,
# OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 0 tools/bench/compare_sklearn.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
starts=${1:-1}
"$root/tools/setup.sh" --target gp_co2 >/dev/null
python3 - "${VTAPE_BUILD_DIR:-$root/build}/examples/gp_co2" "$root/tools/bench/sklearn_co2.py" "$starts" <<'PY'
import json, resource, subprocess, sys

gp_co2, sklearn_co2, starts = sys.argv[1], sys.argv[2], int(sys.argv[3])


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def compare(k):
    c0 = child_cpu()
    vt = json.loads(subprocess.run([gp_co2, "--starts", str(k), "--json"], check=True, capture_output=True,
                                   text=True).stdout.strip().splitlines()[-1])
    vt["fit_cpu_seconds"] = child_cpu() - c0
    sk = json.loads(subprocess.run([sys.executable, sklearn_co2, "--starts", str(k)], check=True, capture_output=True,
                                   text=True).stdout.strip().splitlines()[-1])
    what = "scikit-learn's default fit, n_restarts_optimizer=0" if k == 1 else f"n_restarts_optimizer={k - 1}"
    print(f"{k} start{'s' if k > 1 else ''} ({what}):")
    print(f"  {'':14} {'fit s':>8} {'CPU s':>8} {'evals':>6} {'ms/eval':>8} {'lml':>12}  kernel")
    for name, r in (("vtape", vt), ("scikit-learn", sk)):
        per = r["fit_seconds"] * 1e3 / r["evaluations"] if r.get("evaluations") else float("nan")
        print(f"  {name:14} {r['fit_seconds']:>8.3f} {r['fit_cpu_seconds']:>8.3f} {r.get('evaluations', 0):>6} "
              f"{per:>8.2f} {r['lml']:>12.4f}  {r['kernel']}")
    print(f"  vtape / scikit-learn: fit wall time {vt['fit_seconds'] / sk['fit_seconds']:.3f}, CPU time "
          f"{vt['fit_cpu_seconds'] / sk['fit_cpu_seconds']:.3f} ({vt['evaluations']} vtape evaluations in "
          f"{vt['rounds']} batched rounds, {vt['traces']} trace)")


compare(1)
if starts > 1:
    compare(starts)
PY
