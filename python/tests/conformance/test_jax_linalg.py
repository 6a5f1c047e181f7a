"""JAX's tests/linalg_test.py (NumpyLinalgTest, ScipyLinalgTest) and tests/eigh_test.py (EighTest, where JAX keeps
its eigh tests), ported to vtape's cholesky, logdet, solve, cho_factor/cho_solve, triangular_solve, qr and eigh.

vtape's logdet and solve are for symmetric positive definite matrices (a Cholesky), and read the lower triangle: JAX's
slogdet and solve of general matrices are ported on SPD inputs, the general case counted as a deliberate difference.
Where a factorization reads one triangle, gradients are checked through the symmetrized input, (a + a^T) / 2, as JAX
checks eigh through symmetrize_input=True ("the eigh jvp rule is only correct for tangents in the symmetric
subspace"). JAX's linalg tests check gradients of cholesky, slogdet, eigh and triangular_solve; the gradients of solve,
cho_solve and qr are checked here the same way (jtu.check_grads at order 2, both modes, JAX's default tolerances).
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
FLOATS = [np.float32, np.float64]
T = lambda x: np.swapaxes(x, -1, -2)  # noqa: E731


def defect(why: str):
    return pytest.mark.xfail(strict=True, reason=f"defect: {why}")


def sym(a):
    """(a + a^T) / 2 on vtape tensors: the derivative of a factorization that reads one triangle, as JAX's
    symmetrize_input."""
    a = vt.asarray(a)
    return (a + vt.swapaxes(a, -1, -2)) * 0.5


def _rng(seed=0):
    return np.random.RandomState(seed)


def _spd(rng, shape, dtype):
    """JAX's testCholesky input: a a^T of a random factor [..., n, 2n]."""
    a = rng(shape[:-1] + (2 * shape[-1],), dtype)
    return np.matmul(a, T(a))


# --- cholesky ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 5, 5), (200, 200), (1000, 0, 0)], ids=str)
def test_cholesky(shape, dtype):
    """JAX: NumpyLinalgTest.testCholesky (upper=False)"""
    rng = jtu.rand_default(_rng())
    args_maker = lambda: [_spd(rng, shape, dtype)]  # noqa: E731
    jtu.check_against_numpy(np.linalg.cholesky, vt.cholesky, args_maker, tol=1e-3)
    jtu.compile_and_check(vt.cholesky, args_maker)
    if np.finfo(dtype).bits == 64:
        jtu.check_grads(vt.cholesky, args_maker(), order=2)


def test_cholesky_upper():
    """JAX: NumpyLinalgTest.testCholesky (upper=True)"""
    rng = jtu.rand_default(_rng())
    a = _spd(rng, (4, 4), np.float64)
    jtu.assert_all_close(vt.numpy.linalg.cholesky(a, upper=True), np.linalg.cholesky(a, upper=True), rtol=1e-3, atol=1e-3)


@pytest.mark.filterwarnings("ignore:Casting complex values")
def test_cholesky_complex_refused_or_right():
    """JAX: NumpyLinalgTest.testCholesky (complex128)"""
    rng = jtu.rand_default(_rng())
    a = rng((4, 8), np.float64) + 1j * rng((4, 8), np.float64)
    a = a @ np.conj(a.T)
    try:
        ans = vt.cholesky(a)
    except (TypeError, vt.Error):
        return
    jtu.assert_all_close(np.asarray(ans), np.linalg.cholesky(a), rtol=1e-3, atol=1e-3, check_dtypes=False)


@unsupported("complex dtypes")
def test_cholesky_complex():
    """JAX: NumpyLinalgTest.testCholesky (complex128)"""
    rng = jtu.rand_default(_rng())
    a = rng((4, 8), np.float64) + 1j * rng((4, 8), np.float64)
    a = a @ np.conj(a.T)
    jtu.assert_all_close(vt.cholesky(a), np.linalg.cholesky(a), rtol=1e-3, atol=1e-3)


# --- logdet (JAX's slogdet) -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (3, 3), (4, 4), (10, 10), (200, 200), (2, 2, 2), (2, 3, 3),
                                   (3, 2, 2)], ids=str)
def test_slogdet(shape, dtype):
    """JAX: NumpyLinalgTest.testSlogdet (on SPD inputs: vtape.logdet is log det of an SPD matrix, whose sign is +1;
    also through its CholeskyFactor)"""
    rng = jtu.rand_default(_rng())
    args_maker = lambda: [_spd(rng, shape, dtype)]  # noqa: E731

    def np_logdet(a):
        sign, logabsdet = np.linalg.slogdet(a)
        assert np.all(sign == 1)
        return logabsdet

    jtu.check_against_numpy(np_logdet, vt.logdet, args_maker, tol=1e-3)
    jtu.check_against_numpy(np_logdet, lambda a: vt.logdet(vt.cho_factor(a)), args_maker, tol=1e-3)
    jtu.compile_and_check(vt.logdet, args_maker)


@deliberate("vtape.logdet is log det of a symmetric positive definite matrix (by Cholesky): a general matrix, whose "
            "log |det| JAX's slogdet gives with its sign, raises vtape.NotPositiveDefinite naming the failing minor")
def test_slogdet_general_matrix():
    """JAX: NumpyLinalgTest.testSlogdet (a general random matrix)"""
    a = jtu.rand_default(_rng())((3, 3), np.float64)
    a[0, 0] = -abs(a[0, 0])
    with pytest.raises(vt.NotPositiveDefinite) as info:
        vt.logdet(a)
    assert info.value.minor == 1


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (5, 5), (2, 7, 7)], ids=str)
def test_slogdet_grad(shape, dtype):
    """JAX: NumpyLinalgTest.testSlogdetGrad (SPD inputs, through the symmetrized input)"""
    rng = jtu.rand_default(_rng())
    a = _spd(rng, shape, dtype)
    jtu.check_grads(lambda a: vt.logdet(sym(a)), (a,), 2, atol=1e-1, rtol=2e-1)


@deliberate("logdet, cho_factor and solve read the lower triangle, and their derivatives take the symmetric part of "
            "the direction (the guide: 'its tangent, like its adjoint, takes the symmetric part of dA'), so a "
            "derivative along a non-symmetric direction is that of the symmetrized input, not of the lower-triangle "
            "reading")
def test_slogdet_grad_reads_lower_triangle():
    """JAX: NumpyLinalgTest.testSlogdetGrad (the raw op along a non-symmetric direction)"""
    rng = jtu.rand_default(_rng())
    a = _spd(rng, (4, 4), np.float64)
    t = rng((4, 4), np.float64)
    lower = np.tril(a) + np.tril(a, -1).T
    jtu.assert_all_close(vt.logdet(a + np.triu(t, 1)), vt.logdet(lower), rtol=1e-14)  # the upper triangle is not read
    _, d = vt.jvp(vt.logdet, (a,), (t,))
    _, d_sym = vt.jvp(vt.logdet, (a,), ((t + t.T) / 2,))
    jtu.assert_all_close(d, d_sym, rtol=1e-13)
    jtu.assert_all_close(d, np.trace(np.linalg.solve(a, t)), rtol=1e-12)


# --- solve ------------------------------------------------------------------------------------------------------


SOLVE_SHAPES = [((1, 1), (1, 1)), ((4, 4), (4,)), ((8, 8), (8, 4)), ((2, 2), (3, 2, 2)), ((2, 1, 3, 3), (1, 4, 3, 4)),
                ((1, 0, 0), (1, 0, 2))]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lhs_shape, rhs_shape", SOLVE_SHAPES, ids=str)
def test_solve(lhs_shape, rhs_shape, dtype):
    """JAX: NumpyLinalgTest.testSolve (SPD lhs: vtape.solve is a Cholesky solve)"""
    rng = jtu.rand_default(_rng())
    args_maker = lambda: [_spd(rng, lhs_shape, dtype), rng(rhs_shape, dtype)]  # noqa: E731
    jtu.check_against_numpy(np.linalg.solve, vt.solve, args_maker, tol=1e-3)
    jtu.compile_and_check(vt.solve, args_maker)


@pytest.mark.parametrize("lhs_shape, rhs_shape", SOLVE_SHAPES[:5], ids=str)
def test_solve_grad(lhs_shape, rhs_shape):
    """JAX: NumpyLinalgTest.testSolve (its shapes; gradients by jtu.check_grads at order 2, as testCholesky's)"""
    rng = jtu.rand_default(_rng())
    a, b = _spd(rng, lhs_shape, np.float64), rng(rhs_shape, np.float64)
    jtu.check_grads(lambda a, b: vt.solve(sym(a), b), (a, b), order=2)


@deliberate("vtape.solve is A^-1 b for a symmetric positive definite A (a Cholesky solve): a general matrix raises "
            "vtape.NotPositiveDefinite, where JAX's solve (LU) returns its solution")
def test_solve_general_matrix():
    """JAX: NumpyLinalgTest.testSolve (a general random lhs)"""
    rng = jtu.rand_default(_rng())
    a, b = rng((4, 4), np.float64), rng((4,), np.float64)
    a[0, 0] = -abs(a[0, 0])
    with pytest.raises(vt.NotPositiveDefinite):
        vt.solve(a, b)


@pytest.mark.parametrize("rhs_shape", [(2,), (2, 2), (2, 2, 2), (2, 2, 2, 2)], ids=str)
@pytest.mark.parametrize("lhs_shape", [(2, 2), (2, 2, 2), (2, 2, 2, 2), (2, 2, 2, 2, 2)], ids=str)
def test_solve_broadcasting(lhs_shape, rhs_shape):
    """JAX: NumpyLinalgTest.testSolveBroadcasting (numpy's convention for batched solves; SPD lhs)"""
    rng = jtu.rand_default(_rng())
    args_maker = lambda: [_spd(rng, lhs_shape, "float32"), rng(rhs_shape, "float32")]  # noqa: E731
    jtu.check_against_numpy(np.linalg.solve, vt.solve, args_maker, tol=1e-3)
    jtu.compile_and_check(vt.solve, args_maker)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lhs_shape, rhs_shape", [((1, 1), (1, 1)), ((4, 4), (4,)), ((8, 8), (8, 4))], ids=str)
def test_scipy_solve_pos_lower(lhs_shape, rhs_shape, dtype):
    """JAX: ScipyLinalgTest.testSolve (assume_a='pos', lower=True: the lower triangle of a a^T, as vtape reads)"""
    rng = jtu.rand_default(_rng())

    def args_maker():
        a = rng(lhs_shape, dtype)
        return [np.tril(np.matmul(a, T(a))), rng(rhs_shape, dtype)]

    osp_fun = lambda lhs, rhs: scipy.linalg.solve(lhs, rhs, assume_a="pos", lower=True)  # noqa: E731
    jtu.check_against_numpy(osp_fun, vt.solve, args_maker, tol=1e-3)
    jtu.compile_and_check(vt.solve, args_maker)


def test_scipy_solve_pos_upper():
    """JAX: ScipyLinalgTest.testSolve (assume_a='pos', lower=False)"""
    rng = jtu.rand_default(_rng())
    a = rng((4, 4), np.float64)
    a, b = np.triu(a @ a.T), rng((4,), np.float64)
    jtu.assert_all_close(vt.scipy.linalg.solve(a, b, assume_a="pos", lower=False),
                         scipy.linalg.solve(a, b, assume_a="pos", lower=False), rtol=1e-3, atol=1e-3)


# --- cho_factor / cho_solve -------------------------------------------------------------------------------------


CHO_SHAPES = [((1, 1), (1,)), ((4, 4), (4,)), ((4, 4), (4, 4))]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lhs_shape, rhs_shape", CHO_SHAPES, ids=str)
def test_cho_solve(lhs_shape, rhs_shape, dtype):
    """JAX: ScipyLinalgTest.testChoSolve (lower=True; vtape's form: cho_solve(cho_factor(L L^T), b) against scipy's
    cho_solve((L, True), b))"""
    rng = jtu.rand_default(_rng())

    def args_maker():
        L = np.tril(rng(lhs_shape, dtype)) + 3 * np.eye(lhs_shape[-1], dtype=dtype)  # well conditioned in float32
        return [L, rng(rhs_shape, dtype)]

    jtu.check_against_numpy(lambda L, b: scipy.linalg.cho_solve((L, True), b),
                            lambda L, b: vt.cho_solve(vt.cho_factor(np.matmul(L, T(L))), b), args_maker, tol=1e-3)


@pytest.mark.parametrize("lhs_shape, rhs_shape", CHO_SHAPES, ids=str)
def test_cho_solve_grad(lhs_shape, rhs_shape):
    """JAX: ScipyLinalgTest.testChoSolve (its shapes; gradients of cho_factor and cho_solve by jtu.check_grads at
    order 2)"""
    rng = jtu.rand_default(_rng())
    a, b = _spd(rng, lhs_shape, np.float64), rng(rhs_shape, np.float64)
    jtu.check_grads(lambda a, b: vt.cho_solve(vt.cho_factor(sym(a)), b), (a, b), order=2)


@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_scipy_form(lower):
    """JAX: ScipyLinalgTest.testChoSolve (jsp.linalg.cho_solve((c, lower), b))"""
    rng = jtu.rand_default(_rng())
    c = np.tril(rng((4, 4), np.float64)) if lower else np.triu(rng((4, 4), np.float64))
    b = rng((4,), np.float64)
    jtu.assert_all_close(vt.scipy.linalg.cho_solve((c, lower), b), scipy.linalg.cho_solve((c, lower), b), rtol=1e-3, atol=1e-3)


def test_cho_factor_scipy_form():
    """JAX: jax.scipy.linalg.cho_factor (as tests/custom_linear_solve_test.py uses it)"""
    rng = jtu.rand_default(_rng())
    a = _spd(rng, (4, 4), np.float64)
    c, lower = vt.scipy.linalg.cho_factor(a, lower=True)
    jtu.assert_all_close(np.tril(np.asarray(c)), np.linalg.cholesky(a), rtol=1e-12)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lhs_shape, rhs_shape", [((3, 4, 4), (4,)), ((3, 4, 4), (4, 2)), ((3, 4, 4), (3, 4, 2)),
                                                  ((4, 4), (3, 4, 2))], ids=str)
def test_cho_solve_broadcast(lhs_shape, rhs_shape, dtype):
    """JAX: ScipyLinalgTest.testChoSolveBroadcast (lower=True, vtape's form)"""
    rng = jtu.rand_default(_rng())

    def args_maker():
        L = np.tril(rng(lhs_shape, dtype)) + 3 * np.eye(lhs_shape[-1], dtype=dtype)
        return [L, rng(rhs_shape, dtype)]

    jtu.check_against_numpy(lambda L, b: scipy.linalg.cho_solve((L, True), b),
                            lambda L, b: vt.cho_solve(vt.cho_factor(np.matmul(L, T(L))), b), args_maker, tol=1e-3)


# --- triangular_solve -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("transpose_a", [False, True], ids=["N", "T"])
@pytest.mark.parametrize("lower", [False, True], ids=["upper", "lower"])
@pytest.mark.parametrize("lhs_shape, rhs_shape", [((4, 4), (4,)), ((4, 4), (4, 3))], ids=str)
def test_solve_triangular(lower, transpose_a, lhs_shape, rhs_shape, dtype):
    """JAX: ScipyLinalgTest.testSolveTriangular (unit_diagonal=False)"""
    rng = jtu.rand_default(_rng())
    k = rng(lhs_shape, dtype)
    l = np.linalg.cholesky(np.matmul(k, T(k)) + lhs_shape[-1] * np.eye(lhs_shape[-1])).astype(k.dtype)
    b = rng(rhs_shape, dtype)
    a = l if lower else T(l)
    osp_fun = partial(scipy.linalg.solve_triangular, trans=1 if transpose_a else 0, lower=lower)
    vt_fun = lambda a, b: vt.triangular_solve(a, b, lower=lower, transpose=transpose_a)  # noqa: E731
    jtu.check_against_numpy(osp_fun, vt_fun, lambda: [a, b], rtol={np.float32: 1e-4, np.float64: 1e-11})
    jtu.compile_and_check(vt_fun, lambda: [a, b])


def test_solve_triangular_unit_diagonal():
    """JAX: ScipyLinalgTest.testSolveTriangular (unit_diagonal=True)"""
    rng = jtu.rand_default(_rng())
    a = np.tril(rng((4, 4), np.float64), -1) + np.eye(4)
    b = rng((4,), np.float64)
    jtu.assert_all_close(vt.scipy.linalg.solve_triangular(a, b, lower=True, unit_diagonal=True),
                         scipy.linalg.solve_triangular(a, b, lower=True, unit_diagonal=True), rtol=1e-11)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lower", [False, True], ids=["upper", "lower"])
@pytest.mark.parametrize("lhs_shape, rhs_shape", [((2, 8, 8), (2, 8, 10)), ((3, 4, 4), (4,)), ((3, 4, 4), (4, 2)),
                                                  ((4, 4), (3, 4, 2))], ids=str)
def test_solve_triangular_broadcast(lower, lhs_shape, rhs_shape, dtype):
    """JAX: ScipyLinalgTest.testSolveTriangularBroadcast"""
    rng = jtu.rand_default(_rng())
    k = rng(lhs_shape, dtype)
    l = np.linalg.cholesky(np.matmul(k, T(k)) + lhs_shape[-1] * np.eye(lhs_shape[-1])).astype(k.dtype)
    a = l if lower else T(l)
    b = rng(rhs_shape, dtype)
    osp_fun = partial(scipy.linalg.solve_triangular, lower=lower)
    vt_fun = lambda a, b: vt.triangular_solve(a, b, lower=lower)  # noqa: E731
    jtu.check_against_numpy(osp_fun, vt_fun, lambda: [a, b], rtol={np.float32: 1e-4, np.float64: 1e-11})
    jtu.compile_and_check(vt_fun, lambda: [a, b])


TRI_GRAD_SHAPES = [
    pytest.param(False, (4, 4), (4,), id="right-(4, 4)-(4,)"),
    pytest.param(False, (4, 4), (1, 4), id="right-(4, 4)-(1, 4)"),
    pytest.param(False, (3, 3), (4, 3), id="right-(3, 3)-(4, 3)"),
    pytest.param(True, (4, 4), (4,), id="left-(4, 4)-(4,)"),
    pytest.param(True, (4, 4), (4, 1), id="left-(4, 4)-(4, 1)"),
    pytest.param(True, (4, 4), (4, 3), id="left-(4, 4)-(4, 3)"),
    pytest.param(True, (2, 8, 8), (2, 8, 10), id="left-(2, 8, 8)-(2, 8, 10)"),
]


@pytest.mark.parametrize("transpose_a", [False, True], ids=["N", "T"])
@pytest.mark.parametrize("lower", [False, True], ids=["upper", "lower"])
@pytest.mark.parametrize("left_side, a_shape, b_shape", TRI_GRAD_SHAPES)
def test_triangular_solve_grad(lower, transpose_a, left_side, a_shape, b_shape):
    """JAX: ScipyLinalgTest.testTriangularSolveGrad (float64, unit_diagonal=False; JAX's order 1, plus order 2)"""
    dtype = np.float64
    rng = jtu.rand_default(_rng())
    A = np.tril(rng(a_shape, dtype) + 5 * np.eye(a_shape[-1], dtype=dtype))
    A = A if lower else T(A)
    B = rng(b_shape, dtype)
    f = lambda A, B: vt.triangular_solve(A, B, lower=lower, transpose=transpose_a, left=left_side)  # noqa: E731
    jtu.check_grads(f, (A, B), order=1, rtol=4e-2, eps=1e-3)
    jtu.check_grads(f, (A, B), order=2)


@pytest.mark.parametrize("left_side, a_shape, b_shape, bdims", [
    (False, (4, 4), (2, 3, 4), (None, 0)),
    (False, (2, 4, 4), (2, 2, 3, 4), (None, 0)),
    (False, (2, 4, 4), (3, 4), (0, None)),
    (False, (2, 4, 4), (2, 3, 4), (0, 0)),
    (True, (2, 4, 4), (2, 4, 3), (0, 0)),
    (True, (2, 4, 4), (2, 2, 4, 3), (None, 0)),
], ids=str)
def test_triangular_solve_batching(left_side, a_shape, b_shape, bdims):
    """JAX: ScipyLinalgTest.testTriangularSolveBatching"""
    rng = jtu.rand_default(_rng())
    A = np.tril(rng(a_shape, np.float32) + 5 * np.eye(a_shape[-1], dtype=np.float32))
    B = rng(b_shape, np.float32)
    solve = lambda A, B: vt.triangular_solve(A, B, lower=True, transpose=False, left=left_side)  # noqa: E731
    X = np.asarray(vt.vmap(solve, bdims)(A, B))
    Y = np.matmul(A, X) if left_side else np.matmul(X, A)
    jtu.assert_all_close(Y, np.broadcast_to(B, Y.shape), atol=1e-4)


def test_triangular_solve_singular_batched():
    """JAX: ScipyLinalgTest.testTriangularSolveSingularBatched (lax's default: the upper triangle, left side)"""
    x = np.array([[1, 1], [0, 0]], dtype=np.float32)
    y = np.array([[1], [1.0]], dtype=np.float32)
    out = vt.triangular_solve(x[None], y[None], lower=False, left=True)
    assert not np.all(np.isfinite(np.asarray(out)))


# --- qr ---------------------------------------------------------------------------------------------------------


# JAX's shapes but (2, 200, 100), left out for time.
QR_SHAPES = [(0, 0), (2, 0), (0, 2), (3, 3), (3, 4), (2, 10, 5), (64, 16, 5), (33, 7, 3), (137, 9, 5), (20000, 2, 2)]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", QR_SHAPES, ids=str)
def test_qr(shape, dtype):
    """JAX: NumpyLinalgTest.testQr (full_matrices=False: the reduced QR)"""
    rng = jtu.rand_default(_rng())
    m, n = shape[-2:]
    k = min(m, n)
    a = rng(shape, dtype)
    lq, lr = (np.asarray(x) for x in vt.qr(a))
    nq = np.zeros(shape[:-2] + (m, k), dtype)
    nr = np.zeros(shape[:-2] + (k, n), dtype)
    for index in np.ndindex(*shape[:-2]):
        nq[index], nr[index] = np.linalg.qr(a[index], mode="reduced")
    max_rank = max(m, n)

    def norm(x):
        n = np.linalg.norm(x, axis=(-2, -1))
        return n / (max(1, max_rank) * np.finfo(dtype).eps)

    def compare_orthogonal(q1, q2):
        # Q is unique up to sign, so normalize the sign first.
        ratio = np.divide(np.where(q2 == 0, 0, q1), np.where(q2 == 0, 1, q2))
        sum_of_ratios = ratio.sum(axis=-2, keepdims=True)
        phases = np.divide(sum_of_ratios, np.abs(sum_of_ratios))
        q1 = q1 * phases
        nm = norm(q1 - q2)
        assert np.all(nm < 160), f"norm={np.amax(nm)}"

    norm_error = norm(a - np.matmul(lq, lr))
    assert np.all(norm_error < 60), np.amax(norm_error)
    compare_orthogonal(nq[..., :k], lq[..., :k])
    assert np.all(norm(np.eye(k) - np.matmul(np.conj(T(lq)), lq)) < 10)

    def qr_and_mul(a):
        q, r = vt.qr(a)
        return q @ r

    jtu.check_jvp(qr_and_mul, partial(vt.jvp, qr_and_mul), (a,), atol=3e-3)


@pytest.mark.parametrize("shape", [(3, 3), (3, 4), (4, 3), (2, 10, 5)], ids=str)
def test_qr_grad(shape):
    """JAX: NumpyLinalgTest.testQr (its qr_and_mul, and R's absolute values; gradients by jtu.check_grads at order 2)"""
    rng = jtu.rand_default(_rng())
    a = rng(shape, np.float64)

    def qr_and_mul(a):
        q, r = vt.qr(a)
        return q @ r, vt.abs(r)

    jtu.check_grads(qr_and_mul, (a,), order=2)


def test_qr_complete():
    """JAX: NumpyLinalgTest.testQr (full_matrices=True: mode='complete')"""
    a = jtu.rand_default(_rng())((4, 3), np.float64)
    q, r = vt.numpy.linalg.qr(a, mode="complete")
    assert q.shape == (4, 4) and r.shape == (4, 3)
    jtu.assert_all_close(q @ r, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(10, 4, 5), (5, 3, 3), (7, 6, 4)], ids=str)
def test_qr_batching(shape):
    """JAX: NumpyLinalgTest.testQrBatching"""
    args = jtu.rand_default(_rng())(shape, np.float32)
    qs, rs = vt.vmap(vt.qr)(args)
    assert np.all(np.linalg.norm(args - np.matmul(np.asarray(qs), np.asarray(rs))) < 1e-3)


# --- eigh (tests/eigh_test.py) ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [0, 4, 5, 50])
def test_eigh(n, dtype):
    """JAX: EighTest.testEigh (lower=True; JAX's n=512 left out for time, as JAX does on TPU; testEighIdentity runs
    512)"""
    rng = jtu.rand_default(_rng())
    eps = np.finfo(dtype).eps
    args_maker = lambda: [rng((n, n), dtype)]  # noqa: E731
    (a,) = args_maker()
    a = (a + np.conj(a.T)) / 2
    w, v = vt.eigh(np.tril(a), symmetrize_input=False)
    w, v = np.asarray(w), np.asarray(v)
    w = w.astype(v.dtype)
    tol = 2 * n * eps
    jtu.assert_all_close(np.eye(n, dtype=v.dtype), np.matmul(np.conj(T(v)), v), atol=tol, rtol=tol)
    tol = 100 * eps
    assert np.linalg.norm(np.matmul(a, v) - w * v) <= tol * np.linalg.norm(a)
    jtu.compile_and_check(vt.eigh, args_maker, rtol=10 * eps)
    w_np = np.linalg.eigvalsh(a.astype(np.float64))
    tol = 8 * eps
    jtu.assert_all_close(w_np.astype(w.dtype), w, atol=tol * np.linalg.norm(a), rtol=tol)


def test_eigh_upper():
    """JAX: EighTest.testEigh (lower=False: UPLO='U')"""
    a = jtu.rand_default(_rng())((4, 4), np.float64)
    a = (a + a.T) / 2
    w, v = vt.numpy.linalg.eigh(np.triu(a), UPLO="U", symmetrize_input=False)
    jtu.assert_all_close(np.asarray(w), np.linalg.eigvalsh(a), rtol=1e-13, atol=1e-13)


def test_eigh_zero_diagonal():
    """JAX: EighTest.testEighZeroDiagonal"""
    a = np.array([[0.0, -1.0, -1.0, 1.0], [-1.0, 0.0, 1.0, -1.0], [-1.0, 1.0, 0.0, -1.0], [1.0, -1.0, -1.0, 0.0]],
                 dtype=np.float32)
    w, v = (np.asarray(x) for x in vt.eigh(a))
    w = w.astype(v.dtype)
    eps = np.finfo(a.dtype).eps
    assert np.linalg.norm(np.matmul(a, v) - w * v) <= 2.5 * eps * np.linalg.norm(a)


def test_eigh_tiny_norm():
    """JAX: EighTest.testEighTinyNorm"""
    rng = jtu.rand_default(_rng())
    a = rng((300, 300), dtype=np.float32)
    eps = np.finfo(a.dtype).eps
    a = eps * (a + np.conj(a.T))
    w, v = (np.asarray(x) for x in vt.eigh(a))
    w = w.astype(v.dtype)
    assert np.linalg.norm(np.matmul(a, v) - w * v) <= 80 * eps * np.linalg.norm(a)


@pytest.mark.parametrize("rank", [1, 3, 299])
def test_eigh_rank_deficient(rank):
    """JAX: EighTest.testEighRankDeficient"""
    rng = jtu.rand_default(_rng())
    eps = np.finfo(np.float32).eps
    a = rng((300, rank), dtype=np.float32)
    a = a @ np.conj(a.T)
    w, v = (np.asarray(x) for x in vt.eigh(a))
    w = w.astype(v.dtype)
    assert np.linalg.norm(np.matmul(a, v) - w * v) <= 85 * eps * np.linalg.norm(a)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [0, 4, 5, 50, 512])
def test_eigh_identity(n, dtype):
    """JAX: EighTest.testEighIdentity (lower=True)"""
    tol = np.finfo(dtype).eps
    a = np.eye(n, dtype=dtype)
    w, v = (np.asarray(x) for x in vt.eigh(a, symmetrize_input=False))
    w = w.astype(v.dtype)
    assert np.linalg.norm(np.eye(n) - np.matmul(np.conj(T(v)), v)) <= tol
    assert np.linalg.norm(np.matmul(a, v) - w * v) <= tol * np.linalg.norm(a)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(4, 4), (5, 5), (50, 50)], ids=str)
def test_eigvalsh(shape, dtype):
    """JAX: EighTest.testEigvalsh (vtape has no eigvalsh: eigh's eigenvalues)"""
    rng = jtu.rand_default(_rng())
    n = shape[-1]

    def args_maker():
        a = rng((n, n), dtype)
        return [(a + np.conj(a.T)) / 2]

    jtu.check_against_numpy(np.linalg.eigvalsh, lambda a: vt.eigh(a)[0], args_maker, tol=2e-5)


def _normalizing_eigh(H):
    # Eigenvectors are unique up to sign: the first component of each made positive (JAX's _normalizing_eigh).
    e, v = vt.eigh(H, symmetrize_input=True)
    top_rows = v[..., 0:1, :]
    return e, v * vt.sign(top_rows)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (5, 5), (25, 25), (2, 10, 10)], ids=str)
def test_eigh_grad(shape, dtype):
    """JAX: EighTest.testEighGrad (lower=True)"""
    rng = jtu.rand_default(_rng())
    a = rng(shape, dtype)
    a = (a + np.conj(T(a))) / 2
    ones = np.ones((a.shape[-1], a.shape[-1]), dtype=dtype)
    a *= np.tril(ones)
    norm_a = np.linalg.norm(a)
    jtu.check_grads(_normalizing_eigh, (a,), 2, atol=5e-3 * norm_a, rtol=0.025, eps=2e-5 * norm_a)


def test_eigh_grad_rank_promotion():
    """JAX: EighTest.testEighGradRankPromotion (JAX asserts no crash; here the eigenvalues' tangent, diag(V^T dA V))"""
    rng = jtu.rand_default(_rng())
    a = rng((10, 3, 3), np.float32)
    (w, v), (dw, dv) = vt.jvp(vt.eigh, (a,), (a,))
    v = np.asarray(v, dtype=np.float64)
    da = (a + T(a)) / 2
    want = np.einsum("bij,bik,bkj->bj", v, da, v)
    jtu.assert_all_close(np.asarray(dw, dtype=np.float64), want, rtol=1e-4, atol=1e-4)
    assert dv.shape == (10, 3, 3)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (5, 5), (300, 300)], ids=str)
def test_eigh_batching(shape, dtype):
    """JAX: EighTest.testEighBatching"""
    rng = jtu.rand_default(_rng())
    args = rng((10,) + shape, dtype)
    args = (args + np.conj(T(args))) / 2
    ws, vs = (np.asarray(x) for x in vt.vmap(vt.eigh)(args))
    ws = ws.astype(vs.dtype)
    norm = np.max(np.linalg.norm(np.matmul(args, vs) - ws[..., None, :] * vs))
    assert norm < 1.4e-2
