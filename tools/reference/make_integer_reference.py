#!/usr/bin/env python3
"""Integer and bool .npy files for tests/test_integers.cpp and tests/test_bool.cpp, written by numpy (independent of
vtape).

Writes tests/data/ints/*.npy: int64 and int32 arrays (C order, little-endian), with values that
float64 cannot hold exactly (above 2^53) and the extremes of each type, plus numpy's own results
for a few integer operations on them (sums that wrap, float-to-int conversion by truncation).

    python3 tools/reference/make_integer_reference.py
"""
import pathlib

import numpy as np

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "ints"
out.mkdir(parents=True, exist_ok=True)

big = 2**53
i64 = np.array([[0, -1, 7, big + 1], [-(big + 3), np.iinfo(np.int64).max, np.iinfo(np.int64).min, 42]], dtype="<i8")
i32 = np.array([3, -4, np.iinfo(np.int32).max, np.iinfo(np.int32).min, 0, 1], dtype="<i4")
groups = np.array([0, 2, 1, 2, 0, 2], dtype="<i8")  # per-epoch group labels, as a timing model has
np.save(out / "i64.npy", i64)
np.save(out / "i32.npy", i32)
np.save(out / "groups.npy", groups)
np.save(out / "scalar_i64.npy", np.array(big + 1, dtype="<i8"))

# numpy's results, for comparison with vtape's.
np.save(out / "i64_sum_axis1.npy", np.sum(i64, axis=1))  # wraps modulo 2^64
np.save(out / "i32_sum.npy", np.sum(i32, dtype=np.int32))  # wraps modulo 2^32
np.save(out / "i64_max_axis0.npy", np.max(i64, axis=0))
floats = np.array([2.7, -2.7, 0.5, -0.5, 1e6 + 0.9], dtype="<f8")
np.save(out / "floats.npy", floats)
np.save(out / "floats_as_i64.npy", floats.astype(np.int64))  # truncation toward zero

# A bool mask ('|b1', one byte each) and numpy's comparisons of values with NaN, infinities and signed zeros.
np.save(out / "mask.npy", np.array([[True, False, True], [False, False, True]]))
special = np.array([np.nan, -np.inf, -1.0, -0.0, 0.0, 2.0, np.inf])
a, b = np.meshgrid(special, special, indexing="ij")
np.save(out / "special.npy", special)
np.save(out / "special_compared.npy", np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b]))
