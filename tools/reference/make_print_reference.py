#!/usr/bin/env python3
"""How numpy prints arrays, for tests/test_print.cpp: vtape prints tensors as numpy's array_repr
prints arrays (numpy's own code writes the expected text here), with "Tensor(" for "array(", the
dtype always shown, and ", batch=B" after it for a batched tensor.

Writes tests/data/print/cases.txt, one case after another:

    case NAME
    dtype f64|f32|i64|i32
    shape D0 D1 ...          (nothing after "shape" for a scalar)
    batched 0|1              (1: the tensor is batched, its first axis the batch)
    options PRECISION THRESHOLD EDGEITEMS LINEWIDTH
    spec -1|N                (N: formatted with {:.N})
    values V0 V1 ...         (row-major; floats as Python's repr, which reads back exactly)
    expected LINES
    ...LINES lines of text...

    python3 tools/reference/make_print_reference.py
"""
import pathlib

import numpy as np

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "print"
out.mkdir(parents=True, exist_ok=True)

NAMES = {np.float64: "float64", np.float32: "float32", np.int64: "int64", np.int32: "int32"}
CODES = {np.float64: "f64", np.float32: "f32", np.int64: "i64", np.int32: "i32"}
DEFAULT = (8, 1000, 3, 75)


def tensor_repr(a, options, batch):
    """numpy's array_repr (numpy/_core/arrayprint.py, _array_repr_implementation) with vtape's
    class name, the dtype always shown, a batched tensor's batch size after it, and shapes written
    as vtape writes them ([2, 3], not (2, 3))."""
    precision, threshold, edgeitems, linewidth = options
    prefix = "Tensor("
    with np.printoptions(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth):
        lst = np.array2string(a, linewidth, separator=", ", prefix=prefix, suffix=")")
    extras = []
    if (a.size == 0 and a.shape != (0,)) or a.size > threshold:
        extras.append("shape=[" + ", ".join(str(d) for d in a.shape) + "]")
    extras.append("dtype=" + NAMES[a.dtype.type])
    if batch:
        extras.append(f"batch={batch}")
    arr_str = prefix + lst + ","
    extra_str = ", ".join(extras) + ")"
    last_line_len = len(arr_str) - (arr_str.rfind("\n") + 1)
    spacer = " "
    if last_line_len + len(extra_str) + 1 > linewidth:
        spacer = "\n" + " " * len(prefix)
    return arr_str + spacer + extra_str


rng = np.random.default_rng(20261203)
cases = []


def case(name, a, options=DEFAULT, spec=-1, batched=False):
    a = np.asarray(a)
    shown_precision = spec if spec >= 0 else options[0]
    expected = tensor_repr(a, (shown_precision,) + tuple(options[1:]), a.shape[0] if batched else None)
    cases.append((name, a, options, spec, batched, expected))


f64, f32 = np.float64, np.float32
case("matrix of whole floats", np.arange(4, dtype=f64).reshape(2, 2))
case("a 100 x 100 matrix is summarised", rng.standard_normal((100, 100)))
case("a long vector wraps", rng.standard_normal(40))
case("integers align right", np.array([1, -20, 300], dtype=np.int64))
case("int32 matrix", np.array([[7, -8, 9], [10, 11, -12]], dtype=np.int32))
case("small values print in scientific notation", np.array([1e-5, 1.5e-5, 2.0]))
case("large values print in scientific notation", np.array([1e10, 2.0, -3.5]))
case("a wide range prints in scientific notation", np.array([0.001, 1.0, 2.5]))
case("three-digit exponents pad the others", np.array([1e-5, 1e100, 3e-300]))
case("nan and inf take the column width", np.array([np.nan, 1.25, -np.inf, np.inf, -2.0]))
case("only non-finite values", np.array([np.nan, np.inf, -np.inf]))
case("float32 prints its shortest digits", np.array([0.1, 1 / 3, 2.5], dtype=f32))
case("float32 in scientific notation", np.array([1.2345678e-5, 0.1, 7.0], dtype=f32))
case("three axes", rng.standard_normal((2, 3, 4)))
case("exactly the threshold is not summarised", np.arange(1000, dtype=f64).reshape(10, 10, 10))
case("three axes summarised", np.arange(1331, dtype=f64).reshape(11, 11, 11))
case("precision option", rng.standard_normal((3, 3)), options=(3, 1000, 3, 75))
case("precision from the format spec", rng.standard_normal(4), spec=2)
case("precision zero", np.array([1.5, 2.25, -0.75]), spec=0)
case("edge items and threshold options", np.arange(30, dtype=f64).reshape(5, 6), options=(8, 10, 2, 75))
case("a narrow line width", rng.standard_normal(12), options=(8, 1000, 3, 40))
case("line width that pushes the dtype to its own line", np.arange(9, dtype=f64) * 1.5, options=(8, 1000, 3, 60))
case("a scalar", np.array(1.5))
case("a whole scalar", np.array(1.0))
case("a negative float32 scalar", np.array(-0.25, dtype=f32))
case("an empty vector", np.zeros(0))
case("an empty matrix", np.zeros((0, 3)))
case("batched rows", rng.standard_normal((3, 2)), batched=True)
case("negative zero and whole floats", np.array([-0.0, 1.0, 10.0, 100.0]))
case("eight digits at most", np.array([1 / 3, 2 / 3, 0.5]))
case("signs and ragged fractions", np.array([-1.5, 2.25, 3.0]))
case("long rows wrap inside a matrix", rng.standard_normal((3, 12)))
case("big integers wrap", np.arange(30, dtype=np.int64) * 1234567891011)
case("a summarised vector", np.linspace(0.0, 1.0, 2001))
case("integers summarised", np.arange(2000, dtype=np.int32).reshape(40, 50))
case("a summarised batch", rng.standard_normal((1200, 2)), batched=True)
case("float32 in scientific notation shows each value's own digits", np.array([1e-5, 0.1, 0.123456789], dtype=f32))
case("float32 small random values", (rng.standard_normal(6) * 1e-3).astype(f32))
case("float32 goes scientific from 1e6", np.array([2e6, 3e6], dtype=f32))
case("float32 compares 1e-4 in float32", np.array([1e-4, 0.05], dtype=f32))
case("float32 ratio of exactly 1000 in float32", np.array([0.56146026, 561.46027], dtype=f32))
case("float64 at precision 20 in scientific notation", np.array([0.1, 1e-5]), options=(20, 1000, 3, 75))
case("float64 just under 1e8", np.array([99999999.0, 1.0]))
case("one edge item", np.arange(50, dtype=f64).reshape(5, 10), options=(8, 10, 1, 75))
case("edge items past the axis", np.arange(20, dtype=f64).reshape(4, 5), options=(8, 3, 4, 75))
case("threshold zero summarises small tensors", np.arange(7, dtype=f64), options=(8, 0, 3, 75))
case("a line width of one", np.arange(4, dtype=f64), options=(8, 1000, 3, 1))
case("rank nine summarised", np.arange(3 ** 9, dtype=np.int32).reshape((3,) * 9), options=(8, 1000, 1, 75))
case("int64 extremes", np.array([-9223372036854775808, 9223372036854775807, 0], dtype=np.int64))
case("subnormals", np.array([5e-324, 1e-310, 0.0]))
case("an empty rank-3 tensor", np.zeros((2, 0, 3)))


def value_text(v, code):
    if code in ("i64", "i32"):
        return str(int(v))
    return repr(float(v))


with open(out / "cases.txt", "w") as f:
    f.write("# numpy's array_repr of each case (tools/reference/make_print_reference.py, numpy "
            + np.__version__ + ")\n")
    for name, a, options, spec, batched, expected in cases:
        code = CODES[a.dtype.type]
        f.write(f"case {name}\n")
        f.write(f"dtype {code}\n")
        f.write("shape" + "".join(f" {d}" for d in a.shape) + "\n")
        f.write(f"batched {int(batched)}\n")
        f.write("options " + " ".join(str(o) for o in options) + "\n")
        f.write(f"spec {spec}\n")
        f.write("values" + "".join(" " + value_text(v, code) for v in a.ravel()) + "\n")
        lines = expected.split("\n")
        f.write(f"expected {len(lines)}\n")
        for line in lines:
            f.write(line + "\n")
print(f"wrote {len(cases)} cases to {out / 'cases.txt'}")
