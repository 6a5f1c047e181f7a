#!/usr/bin/env bash
# Prepares a CUDA build here for a GPU machine that cannot install packages (no network, no Eigen,
# fmt, Catch2 or liblbfgsb there): builds what tools/gpu-check.sh runs into build-gpu/ with CPU flags
# every x86-64 server has (AVX2/FMA, not -march=native), and copies the shared libraries the programs
# need beyond glibc, libstdc++ and CUDA's own into build-gpu/runtime-libs/. Then, on the GPU machine,
# with build-gpu carried along:
#
#   VTAPE_GPU_PREBUILT=1 tools/gpu-check.sh OUT_DIR
#
# usage: tools/gpu-pack.sh      (VTAPE_GPU_BUILD_DIR: build folder, default build-gpu/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${VTAPE_GPU_BUILD_DIR:-$root/build-gpu}
VTAPE_BUILD_DIR=$build VTAPE_CMAKE_ARGS="-DVTAPE_CUDA=ON -DVTAPE_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3" \
  "$root/tools/setup.sh" --target vtape_gpu_tests seed_cholesky_grad gp_co2 bench_gpu_small
mkdir -p "$build/runtime-libs"
for program in "$build"/libvtape_cuda.so "$build"/tests/vtape_gpu_tests "$build"/examples/seed_cholesky_grad "$build"/examples/gp_co2 \
  "$build"/tools/bench_gpu_small; do
  [ -e "$program" ] || continue
  ldd "$program" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$build/runtime-libs/"; done
ls "$build/runtime-libs" >&2
du -sh "$build" >&2
