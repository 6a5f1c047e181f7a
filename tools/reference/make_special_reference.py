#!/usr/bin/env python3
"""Reference values of digamma and trigamma for tests/test_special.cpp, from scipy (independent of
vtape): scipy.special.psi and scipy.special.polygamma(1, x).

Writes tests/data/special/polygamma.txt: one line per point, "x psi(x) psi'(x)" with 17
significant digits. The points cover tiny, ordinary and huge positive x, both sides of the
recurrence's switch at x = 10, the positive root of psi, and negative non-integers (the reflection),
kept at least 1e-2 from the poles, where scipy's own psi loses digits.

    python3 tools/reference/make_special_reference.py
"""
import pathlib

import numpy as np
import scipy.special as sp

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "special"
out.mkdir(parents=True, exist_ok=True)

x = np.concatenate([
    np.geomspace(1e-12, 1e12, 97),
    np.linspace(0.05, 25.0, 100),
    [9.999999999999998, 10.0, 10.000000000000002, 1.4616321449683623, 1.46, 1.47, 0.5, 1.0, 2.0, 100.5],
    np.linspace(-30.27, -0.013, 89),
    [-0.5, -1.5, -2.5, -1e-7, -123456.25],
])
x = x[(x > 0) | (np.abs(x - np.round(x)) >= 1e-2)]
rows = np.stack([x, sp.psi(x), sp.polygamma(1, x)], axis=1)
with open(out / "polygamma.txt", "w") as f:
    f.write("# x digamma(x) trigamma(x), from scipy (tools/reference/make_special_reference.py)\n")
    for r in rows:
        f.write("%.17g %.17g %.17g\n" % tuple(r))
print("wrote", len(rows), "points to", out / "polygamma.txt")
