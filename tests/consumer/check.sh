#!/usr/bin/env bash
# Builds and runs tests/consumer against vtape installed with `cmake --install` (find_package)
# and against the source tree (add_subdirectory). Arguments: vtape's source and build folders.
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/installed" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/installed" -j "$(nproc)" >/dev/null
"$work/installed/consumer"
# This build compiles vtape again from source: without optimisation or the CUDA module (which the
# installed copy above already covers), since only the targets' wiring is under test here, and
# an optimised build of it was most of the test suite's time.
cmake -S "$src/tests/consumer" -B "$work/subdir" -DVTAPE_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=None \
  -DVTAPE_CUDA=OFF >/dev/null
cmake --build "$work/subdir" --target consumer -j "$(nproc)" >/dev/null
"$work/subdir/consumer"
