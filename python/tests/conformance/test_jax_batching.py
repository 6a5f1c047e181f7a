"""JAX's tests/batching_test.py (BatchingTest), ported to vtape's vmap: in_axes and out_axes (negative ones too),
nested vmap, pytrees, per-example gradients, Jacobians built from vmap, and linear algebra under vmap.

lax.dot_general with one batch and one contracting dimension is vtape's matmul; lax.rev a backwards slice; lax.select
vtape.where; lax.linalg.triangular_solve's defaults (left_side=False, lower=False) are passed to vtape's explicitly.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import scipy.linalg

import _jtu as jtu
import vtape as vt

deliberate = pytest.mark.deliberate
unsupported = pytest.mark.unsupported


def R(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape)


def test_constant_function():
    """JAX: BatchingTest.testConstantFunction"""
    ans = vt.vmap(lambda x: 3)(np.ones(4))
    jtu.assert_all_close(ans, 3 * np.ones(4), check_dtypes=False)


def test_nested_batching_mat_mat():
    """JAX: BatchingTest.testNestedBatchingMatMat"""
    vdot = lambda a, b: vt.sum(a * b)  # noqa: E731
    matvec = vt.vmap(vdot, in_axes=(0, None))
    matmat = vt.vmap(matvec, in_axes=(None, 1), out_axes=1)
    A, B = R(4, 3), R(3, 2, seed=1)
    jtu.assert_all_close(matmat(A, B), np.dot(A, B), check_dtypes=False, rtol=1e-14)


def test_per_example_gradients():
    """JAX: BatchingTest.testPerExampleGradients (shapes, as JAX asserts, and each example's gradient)"""
    def predict(params, inputs):
        for W, b in params:
            outputs = W @ inputs + b
            inputs = vt.tanh(outputs)
        return outputs

    def loss(params, data):
        inputs, targets = data
        return vt.sum((predict(params, inputs) - targets) ** 2)

    batch_size, layer_sizes = 5, [3, 2, 4]
    rng = np.random.RandomState(0)
    params = [(rng.randn(m, n), rng.randn(m)) for m, n in zip(layer_sizes[1:], layer_sizes[:-1])]
    batch = (rng.randn(5, 3), rng.randn(5, 4))
    ans = vt.vmap(partial(vt.grad(loss), params))(batch)
    for ans_pair, param_pair in zip(ans, params):
        dW, db = ans_pair
        W, b = param_pair
        assert dW.shape == (batch_size,) + W.shape
        assert db.shape == (batch_size,) + b.shape
    for i in range(batch_size):
        gi = vt.grad(loss)(params, (batch[0][i], batch[1][i]))
        for (dW, db), (gW, gb) in zip(ans, gi):
            jtu.assert_all_close(np.asarray(dW)[i], gW, rtol=1e-12, atol=1e-14)
            jtu.assert_all_close(np.asarray(db)[i], gb, rtol=1e-12, atol=1e-14)


def _jacbwd(f, x):
    y, pullback = vt.vjp(f, x)
    std_basis = np.eye(np.size(y)).reshape((-1,) + np.shape(y))
    (jac_flat,) = vt.vmap(pullback, out_axes=np.ndim(y))(std_basis)
    return jac_flat, vt.reshape(jac_flat, np.shape(y) + np.shape(x))


def _jacfwd(f, x, pushfwd_out_axes):
    std_basis = np.eye(np.size(x)).reshape((-1,) + np.shape(x))
    if pushfwd_out_axes == (None, 0):
        y, jac_flat = vt.vmap(lambda v: vt.jvp(f, (x,), (v,)), out_axes=(None, 0))(std_basis)
    else:  # the tangents only, mapped at 0 (JAX maps y with out_axes None)
        y = f(x)
        jac_flat = vt.vmap(lambda v: vt.jvp(f, (x,), (v,))[1])(std_basis)
    return jac_flat, vt.reshape(jac_flat, np.shape(y) + np.shape(x))


def test_jacobians():
    """JAX: BatchingTest.testJacobians (JAX's jacfwd maps y with out_axes=None, which vtape lacks: the tangents alone
    here, test_jacobians_out_axes_pytree has JAX's form). JAX compares the two reshaped [x, y] stacks; they are also
    checked here against vtape.jacfwd, transposed."""
    A, b, x = R(4, 3), R(4, seed=1), R(3, seed=2)
    f = lambda x: vt.tanh(A @ x + b)  # noqa: E731
    fwd_flat, fwd = _jacfwd(f, x, 0)
    bwd_flat, bwd = _jacbwd(f, x)
    jtu.assert_all_close(fwd, bwd, check_dtypes=False)
    jtu.assert_all_close(np.asarray(bwd_flat).T, vt.jacfwd(f)(x), rtol=1e-14, atol=1e-15)
    jtu.assert_all_close(np.asarray(fwd_flat).T, vt.jacfwd(f)(x), rtol=1e-14, atol=1e-15)


def test_jacobians_out_axes_pytree():
    """JAX: BatchingTest.testJacobians (its jacfwd: vmap(pushfwd, out_axes=(None, 0)))"""
    A, b, x = R(4, 3), R(4, seed=1), R(3, seed=2)
    f = lambda x: vt.tanh(A @ x + b)  # noqa: E731
    jtu.assert_all_close(_jacfwd(f, x, (None, 0))[1], _jacbwd(f, x)[1], check_dtypes=False)


def test_batch_of_compile():
    """JAX: BatchingTest.testBatchOfCompile"""
    side = []

    @vt.jit
    def f(x):
        side.append(None)
        return x + x

    g = vt.jit(vt.vmap(f))
    jtu.assert_all_close(g(np.ones(2)), 2 * np.ones(2), check_dtypes=False)
    assert len(side) == 1
    jtu.assert_all_close(g(2 * np.ones(2)), 4 * np.ones(2), check_dtypes=False)
    assert len(side) == 1


def test_slice_lax():
    """JAX: BatchingTest.testSliceLax"""
    x = R(5, 10)
    jtu.assert_all_close(vt.vmap(lambda x: vt.slice(x, 0, 2, 4))(x), x[:, 2:4], check_dtypes=False)


def test_slice_numpy():
    """JAX: BatchingTest.testSliceNumpy"""
    x = R(10, 5, 3, 7)
    jtu.assert_all_close(vt.vmap(lambda x: x[:, 2])(x), x[:, :, 2], check_dtypes=False)


def test_rev_lax():
    """JAX: BatchingTest.testRevLax (lax.rev(x, [0]) is x[::-1])"""
    fun = lambda x: x[::-1]  # noqa: E731
    x = R(2, 3)
    jtu.assert_all_close(vt.vmap(fun)(x), x[:, ::-1], check_dtypes=False)
    jtu.assert_all_close(vt.vmap(fun, (1,), 1)(x), x[::-1, :], check_dtypes=False)


@pytest.mark.parametrize("in_axes, out_axes, expected", [
    (0, 0, lambda x: x[:, :, ::-1]),
    ((1,), 1, lambda x: x[:, :, ::-1]),
    ((2,), 2, lambda x: x[:, ::-1, :]),
])
def test_rev_numpy(in_axes, out_axes, expected):
    """JAX: BatchingTest.testRevNumpy"""
    x = R(3, 2, 4)
    jtu.assert_all_close(vt.vmap(lambda x: x[:, ::-1], in_axes, out_axes)(x), expected(x), check_dtypes=False)


def test_np_maximum():
    """JAX: BatchingTest.testNpMaximum"""
    x = R(10, 5, 3, 7)
    jtu.assert_all_close(vt.vmap(lambda x: vt.maximum(x, 0.0))(x), np.maximum(x, 0.0), check_dtypes=False)


def test_np_gtr_than():
    """JAX: BatchingTest.testNpGtrThan"""
    x = R(10, 5, 3, 7)
    ans = vt.vmap(lambda x: x > 1.0)(x)
    assert ans.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(ans), x > 1.0)


def test_np_maximum_per_example_grad():
    """JAX: BatchingTest.testNpMaximumPerExampleGrad"""
    x, W = R(10, 5), R(5, 5, seed=1)
    fun = lambda W, x: vt.sum(vt.maximum(x @ W, 0.0) ** 2)  # noqa: E731
    ans = vt.vmap(partial(vt.grad(fun), W))(x)
    for i in range(10):
        x_ex = x[i:i + 1]
        expected = (2.0 * np.maximum(W.T @ x_ex.T, 0.0) @ x_ex).T
        jtu.assert_all_close(np.asarray(ans)[i], expected, check_dtypes=False, rtol=1e-14, atol=1e-14)


DOT_GENERAL = [
    pytest.param((10, 3, 4, 5), (10, 3, 5, 6), 0, lambda x, y: np.einsum("bnij,bnjk->bnik", x, y), id="in_axes=0"),
    pytest.param((3, 4, 10, 5), (3, 10, 5, 6), (2, 1), lambda x, y: np.einsum("nibj,nbjk->bnik", x, y),
                 id="in_axes=(2, 1)"),
    pytest.param((3, 4, 5, 10), (3, 5, 6), (3, None), lambda x, y: np.einsum("nijb,njk->bnik", x, y),
                 id="in_axes=(3, None)"),
    pytest.param((3, 4, 5), (3, 5, 10, 6), (None, 2), lambda x, y: np.einsum("nij,njbk->bnik", x, y),
                 id="in_axes=(None, 2)"),
]


@pytest.mark.parametrize("xshape, yshape, in_axes, expected", DOT_GENERAL)
def test_dot_general(xshape, yshape, in_axes, expected):
    """JAX: BatchingTest.testDotGeneral (dot_general with batch dims ((0,), (0,)) and contracting ((2,), (1,)) is
    vtape's batched matmul)"""
    x, y = R(*xshape), R(*yshape, seed=1)
    ans = vt.vmap(vt.matmul, in_axes=in_axes)(x, y)
    jtu.assert_all_close(ans, expected(x, y), rtol=1e-14, atol=1e-14)


def test_dot_general_vector():
    """JAX: BatchingTest.testDotGeneral (contracting two vectors, in_axes=(None, 1))"""
    x, y = R(4), R(4, 10, seed=1)
    ans = vt.vmap(lambda x, y: vt.sum(x * y), in_axes=(None, 1))(x, y)
    jtu.assert_all_close(ans, np.stack([x @ y[..., i] for i in range(10)]), rtol=1e-14, atol=1e-14)


def test_dot():
    """JAX: BatchingTest.testDot (gufunc-style nested vmaps)"""
    def vecvec(a, b):
        dot = lambda a, b: vt.sum(a * b)  # noqa: E731
        for ndim in range(1, max(a.ndim, b.ndim)):
            a_ax = 0 if a.ndim > ndim else None
            b_ax = 0 if b.ndim > ndim else None
            dot = vt.vmap(dot, in_axes=(a_ax, b_ax))
        return dot(a, b)

    assert vecvec(np.zeros((3,)), np.zeros((3,))).shape == ()
    assert vecvec(np.zeros((2, 3)), np.zeros((3,))).shape == (2,)
    assert vecvec(np.zeros((4, 2, 3)), np.zeros((3,))).shape == (4, 2)
    a, b = R(4, 2, 3), R(3, seed=1)
    jtu.assert_all_close(vecvec(a, b), a @ b, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("xs_shape, ys_shape, in_axes, expected, tol", [
    pytest.param((10, 3), (10, 3), 0, lambda xs, ys: np.einsum("ni,ni->n", xs, ys), None, id="testDot2"),
    pytest.param((5, 8, 10), (10, 1), (1, None), lambda xs, ys: np.einsum("inj,jk->nik", xs, ys), 1e-2,
                 id="testDot3"),
    pytest.param((3, 2), (3,), (1, None), lambda xs, ys: np.einsum("ij,i->j", xs, ys), 1e-2, id="testDot4"),
])
def test_dot_234(xs_shape, ys_shape, in_axes, expected, tol):
    """JAX: BatchingTest.testDot2, testDot3, testDot4"""
    xs, ys = R(*xs_shape), R(*ys_shape, seed=1)
    ans = vt.vmap(vt.matmul, in_axes=in_axes)(xs, ys)
    jtu.assert_all_close(ans, expected(xs, ys), check_dtypes=False, atol=tol, rtol=tol)


def test_concatenate():
    """JAX: BatchingTest.testConcatenate"""
    r = lambda *shape: np.random.RandomState(sum(shape)).randn(*shape).astype(np.float32)  # noqa: E731
    fun = lambda *args: vt.concatenate(list(args), 0)  # noqa: E731
    x, y, z = r(10, 2, 3), r(1, 10, 3), r(4, 3)
    ans = vt.vmap(fun, in_axes=(0, 1, None))(x, y, z)
    expected = np.concatenate([x, np.swapaxes(y, 0, 1), np.broadcast_to(z, (10, 4, 3))], 1)
    jtu.assert_all_close(ans, expected, check_dtypes=False)
    fun = lambda *args: vt.concatenate(list(args), 1)  # noqa: E731
    x, y, z = r(10, 2, 1), r(2, 3), r(2, 4, 10)
    ans = vt.vmap(fun, in_axes=(0, None, 2))(x, y, z)
    expected = np.concatenate([x, np.broadcast_to(y, (10, 2, 3)), np.moveaxis(z, 2, 0)], 2)
    jtu.assert_all_close(ans, expected, check_dtypes=False)


@pytest.mark.parametrize("jacfun", [vt.jacrev, vt.jacfwd], ids=["jacrev", "jacfwd"])
def test_jacobian_issue54(jacfun):
    """JAX: BatchingTest.testJacobianIssue54 (JAX asserts no crash; here the Jacobian of the identity)"""
    func = lambda xs: vt.stack(list(xs))  # noqa: E731  (jnp.array(list(xs)))
    jac = jacfun(func)(np.ones((5, 1)))
    jtu.assert_all_close(jac, np.eye(5).reshape(5, 1, 5, 1), check_dtypes=False)


def test_hessian():
    """JAX: BatchingTest.testHessian (maximum's derivative at a tie is 1/2, as JAX's)"""
    fun = lambda x, t: vt.sum(vt.maximum(x, 0.0) ** 2) + t  # noqa: E731
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    ans = vt.hessian(lambda x: fun(x, 0.0))(x)
    expected = np.diag([0.0, 0.0, 0.5, 2.0, 2.0])
    jtu.assert_all_close(ans, expected, check_dtypes=False)


def test_dynamic_slice():
    """JAX: BatchingTest.testDynamicSlice (x[i] with i a tensor: vtape's take)"""
    x = np.arange(30).reshape((10, 3))
    ans = vt.vmap(lambda x, i: x[i], in_axes=(0, None))(x, np.array(1))
    jtu.assert_all_close(ans, x[:, 1], check_dtypes=False)
    idx = np.array([0, 1, 2, 1, 0] * 2)
    ans = vt.vmap(lambda x, i: x[i], in_axes=(0, 0))(x, idx)
    jtu.assert_all_close(ans, x[np.arange(10), idx], check_dtypes=False)
    x = np.arange(3)
    ans = vt.vmap(lambda x, i: x[i], in_axes=(None, 0))(x, idx)
    jtu.assert_all_close(ans, x[idx], check_dtypes=False)


def test_dynamic_update_slice():
    """JAX: BatchingTest.testDynamicUpdateSlice"""
    x, y = R(10, 3), R(10, seed=1)
    ans = vt.vmap(lambda x, y, i: vt.lax.dynamic_update_index_in_dim(x, y, i, axis=0), in_axes=(0, 0, None))(x, y, 1)
    expected = x.copy()
    expected[:, 1] = y
    jtu.assert_all_close(ans, expected, check_dtypes=False)


def test_select():
    """JAX: BatchingTest.testSelect (lax.select is vtape.where; predicates as numpy bools)"""
    ans = vt.vmap(vt.where)(np.array([True, False]), np.array([0, 1]), np.array([2, 3]))
    jtu.assert_all_close(ans, np.array([0, 3]))
    ans = vt.vmap(vt.where, (0, None, None))(np.array([False, True]), np.array([0, 1]), np.array([2, 3]))
    jtu.assert_all_close(ans, np.array([[2, 3], [0, 1]]))
    ans = vt.vmap(vt.where, (None, 0, None))(True, np.array([0, 1], np.float32), np.array(3, np.float32))
    jtu.assert_all_close(ans, np.array([0, 1], np.float32))
    ans = vt.vmap(vt.where, (0, 0, None))(np.array([False, True]), np.array([0, 1], np.float32),
                                         np.array(3, np.float32))
    jtu.assert_all_close(ans, np.array([3, 1], np.float32))
    ans = vt.vmap(vt.where, (0, None, 1), 1)(np.array([False, True]), np.array([2], np.float32),
                                            np.array([[3, 4]], np.float32))
    jtu.assert_all_close(ans, np.array([[3, 2]], np.float32))


def test_lax_linalg_cholesky():
    """JAX: BatchingTest.testLaxLinalgCholesky"""
    a = R(10, 5, 5).astype(np.float32)
    a = np.matmul(a, np.swapaxes(a, -1, -2))
    jtu.assert_all_close(vt.vmap(vt.cholesky)(a), np.linalg.cholesky(a), check_dtypes=False, atol=1e-3)
    b = R(10, 5, 5, seed=1).astype(np.float32)
    b = np.matmul(b, np.swapaxes(b, -1, -2))
    b_trans = np.swapaxes(b, 0, 1)
    ans = vt.vmap(vt.cholesky, in_axes=1, out_axes=0)(b_trans)
    jtu.assert_all_close(ans, np.linalg.cholesky(b), check_dtypes=False, rtol=1e-4)


def _lax_triangular_solve(a, b):
    """lax.linalg.triangular_solve's defaults: X A = B with A's upper triangle (left_side=False, lower=False)."""
    return vt.triangular_solve(a, b, lower=False, left=False)


def _scipy_right_upper_solve(a, b):
    return scipy.linalg.solve_triangular(a, b.T, trans=1, lower=False).T


@pytest.mark.parametrize("in_axes, index", [
    pytest.param((1, 2), lambda a, b, i: (a[:, i], b[..., i]), id="(1, 2)"),
    pytest.param((None, 2), lambda a, b, i: (a[:, 0], b[..., i]), id="(None, 2)"),
    pytest.param((1, None), lambda a, b, i: (a[:, i], b[..., 0]), id="(1, None)"),
])
def test_lax_linalg_triangular_solve(in_axes, index):
    """JAX: BatchingTest.testLaxLinalgTriangularSolve"""
    a = R(4, 10, 4).astype(np.float32)
    a += np.eye(4, dtype=np.float32)[:, None, :]
    b = R(5, 4, 10, seed=1).astype(np.float32)
    args = (a if in_axes[0] is not None else a[:, 0], b if in_axes[1] is not None else b[..., 0])
    ans = vt.vmap(_lax_triangular_solve, in_axes=in_axes)(*args)
    expected = np.stack([_scipy_right_upper_solve(*index(a, b, i)) for i in range(10)])
    jtu.assert_all_close(ans, expected.astype(np.float32), atol=1e-5, rtol=1e-5)


def test_numpy_indexing1():
    """JAX: BatchingTest.testNumpyIndexing1"""
    a = np.arange(2 * 3 * 4).reshape((2, 3, 4))
    ind = np.array([[0, 1], [2, 0]])
    f = lambda a, ind: a[:, ind]  # noqa: E731
    expected = np.stack([a[:, ind[i, :]] for i in range(ind.shape[0])])
    assert np.all(np.asarray(vt.vmap(f, (None, 0))(a, ind)) == expected)


def test_numpy_indexing2():
    """JAX: BatchingTest.testNumpyIndexing2"""
    a = np.arange(2 * 3 * 4).reshape((2, 3, 4))
    f = lambda a: a[:, np.array([0, 2])]  # noqa: E731
    expected = np.stack([a[:, i, :][:, [0, 2]] for i in range(a.shape[1])], axis=1)
    assert np.all(np.asarray(vt.vmap(f)(a)) == expected)


def test_transpose():
    """JAX: BatchingTest.testTranspose"""
    x = np.arange(4 * 3 * 3).reshape((4, 3, 3))
    jtu.assert_all_close(vt.vmap(lambda x: x + x.T)(x), x + np.swapaxes(x, -1, -2), check_dtypes=False)


@pytest.mark.parametrize("shape, perm, in_axes, expected_perm", [
    ((6, 3, 4, 5), (1, 0, 2), 0, (0, 2, 1, 3)),
    ((6, 3, 4, 5), (1, 2, 0), 0, (0, 2, 3, 1)),
    ((3, 4, 6, 5), (1, 2, 0), 2, (2, 1, 3, 0)),
])
def test_transpose_permutation(shape, perm, in_axes, expected_perm):
    """JAX: BatchingTest.testTransposePermutation"""
    x = np.arange(6 * 3 * 4 * 5).reshape(shape)
    ans = vt.vmap(lambda x: vt.transpose(x, list(perm)), in_axes=in_axes)(x)
    jtu.assert_all_close(ans, np.transpose(x, expected_perm), check_dtypes=False)


def test_issue354():
    """JAX: BatchingTest.testIssue354"""
    rng = np.random.RandomState(0)
    psd_mat = rng.randn(20, 10)
    psd_mat = psd_mat.T.dot(psd_mat)
    vec = rng.randn(10)

    def f(scale):
        scaled_mat = scale[None] * psd_mat
        chol = vt.cholesky(scaled_mat)
        return -0.5 * vt.sum((chol @ vec) ** 2)

    vmapped_f = vt.vmap(f)
    vmapped_f_grad = vt.grad(lambda x: vt.sum(vmapped_f(x)))
    scales = np.array([[0.1], [0.2], [0.3], [0.4], [0.5]])
    ans = vmapped_f_grad(scales)
    expected = np.stack([np.asarray(vt.grad(f)(scale)) for scale in scales])
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=jtu.default_gradient_tolerance)


def test_empty_tuples():
    """JAX: BatchingTest.testEmptyTuples"""
    result = vt.vmap(lambda x, _: x + 1)(np.array([0, 1]), ())
    jtu.assert_all_close(result, np.array([1, 2]), check_dtypes=False)
    result, empty_tuple = vt.vmap(lambda x: (x + 1, ()))(np.array([0, 1]))
    jtu.assert_all_close(result, np.array([1, 2]), check_dtypes=False)
    assert empty_tuple == ()


def test_index_add_batched_indexes_only():
    """JAX: BatchingTest.testIndexAddBatchedIndexesOnly"""
    f = lambda x, idx, y: vt.asarray(x).at[idx].add(y)  # noqa: E731
    result = vt.vmap(f, (None, 0, None))(np.zeros((10,)), np.arange(10), 1.0)
    jtu.assert_all_close(result, np.eye(10), check_dtypes=False)


@pytest.mark.parametrize("in_axes, axis", [(-3, (1, 2)), (-2, (0, 2)), (-1, (0, 1))])
def test_negative_in_axes(in_axes, axis):
    """JAX: BatchingTest.testNegativeAxes (in_axes)"""
    x = np.arange(3 * 4 * 5).reshape(3, 4, 5)
    jtu.assert_all_close(vt.vmap(vt.sum, in_axes=in_axes)(x), np.sum(x, axis=axis))


@pytest.mark.parametrize("out_axes, perm", [(-3, (0, 1, 2)), (-2, (1, 0, 2)), (-1, (1, 2, 0))])
def test_negative_out_axes(out_axes, perm):
    """JAX: BatchingTest.testNegativeAxes (out_axes)"""
    x = np.arange(3 * 4 * 5).reshape(3, 4, 5)
    jtu.assert_all_close(vt.vmap(lambda y: y, in_axes=0, out_axes=out_axes)(x), x.transpose(perm))


def test_negative_axes_errors():
    """JAX: BatchingTest.testNegativeAxes (axis -4 of a rank-3 argument, or of a rank-2 result)"""
    x = np.arange(3 * 4 * 5).reshape(3, 4, 5)
    with pytest.raises(ValueError, match="-4"):
        vt.vmap(vt.sum, in_axes=-4)(x)
    with pytest.raises(ValueError, match="-4"):
        vt.vmap(lambda y: y, in_axes=0, out_axes=-4)(x)


def test_negative_axes_out_axes_pytree():
    """JAX: BatchingTest.testNegativeAxes (out_axes=(0, -1) for a pytree result)"""
    out = vt.vmap(lambda *xs: xs, in_axes=(0, None), out_axes=(0, -1))(np.arange(5), 7)[1]
    jtu.assert_all_close(out, np.full((5,), 7), check_dtypes=False)


def test_vmap_kwargs():
    """JAX: BatchingTest.testVmapKwargs"""
    f = lambda a, b: (2 * a, 3 * b)  # noqa: E731
    x = vt.vmap(f)(np.array([1]), np.array([2]))
    y = vt.vmap(f)(a=np.array([1]), b=np.array([2]))
    jtu.assert_all_close(x, y)
