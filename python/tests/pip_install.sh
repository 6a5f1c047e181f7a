#!/usr/bin/env bash
# `pip install .` from the source tree into a fresh virtual environment, then a gradient and a jitted call through
# the installed package: what a user does after the README's set-up. The build requirements (scikit-build-core,
# nanobind) and numpy come from the Python that runs the test (tools/setup.sh --docs installs them), so the test
# needs no network: --no-build-isolation, and a venv that sees the base's packages.
#   python/tests/pip_install.sh SOURCE_DIR PYTHON BUILD_DIR
# The library comes from BUILD_DIR, installed into a prefix first, and pip builds the Python package against it
# (VTAPE_USE_INSTALLED): the package's build, install and import are under test, and compiling the library a second
# time was the longest test of the suite. The library itself is built and tested from the same CMakeLists.txt in
# BUILD_DIR.
set -euo pipefail
src=$1
python=$2
build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" --component Unspecified >/dev/null
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
  -Cbuild-dir="$work/build" -Ccmake.build-type=None -Ccmake.define.VTAPE_USE_INSTALLED=ON \
  -Ccmake.define.CMAKE_PREFIX_PATH="$work/prefix" "$src"
if find "$work/build" -name 'libvtape*.a' | grep -q .; then
  echo "pip compiled the library again instead of using the installed one" >&2
  exit 1
fi
cd "$work"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import sys

import numpy as np

import vtape as vt

assert vt.__file__.startswith(sys.argv[1]), vt.__file__  # the installed package, not a build tree's
g = vt.grad(lambda x: vt.sum(vt.exp(x) * x))(np.array([0.5, -1.0]))
np.testing.assert_allclose(np.asarray(g), np.exp([0.5, -1.0]) * (1 + np.array([0.5, -1.0])), rtol=1e-14)
f = vt.jit(vt.vmap(lambda a: vt.logdet(a)))
np.testing.assert_allclose(np.asarray(f(np.stack([np.eye(3) * 2] * 4))), [3 * np.log(2)] * 4, rtol=1e-14)
# The subpackages are installed too (JAX's namespaces).
import vtape.numpy as jnp  # noqa: E402
from vtape.scipy.linalg import cho_factor, cho_solve  # noqa: E402
np.testing.assert_allclose(np.asarray(cho_solve(cho_factor(np.eye(2) * 4.0), jnp.ones(2))), [0.25, 0.25], rtol=1e-15)
# The type stubs and the py.typed marker beside the module.
import os  # noqa: E402
package = os.path.dirname(vt.__file__)
assert os.path.exists(os.path.join(package, "py.typed"))
with open(os.path.join(package, "_vtape.pyi")) as stub:
    assert "def cho_solve(" in stub.read()
print("pip install ok:", vt.__version__, vt.__file__)
PY
