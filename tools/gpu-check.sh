#!/usr/bin/env bash
# The GPU check, in one go: builds vtape with the CUDA backend, runs the gpu-labelled tests, then
# runs seed_cholesky_grad on the GPU for B = 16..2048 (and on the CPU of the same machine, as the
# baseline of the same run). Everything it measures goes to OUT_DIR:
#   device.txt        nvidia-smi's view of the GPU (when nvidia-smi exists)
#   gpu-tests.log     ctest output;  gpu-tests.xml  the same as JUnit
#   seed_cuda.json    seed_cholesky_grad --device cuda --json (compile_ms, run_ms per B)
#   seed_cpu.json     the same on the CPU
#   gp_co2_eval.json  the CO2 likelihood and gradient on the GPU at scikit-learn's optimum
#                     (lml must be -115.0516349, as on the CPU and in scikit-learn)
#   gp_co2_cuda.json  the CO2 fit (8 starts) on the GPU, when gp_co2 is built (liblbfgsb present)
#   gp_co2_cpu.json, gp_co2_cuda_batched.json   the same fit on the CPU, and on the GPU with
#                     potrfBatched forced (VTAPE_CUDA_POTRF=batched) instead of one Xpotrf per matrix
#   seed_cuda_single.json  the seed on the GPU with one Xpotrf per matrix (VTAPE_CUDA_POTRF=single)
#   seed_cuda_nographs.json  the seed on the GPU with plans run step by step (VTAPE_CUDA_GRAPHS=0)
#   small_cuda.json   bench_gpu_small --device cuda --json: a Kalman filter by scan under vmap and 64 small
#                     Cholesky factors per example, jit(vmap(value_and_grad)) at B = 8, 64, 1024, against the
#                     CPU of the same machine (values agree to 1e-10, else its exit code is 1)
#   jax_gpu.json, torch_gpu.json  the seed in JAX and PyTorch on the same GPU, where python3 has them
#   report.json       tools/gpu_report.py: GPU vs CPU seed values, ratios to the peers, FP64 rate
#   summary.json      exit codes, skipped/failed counts, seconds per phase
# Exits 0 only when every gpu test ran and passed, both seed runs finished and their values agree
# to 1e-10 relative, and bench_gpu_small (where built) agreed with the CPU. Sized to finish in under 4 minutes on one H200 with 16 cores, build included.
#
# usage: tools/gpu-check.sh OUT_DIR      (VTAPE_GPU_BUILD_DIR: build folder, default build-gpu/)
#        VTAPE_GPU_PREBUILT=1 tools/gpu-check.sh OUT_DIR
#   runs a build made elsewhere by tools/gpu-pack.sh (for a GPU machine without vtape's packages):
#   nothing is compiled, the build's runtime-libs/ goes on the library path, and when the build
#   folder was made under another path, that path is linked to this checkout (ctest's files name it).
set -uo pipefail
out=${1:?usage: tools/gpu-check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${VTAPE_GPU_BUILD_DIR:-$root/build-gpu}
jobs=$(nproc)
t0=$(date +%s)
phase() { echo "[gpu-check $(($(date +%s) - t0)) s] $*" >&2; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/device.txt" 2>&1

build_rc=0 co2_target=0
if [ "${VTAPE_GPU_PREBUILT:-0}" = 1 ]; then
  phase "prebuilt: $build"
  made_in=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
  if [ -n "$made_in" ] && [ "$made_in" != "$root" ] && [ ! -e "$made_in" ]; then
    mkdir -p "$(dirname "$made_in")" && ln -s "$root" "$made_in"
  fi
  export LD_LIBRARY_PATH="$build/runtime-libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VTAPE_CUDA_MODULE="$build/libvtape_cuda.so"
  for f in "$VTAPE_CUDA_MODULE" "$build/tests/vtape_gpu_tests" "$build/examples/seed_cholesky_grad"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "prebuilt build lacks $f" >"$out/build.log"; build_rc=2; }
  done
  [ -x "$build/examples/gp_co2" ] && co2_target=1
else
  phase "configure and build (CUDA on, $jobs jobs)"
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  { [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" "${generator[@]}" -DVTAPE_CUDA=ON \
      >"$out/build.log" 2>&1; } &&
    cmake --build "$build" -j "$jobs" --target vtape_gpu_tests seed_cholesky_grad bench_gpu_small \
      >>"$out/build.log" 2>&1 || build_rc=$?
  # gp_co2 needs liblbfgsb: built when the configure step found it.
  [ "$build_rc" -eq 0 ] && cmake --build "$build" -j "$jobs" --target gp_co2 >>"$out/build.log" 2>&1 && co2_target=1
fi
t_build=$(($(date +%s) - t0))

tests_rc=-1 skipped=-1 failed=-1 cuda_rc=-1 cpu_rc=-1 small_rc=-1 eval_rc=-1 fit_rc=-1 report_rc=-1
if [ "$build_rc" -eq 0 ]; then
  phase "gpu tests"
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 120 --output-junit "$out/gpu-tests.xml") >"$out/gpu-tests.log" 2>&1
  tests_rc=$?
  skipped=$(grep -c "(Skipped)" "$out/gpu-tests.log")
  failed=$(grep -cE "\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)" "$out/gpu-tests.log")
  tail -5 "$out/gpu-tests.log" >&2
  phase "seed_cholesky_grad on cuda:0"
  timeout 120 "$build/examples/seed_cholesky_grad" --device cuda --json --reps 5 >"$out/seed_cuda.json" 2>"$out/seed_cuda.err"
  cuda_rc=$?
  phase "seed_cholesky_grad on the CPU (baseline)"
  timeout 90 "$build/examples/seed_cholesky_grad" --device cpu --json --reps 3 >"$out/seed_cpu.json" 2>"$out/seed_cpu.err"
  cpu_rc=$?
  if [ -x "$build/tools/bench_gpu_small" ]; then
    phase "bench_gpu_small on cuda:0: a loop under vmap and small factors, against the CPU"
    timeout 150 "$build/tools/bench_gpu_small" --device cuda --json --batches 8,64,1024 --reps 5 \
      >"$out/small_cuda.json" 2>"$out/small_cuda.err"
    small_rc=$?
  fi
  if [ "$co2_target" -eq 1 ]; then
    phase "gp_co2 on cuda:0: likelihood at scikit-learn's optimum, then the fit"
    timeout 60 "$build/examples/gp_co2" --device cuda --eval --theta \
      7.604416279,3.943521672,1.941557834,4.516338972,0.3920420878,-1.247242236,1.061256502,-0.03252319171,-3.342626632,-2.103734234,-3.304978524 \
      >"$out/gp_co2_eval.json" 2>"$out/gp_co2_eval.err"
    eval_rc=$?
    grep -q '"lml": -115.05163' "$out/gp_co2_eval.json" || eval_rc=9
    timeout 100 "$build/examples/gp_co2" --device cuda --json >"$out/gp_co2_cuda.json" 2>"$out/gp_co2_cuda.err"
    fit_rc=$?
    phase "gp_co2 fit: on the CPU, and on cuda:0 with potrfBatched instead of one Xpotrf per matrix"
    timeout 120 "$build/examples/gp_co2" --device cpu --json >"$out/gp_co2_cpu.json" 2>"$out/gp_co2_cpu.err"
    VTAPE_CUDA_POTRF=batched timeout 100 "$build/examples/gp_co2" --device cuda --json \
      >"$out/gp_co2_cuda_batched.json" 2>"$out/gp_co2_cuda_batched.err"
  fi
  phase "seed_cholesky_grad on cuda:0 without CUDA graphs (VTAPE_CUDA_GRAPHS=0)"
  VTAPE_CUDA_GRAPHS=0 timeout 60 "$build/examples/seed_cholesky_grad" --device cuda --json --reps 5 \
    >"$out/seed_cuda_nographs.json" 2>"$out/seed_cuda_nographs.err"
  phase "seed_cholesky_grad on cuda:0 with one Xpotrf per matrix instead of potrfBatched"
  VTAPE_CUDA_POTRF=single timeout 60 "$build/examples/seed_cholesky_grad" --device cuda --json --reps 3 \
    --nbatch 16,256,2048 >"$out/seed_cuda_single.json" 2>"$out/seed_cuda_single.err"
  # The peers on the same GPU, where this python3 has them with GPU support (VTAPE_GPU_PEERS=0 skips).
  if [ "${VTAPE_GPU_PEERS:-1}" = 1 ]; then
    if python3 -c "import jax, sys; sys.exit(jax.devices()[0].platform != 'gpu')" 2>/dev/null; then
      phase "JAX on the GPU"
      timeout 150 python3 "$root/tools/bench/jax_seed_cholesky_grad.py" --nbatch 16,256,2048 --reps 5 \
        >"$out/jax_gpu.json" 2>"$out/jax_gpu.err"
    fi
    if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
      phase "PyTorch on the GPU"
      timeout 90 python3 "$root/tools/bench/torch_seed_cholesky_grad.py" --device cuda --nbatch 16,256,2048 --reps 5 \
        >"$out/torch_gpu.json" 2>"$out/torch_gpu.err"
    fi
  fi
  phase "report: seed values on the GPU against the CPU's (1e-10), ratios to the peers"
  python3 "$root/tools/gpu_report.py" "$out" >"$out/report.log" 2>&1
  report_rc=$?
fi
elapsed=$(($(date +%s) - t0))
cat >"$out/summary.json" <<JSON
{"build_rc": $build_rc, "build_s": $t_build, "gpu_tests_rc": $tests_rc, "gpu_tests_skipped": $skipped,
 "gpu_tests_failed": $failed, "seed_cuda_rc": $cuda_rc, "seed_cpu_rc": $cpu_rc, "small_cuda_rc": $small_rc,
 "gp_co2_eval_rc": $eval_rc, "gp_co2_fit_rc": $fit_rc, "report_rc": $report_rc, "elapsed_s": $elapsed}
JSON
phase "done: $(tr -d '\n' <"$out/summary.json")"
[ "$build_rc" -eq 0 ] && [ "$tests_rc" -eq 0 ] && [ "$skipped" -eq 0 ] && [ "$cuda_rc" -eq 0 ] && [ "$cpu_rc" -eq 0 ] &&
  [ "$report_rc" -eq 0 ] && [ "$small_rc" -le 0 ] &&
  { [ "$co2_target" -eq 0 ] || { [ "$eval_rc" -eq 0 ] && [ "$fit_rc" -eq 0 ]; }; }
