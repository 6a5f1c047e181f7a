#!/usr/bin/env bash
# Builds and runs tests/consumer against vtape installed with `cmake --install` (find_package,
# with a version check), and compiles it against the source tree (add_subdirectory). Arguments: vtape's source
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
"$work/installed/consumer_library_first"
# As a subproject: configured from the source tree, and the consumer compiled with the usage requirements
# add_subdirectory gives it (include folders, definitions, options); the link is checked by its command line,
# which names the subproject's library and its dependencies. Building and running it would compile vtape a third
# time in the suite (the installed copy above and python/tests/pip_install.sh already run a consumer), and that
# build was the longest test.
echo "configuring vtape as the consumer's subproject, compiling the consumer against it"
cmake -S "$src/tests/consumer" -B "$work/subdir" -G Ninja -DVTAPE_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=None \
  -DVTAPE_CUDA=OFF >/dev/null
ninja -C "$work/subdir" CMakeFiles/consumer.dir/main.cpp.o >/dev/null
link=$(ninja -C "$work/subdir" -t commands consumer | tail -1)
for part in CMakeFiles/consumer.dir/main.cpp.o vtape/libvtape.a libfmt; do
  [[ $link == *"$part"* ]] || { echo "FAIL: the subproject consumer's link line lacks $part: $link"; exit 1; }
done
echo "consumer ok as a subproject: compiled, and linked with vtape/libvtape.a"
