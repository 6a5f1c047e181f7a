#!/usr/bin/env bash
# The include-layering check (tools/check-layering): the source tree passes it, and it does catch
# upward and cross-backend includes in a tree made to have them.
set -euo pipefail
source_dir=$1
check="$source_dir/tools/check-layering"

"$check" "$source_dir"

fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake"/{core,ops,autodiff,backends/cpu,backends/cuda,mpi}
printf '#pragma once\n#include "../ops/b.hpp"\n' >"$fake/core/a.hpp"
printf '#pragma once\n#include "../core/a.hpp"\n#include "../autodiff/c.hpp"\n' >"$fake/ops/b.hpp"
printf '#pragma once\n#include <vector>\n' >"$fake/autodiff/c.hpp"
printf '#include "../cuda/e.hpp"\n#include "../../core/a.hpp"\n' >"$fake/backends/cpu/d.cpp"
printf '#pragma once\n' >"$fake/backends/cuda/e.hpp"
printf '#include "autodiff/c.hpp"\n#include "mpi/f.hpp"\n' >"$fake/vtape.hpp"
printf '#pragma once\n#include "../vtape.hpp"\n' >"$fake/mpi/f.hpp"
if out=$("$check" "$fake"); then
  echo "FAIL: the check passed a tree with upward includes:"
  echo "$out"
  exit 1
fi
for expected in "core/a.hpp:2: includes ops/b.hpp: core may not include ops" \
                "ops/b.hpp:3: includes autodiff/c.hpp: ops may not include autodiff" \
                "backends/cpu/d.cpp:1: includes backends/cuda/e.hpp: one backend's implementation may not include another's" \
                "vtape.hpp:2: includes mpi/f.hpp: vtape.hpp may not include mpi" \
                "4 include(s) cross the layering"; do
  if ! grep -qF "$expected" <<<"$out"; then
    echo "FAIL: expected '$expected' in:"
    echo "$out"
    exit 1
  fi
done
echo "layering checks ok"
