"""The ops from Python, against numpy."""

import numpy as np
import pytest

import vtape as vt

rng = np.random.default_rng(7)


def spd(n, batch=()):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def close(t, want, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(t), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    "name, ref, positive",
    [("exp", np.exp, False), ("log", np.log, True), ("sqrt", np.sqrt, True), ("sin", np.sin, False),
     ("tanh", np.tanh, False), ("log1p", np.log1p, True), ("expm1", np.expm1, False), ("abs", np.abs, False),
     ("square", np.square, False), ("log2", np.log2, True), ("log10", np.log10, True)],
)
def test_elementwise(name, ref, positive):
    a = rng.standard_normal((3, 5))
    if positive:
        a = np.abs(a) + 0.1
    close(getattr(vt, name)(vt.asarray(a)), ref(a), rtol=1e-14)


def test_reductions_and_layout():
    a = rng.standard_normal((2, 3, 4))
    x = vt.asarray(a)
    close(vt.sum(x), a.sum())
    close(vt.sum(x, axis=1), a.sum(axis=1))
    close(vt.mean(x, axis=(0, 2), keepdims=True), a.mean(axis=(0, 2), keepdims=True))
    close(vt.max(x, axis=-1), a.max(axis=-1), rtol=0)
    close(vt.logsumexp(x, axis=2), np.log(np.exp(a).sum(axis=2)))
    close(vt.cumsum(x, 1), np.cumsum(a, axis=1))
    close(vt.reshape(x, (4, 6)), a.reshape(4, 6), rtol=0)
    close(vt.transpose(x, [2, 0, 1]), a.transpose(2, 0, 1), rtol=0)
    close(vt.swapaxes(x, 0, 2), np.swapaxes(a, 0, 2), rtol=0)
    close(vt.concatenate([x, x], 1), np.concatenate([a, a], 1), rtol=0)
    close(vt.stack([x, x], 0), np.stack([a, a]), rtol=0)
    close(vt.broadcast_to(vt.asarray(a[0, 0]), (3, 4)), np.broadcast_to(a[0, 0], (3, 4)), rtol=0)
    m = rng.standard_normal((4, 4))
    close(vt.tril(vt.asarray(m)), np.tril(m), rtol=0)
    close(vt.triu(vt.asarray(m), 1), np.triu(m, 1), rtol=0)
    close(vt.diagonal(vt.asarray(m)), np.diagonal(m), rtol=0)
    close(vt.where(vt.asarray(m) > 0, vt.asarray(m), 0.0), np.where(m > 0, m, 0), rtol=0)


def test_gathers_and_segments():
    a = rng.standard_normal((5, 3))
    idx = np.array([4, 0, 0, 2])
    close(vt.take(vt.asarray(a), vt.asarray(idx), 0), a[idx], rtol=0)
    seg = np.array([0, 2, 2, 1, 0])
    want = np.zeros((3, 3))
    np.add.at(want, seg, a)
    close(vt.segment_sum(vt.asarray(a), vt.asarray(seg), 3), want)


def test_linear_algebra_against_numpy():
    a, b = spd(5, (3,)), rng.standard_normal((3, 5, 2))
    A, B = vt.asarray(a), vt.asarray(b)
    L = np.linalg.cholesky(a)
    close(vt.cholesky(A), L)
    c = vt.cho_factor(A)
    close(vt.cho_solve(c, B), np.linalg.solve(a, b))
    close(vt.solve(A, B), np.linalg.solve(a, b))
    close(vt.logdet(c), np.linalg.slogdet(a)[1])
    close(vt.logdet(A), np.linalg.slogdet(a)[1])
    close(vt.triangular_solve(vt.asarray(L), B), np.linalg.solve(L, b))
    close(vt.matmul(A, B), a @ b)
    w, v = vt.eigh(A)
    close(w, np.linalg.eigh(a)[0])
    q, r = vt.qr(vt.asarray(b))
    close(vt.matmul(q, r), b)


def test_creation():
    close(vt.zeros((2, 3)), np.zeros((2, 3)), rtol=0)
    close(vt.ones(4, dtype="float32"), np.ones(4), rtol=0)
    assert vt.ones(4, dtype=np.float32).dtype == np.float32
    close(vt.eye(3), np.eye(3), rtol=0)
    close(vt.arange(0, 5), np.arange(0.0, 5.0), rtol=0)
    close(vt.linspace(0, 1, 11), np.linspace(0, 1, 11), rtol=1e-15)
    close(vt.full((2,), 7.0), [7.0, 7.0], rtol=0)
    assert vt.randn((3, 4), 1).shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(vt.randn((3,), 5)), np.asarray(vt.randn((3,), 5)))


def test_npy_files(tmp_path):
    a = rng.standard_normal((3, 2))
    vt.save_npy(str(tmp_path / "a.npy"), vt.asarray(a))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)
    np.save(tmp_path / "b.npy", a)
    close(vt.load_npy(str(tmp_path / "b.npy")), a, rtol=0)
