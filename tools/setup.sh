#!/usr/bin/env bash
# Installs the Debian packages vtape builds with, when missing, configures build/ (showing CMake's
# summary: the build type, whether the CUDA module, the MPI layer and the Python package are
# built) and builds.
#   tools/setup.sh [--docs] [cmake --build arguments...]
# --docs also installs doxygen, for the API reference, clang-format, for the layout check among
# the tests, and from PyPI what the Python package builds and tests with (nanobind, numpy, pytest,
# scikit-build-core, scipy). Run by tools/run-example and tools/run-tests; safe to run again
# (builds are incremental). VTAPE_BUILD_DIR picks the build folder (build/), VTAPE_CMAKE_ARGS adds
# arguments to its configure (e.g. -DVTAPE_CUDA=ON), which runs the first time and again after
# packages were installed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
packages=(cmake g++ ninja-build libeigen3-dev catch2 libfmt-dev liblbfgsb-dev libcli11-dev libopenmpi-dev openmpi-bin)
docs=0
python_installed=0
if [ "${1:-}" = "--docs" ]; then
  packages+=(doxygen clang-format)  # the API reference, and the layout check among the tests
  docs=1
  shift
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
build=${VTAPE_BUILD_DIR:-$root/build}
if ((${#missing[@]})); then
  echo "vtape: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo=sudo; else
    echo "vtape: run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# With --docs (the test set-up): the Python package's build and test dependencies, from PyPI into the python3 on PATH,
# when missing (a Python that Debian manages takes them only with --break-system-packages).
python_packages=(nanobind numpy pytest scikit-build-core scipy)
if ((docs)) && command -v python3 >/dev/null && ! python3 -c "import nanobind, numpy, pytest, scikit_build_core, scipy" 2>/dev/null; then
  echo "vtape: installing ${python_packages[*]} for $(command -v python3) (pip)" >&2
  python3 -m pip install -q --disable-pip-version-check "${python_packages[@]}" 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages "${python_packages[@]}"
  python_installed=1
fi
# Configure when build/ has no build files yet (a first run, or a configure that failed), or when
# packages were just installed (what the last configure did not find, it looks for again; the
# settings in build/CMakeCache.txt stay).
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ] || ((${#missing[@]})) || ((python_installed)); then
  mkdir -p "$build"
  # shellcheck disable=SC2086  # VTAPE_CMAKE_ARGS is a list of arguments
  if ! cmake -S "$root" -B "$build" "${generator[@]}" ${VTAPE_CMAKE_ARGS:-} >"$build/configure.log" 2>&1; then
    cat "$build/configure.log" >&2
    echo "vtape: configuring $build failed (the log above is in $build/configure.log)" >&2
    exit 1
  fi
  grep -E '^-- vtape|^CMake Warning' "$build/configure.log" | sed 's/^-- /configure: /' >&2 || true
fi
cmake --build "$build" -j "$(nproc)" "$@"
