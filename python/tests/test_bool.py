"""Bool tensors from Python, written as a numpy or JAX user writes masks, checked against numpy."""

import numpy as np
import pytest

import vtape as vt

SPECIAL = np.array([np.nan, -np.inf, -1.0, -0.0, 0.0, 2.0, np.inf])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_comparison_operators_return_bools_as_numpy(dtype):
    values = SPECIAL if np.dtype(dtype).kind == "f" else np.array([-3, 0, 1, 7, 2**40 if dtype == np.int64 else 9])
    a = values.astype(dtype)[:, None]
    b = values.astype(dtype)[None, :]
    x, y = vt.asarray(a), vt.asarray(b)
    for got, want in [(x < y, a < b), (x <= y, a <= b), (x > y, a > b), (x >= y, a >= b), (x == y, a == b),
                      (x != y, a != b), (x > 0, a > 0), (0 >= x, 0 >= a), (x != 0.5, a != 0.5)]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(np.asarray(got), want)


def test_logical_operators_and_functions():
    p = np.array([False, False, True, True])
    q = np.array([False, True, False, True])
    P, Q = vt.asarray(p), vt.asarray(q)
    assert P.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(P & Q), p & q)
    np.testing.assert_array_equal(np.asarray(P | Q), p | q)
    np.testing.assert_array_equal(np.asarray(P ^ Q), p ^ q)
    np.testing.assert_array_equal(np.asarray(~P), ~p)
    np.testing.assert_array_equal(np.asarray(True & Q), True & q)
    np.testing.assert_array_equal(np.asarray(p | Q), p | q)
    # The functions read any dtype as booleans (nonzero is true), as numpy's.
    x = np.array([0.0, -0.0, np.nan, 2.0])
    np.testing.assert_array_equal(np.asarray(vt.logical_not(x)), np.logical_not(x))
    np.testing.assert_array_equal(np.asarray(vt.logical_and(x, q)), np.logical_and(x, q))
    np.testing.assert_array_equal(np.asarray(vt.logical_xor(x, 1)), np.logical_xor(x, 1))
    # &, | and ~ on numbers would be numpy's bitwise ops, which vtape does not have: a clear error.
    with pytest.raises(TypeError, match="bitwise"):
        vt.asarray(np.arange(3)) & vt.asarray(np.arange(3))
    with pytest.raises(TypeError, match="bitwise"):
        ~vt.asarray(np.arange(3))


def test_masks_in_arithmetic_promote_as_numpy():
    m = np.array([True, False, True])
    M = vt.asarray(m)
    x32 = np.array([1.5, 2.5, -3.0], dtype=np.float32)
    assert (M * vt.asarray(x32)).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(M * vt.asarray(x32)), m * x32)
    assert (M * 0.5).dtype == np.float64
    assert (1 - M).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(1 - M), 1 - m)
    np.testing.assert_array_equal(np.asarray(M + M), m + m)  # or, as numpy
    assert (M * M).dtype == np.bool_
    with pytest.raises(vt.Error, match="sub: of two bool tensors"):
        M - M
    with pytest.raises(vt.Error, match="exp: takes floating-point tensors, got bool"):
        vt.exp(M)
    np.testing.assert_array_equal(np.asarray(M.astype(np.float32)), m.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(vt.astype(np.array([0.0, np.nan, -2.0]), bool)), [False, True, True])


def test_reductions_of_masks_as_numpy():
    m = np.array([[True, False, True], [True, False, False]])
    M = vt.asarray(m)
    assert M.sum().dtype == np.int64 and int(M.sum()) == 3
    np.testing.assert_array_equal(np.asarray(vt.sum(M, 1)), m.sum(1))
    np.testing.assert_array_equal(np.asarray(vt.mean(M, 0)), m.mean(0))
    np.testing.assert_array_equal(np.asarray(M.any(1)), m.any(1))
    np.testing.assert_array_equal(np.asarray(M.all(0)), m.all(0))
    np.testing.assert_array_equal(np.asarray(vt.max(M, 0)), m.max(0))
    assert bool(vt.all(np.zeros((0,), bool))) and not bool(vt.any(np.zeros((0,), bool)))
    assert bool(vt.any(M)) is True


def test_where_and_gradients_through_masks():
    def f(x):
        return vt.sum(vt.where(x > 0, x * x, -x) * (x < 1))

    x = np.array([-2.0, -0.5, 0.25, 0.75, 1.5, 3.0])
    expected = np.where((x > 0) & (x < 1), 2 * x, np.where(x <= 0, -1.0, 0.0))
    np.testing.assert_array_equal(np.asarray(vt.grad(f)(x)), expected)
    np.testing.assert_array_equal(np.asarray(vt.jit(vt.grad(f))(x)), expected)
    xs = np.linspace(-1.05, 1.95, 18).reshape(3, 6)
    np.testing.assert_array_equal(np.asarray(vt.jit(vt.vmap(vt.grad(f)))(xs)),
                                  np.stack([np.asarray(vt.grad(f)(r)) for r in xs]))
    with pytest.raises(vt.Error, match="bool .*which has no derivative"):
        vt.grad(lambda m: vt.sum(m))(np.array([True]))


def test_jit_and_vmap_take_and_return_masks():
    @vt.jit
    def split(x, keep):
        return x > 0, vt.sum(vt.where(keep, x, 0.0))

    x = np.array([[1.0, -2.0, 3.0], [-1.0, 5.0, 0.0]])
    keep = np.array([[True, False, True], [False, True, True]])
    positive, total = vt.vmap(split)(x, keep)
    assert positive.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(positive), x > 0)
    np.testing.assert_array_equal(np.asarray(total), np.where(keep, x, 0.0).sum(1))
    out = vt.vmap(lambda k: vt.cond(vt.any(k), lambda: 1.0, lambda: 0.0))(np.array([[True, False], [False, False]]))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 0.0])


def test_masks_convert_to_numpy_and_python():
    m = vt.asarray(np.array([True, False]))
    a = np.asarray(m)
    assert a.dtype == np.bool_
    np.testing.assert_array_equal(a, [True, False])
    assert m.tolist() == [True, False]
    assert bool(m[0]) is True and bool(m[1]) is False
    assert repr(m) == "Tensor([ True, False], dtype=bool)"
    assert vt.asarray(True).dtype == np.bool_
    assert vt.zeros((2,), dtype=bool).dtype == np.bool_
    assert vt.asarray([1.0, 2.0]).astype("bool").dtype == np.bool_
