#!/usr/bin/env bash
# Installs the Debian packages vtape builds with, when missing, and configures build/.
# Sourced by tools/run-example and tools/run-tests; safe to run again (builds are incremental).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
packages=(cmake g++ make libeigen3-dev catch2 libfmt-dev liblbfgsb-dev libcli11-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "vtape: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo=sudo; else
    echo "vtape: run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
build=${VTAPE_BUILD_DIR:-$root/build}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" ${VTAPE_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j "$(nproc)" "$@"
