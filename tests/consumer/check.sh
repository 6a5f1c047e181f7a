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
cmake -S "$src/tests/consumer" -B "$work/subdir" -DVTAPE_SOURCE_DIR="$src" >/dev/null
cmake --build "$work/subdir" --target consumer -j "$(nproc)" >/dev/null
"$work/subdir/consumer"
