#!/usr/bin/env bash
# Builds and runs tests/consumer against vtape installed with `cmake --install` (find_package,
# with a version check) and against the source tree (add_subdirectory). Arguments: vtape's source
# and build folders.
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^#define VTAPE_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/core/version.hpp" | paste -sd.)
IFS=. read -r major minor patch <<<"$version"
echo "installing vtape $version into a temporary prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The package accepts its own major.minor and refuses a newer minor or another major.
cmake -S "$src/tests/consumer" -B "$work/installed" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DVTAPE_REQUIRE_VERSION="$major.$minor" | grep "consumer: found vtape $version"
for refused in "$major.$((minor + 1))" "$((major + 1)).0"; do
  if cmake -S "$src/tests/consumer" -B "$work/refused" -DCMAKE_PREFIX_PATH="$work/prefix" \
       -DVTAPE_REQUIRE_VERSION="$refused" >"$work/refused.log" 2>&1; then
    echo "FAIL: find_package(vtape $refused) accepted vtape $version"
    exit 1
  fi
  grep -q "version: $version" "$work/refused.log" || { cat "$work/refused.log"; exit 1; }
  echo "find_package(vtape $refused) refuses vtape $version"
done
echo "building the consumer against the installed package"
cmake --build "$work/installed" -j "$(nproc)" >/dev/null
"$work/installed/consumer"
# This build compiles vtape again from source: without optimisation or the CUDA module (which the
# installed copy above already covers), since only the targets' wiring is under test here, and
# an optimised build of it was most of the test suite's time.
echo "building vtape again as the consumer's subproject (the longest part)"
cmake -S "$src/tests/consumer" -B "$work/subdir" -DVTAPE_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=None \
  -DVTAPE_CUDA=OFF >/dev/null
cmake --build "$work/subdir" --target consumer -j "$(nproc)" >/dev/null
"$work/subdir/consumer"
