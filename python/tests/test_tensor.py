"""vtape.Tensor from Python: numpy in and out without copies, dtypes, operators, indexing, errors."""

import numpy as np
import pytest

import vtape as vt

DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_in_and_out_without_copies(dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    t = vt.asarray(a)
    assert t.shape == (3, 4)
    assert t.dtype == np.dtype(dtype)
    back = np.asarray(t)
    assert np.shares_memory(back, a)  # the tensor reads the array's memory, and numpy the tensor's
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, a)
    assert not back.flags.writeable  # tensors never change
    with pytest.raises(ValueError):
        back[0, 0] = 1


def test_a_computed_tensor_is_viewed_in_place_and_outlives_its_python_name():
    t = vt.exp(vt.asarray(np.linspace(0, 1, 5)))
    a = np.asarray(t)
    del t
    np.testing.assert_allclose(a, np.exp(np.linspace(0, 1, 5)), rtol=1e-15)
    assert np.shares_memory(a, np.asarray(a))


def test_other_layouts_and_types_are_copied_or_converted():
    a = np.arange(20.0).reshape(4, 5)
    strided = vt.asarray(a[:, ::2])
    np.testing.assert_array_equal(np.asarray(strided), a[:, ::2])
    assert not np.shares_memory(np.asarray(strided), a)
    assert vt.asarray([1.0, 2.0]).dtype == np.float64
    assert vt.asarray([1, 2]).dtype == np.int64
    assert vt.asarray(np.array([True, False])).dtype == np.bool_  # as numpy's and JAX's masks
    assert vt.asarray(np.arange(3, dtype=np.int16)).dtype == np.int64
    assert vt.asarray(2.5).shape == ()
    with pytest.raises(TypeError):
        vt.asarray(np.array(["a"]))


def test_dlpack_both_ways():
    a = np.random.default_rng(0).standard_normal((3, 2))
    t = vt.from_dlpack(a)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_operators_broadcast_and_keep_the_tensors_dtype_with_python_numbers():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    x, y = vt.asarray(a), vt.asarray(b)
    np.testing.assert_allclose(np.asarray(x + y), a + b, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(x - y * 2), a - b * 2, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(2 / (x * x + 1)), 2 / (a * a + 1), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(x**2), a**2, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(-x @ a.T), -a @ a.T, rtol=1e-14)
    np.testing.assert_array_equal(np.asarray(x > 0), a > 0)
    assert (x > 0).dtype == np.bool_
    f = vt.asarray(a.astype(np.float32))
    assert (f * 2.5).dtype == np.float32
    assert (1 + f).dtype == np.float32
    i = vt.asarray(np.arange(4))
    assert (i * 3).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(i * 3), np.arange(4) * 3)
    # numpy arrays and floats wherever a tensor is expected
    np.testing.assert_allclose(np.asarray(vt.exp(a)), np.exp(a), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(vt.maximum(x, 0.0)), np.maximum(a, 0), rtol=0)


@pytest.mark.parametrize(
    "index",
    [0, -1, (1, 2), slice(1, 3), (slice(None), 2), (Ellipsis, 1), (None, 1), (slice(0, 4, 2), slice(None, None, 3)),
     (1, Ellipsis), (slice(None), None, slice(1, 2)), slice(None, None, -1), (slice(None), slice(3, 0, -2)),
     (Ellipsis, slice(-1, -4, -1)), (1, slice(None, None, -3), 0), slice(0, 3, -1), (slice(2, -10, -1), None)],
)
def test_indexing_as_numpy(index):
    a = np.arange(60.0).reshape(4, 5, 3)
    np.testing.assert_array_equal(np.asarray(vt.asarray(a)[index]), a[index])


def test_a_backwards_slice_differentiates_and_traces_like_numpy():
    a = np.arange(12.0).reshape(4, 3)
    w = np.linspace(1.0, 2.0, 6).reshape(2, 3)
    # d/da sum(a[::-2] * w): w's rows scattered back to rows 3 and 1.
    g = vt.grad(lambda x: vt.sum(x[::-2] * w))(a)
    want = np.zeros_like(a)
    want[[3, 1]] = w
    np.testing.assert_array_equal(np.asarray(g), want)
    f = vt.jit(lambda x: x[:, ::-1] * 2.0)
    np.testing.assert_array_equal(np.asarray(f(a)), a[:, ::-1] * 2)
    np.testing.assert_array_equal(np.asarray(vt.vmap(lambda r: r[::-1])(a)), a[:, ::-1])


def test_indexing_by_an_integer_array_takes_rows_and_bad_indices_raise():
    a = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(np.asarray(vt.asarray(a)[np.array([3, 0, 3])]), a[[3, 0, 3]])
    with pytest.raises(IndexError):
        vt.asarray(a)[4]
    with pytest.raises(IndexError):
        vt.asarray(a)[0, 0, 0]


def test_conversions_and_inspection():
    t = vt.asarray(np.array([[1.5, 2.0], [3.0, 4.0]]))
    assert float(t[0, 0]) == 1.5
    assert t[1, 1].item() == 4.0
    assert t.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert len(t) == 2 and t.ndim == 2 and t.size == 4
    assert [row.tolist() for row in t] == [[1.5, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(np.asarray(t.T), np.asarray(t).T)
    assert t.sum().item() == 10.5
    np.testing.assert_array_equal(np.asarray(t.mean(axis=0)), [2.25, 3.0])
    assert "1.5" in repr(t)
    with pytest.raises(ValueError):
        bool(t)


def test_errors_are_python_exceptions_naming_the_op_and_shapes():
    with pytest.raises(vt.Error) as e:
        vt.matmul(vt.ones((2, 3)), vt.ones((4, 5)))
    assert isinstance(e.value, ValueError)
    assert "matmul" in str(e.value) and "[2, 3]" in str(e.value)


def test_not_positive_definite_carries_the_batch_index_and_the_minor():
    a = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0]), np.eye(3)])
    with pytest.raises(vt.NotPositiveDefinite) as e:
        vt.cholesky(a)
    assert isinstance(e.value, vt.Error)
    assert e.value.batch_index == 1
    assert e.value.minor == 2


def test_powers_follow_numpys_dtypes():
    """numpy's result dtypes, but for vtape's (and JAX's) promotion of a float tensor with an integer one."""
    ints = np.array([1, 2, 3])
    floats32 = np.array([1.5, 2.0, 0.5], dtype=np.float32)
    t, f = vt.asarray(ints), vt.asarray(floats32)
    cases = [(t ** 2, ints ** 2), (2 ** t, 2 ** ints), (t ** t, ints ** ints), (vt.pow(t, 3), ints ** 3),
             (t ** 2.0, ints ** 2.0), (2.0 ** t, 2.0 ** ints), (f ** 2, floats32 ** 2),
             (f ** t, (floats32 ** ints).astype(np.float32)),  # a float with an integer keeps the float's, as JAX
             (t.astype("int32") ** 2, ints.astype(np.int32) ** 2)]
    for got, want in cases:
        assert got.dtype == want.dtype, (got, want)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7)
    with pytest.raises(ValueError, match="negative integer powers"):
        t ** -1
    np.testing.assert_allclose(np.asarray(vt.grad(lambda x: vt.sum(x ** 3))(np.array([1.0, 2.0]))), [3.0, 12.0])
