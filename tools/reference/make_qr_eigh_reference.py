#!/usr/bin/env python3
"""Reference values for tests/test_qr_eigh.cpp, from numpy (independent of vtape).

Writes tests/data/qr_eigh/*.npy:
  - numpy.linalg.qr (reduced; LAPACK geqrf + orgqr) of a tall, a square and a wide matrix;
  - numpy.linalg.eigh (lower triangle) of a symmetric matrix given with garbage above its diagonal,
    each eigenvector's sign fixed so that its entry of largest magnitude is positive;
  - gradients of weighted sums of the results, from forward-mode derivatives (dQ, dR from
    Q^T dA R^-1; dw = diag(V^T dA V), dV = V (F o V^T dA V)) contracted over a basis of directions:
    an independent route from vtape's reverse-mode adjoints.

    python3 tools/reference/make_qr_eigh_reference.py
"""
import pathlib

import numpy as np

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "qr_eigh"
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(20261201)
values = {}


def qr_jvp(a, da):
    """Directional derivatives (dQ, dR) of the reduced QR at a (full rank), along da."""
    m, n = a.shape
    if m < n:  # A = [X | Y]: X = Q U square, V = Q^T Y
        dq, du = qr_jvp(a[:, :m], da[:, :m])
        q = np.linalg.qr(a[:, :m])[0]
        dv = dq.T @ a[:, m:] + q.T @ da[:, m:]
        return dq, np.hstack([du, dv])
    q, r = np.linalg.qr(a)
    b = q.T @ da @ np.linalg.inv(r)
    lower = np.tril(b, -1)
    c = lower - lower.T          # Q^T dQ, skew
    dr = (b - c) @ r             # upper triangular
    dq = da @ np.linalg.inv(r) - q @ (b - c)
    return dq, dr


for name, (m, n) in dict(tall=(6, 4), square=(5, 5), wide=(3, 6)).items():
    a = rng.standard_normal((m, n))
    q, r = np.linalg.qr(a)
    wq = rng.standard_normal(q.shape)
    wr = rng.standard_normal(r.shape)
    grad = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            e = np.zeros((m, n))
            e[i, j] = 1.0
            dq, dr = qr_jvp(a, e)
            grad[i, j] = np.sum(wq * dq) + np.sum(wr * dr)
    values.update({f"qr_{name}_a": a, f"qr_{name}_q": q, f"qr_{name}_r": r, f"qr_{name}_wq": wq,
                   f"qr_{name}_wr": wr, f"qr_{name}_grad": grad})

# eigh: a symmetric 6 x 6 matrix; the strict upper triangle holds unrelated values that eigh must
# not read.
n = 6
x = rng.standard_normal((n, n))
s = (x + x.T) / 2
given = np.tril(s) + np.triu(rng.standard_normal((n, n)) * 100, 1)
w, v = np.linalg.eigh(given, UPLO="L")
v = v * np.sign(v[np.abs(v).argmax(axis=0), np.arange(n)])
c = rng.standard_normal(n)        # loss = sum(W * V diag(c) V^T) + u . w + sum(Z * V o V)
W = rng.standard_normal((n, n))
u = rng.standard_normal(n)
Z = rng.standard_normal((n, n))

F = np.zeros((n, n))
for i in range(n):
    for j in range(n):
        if i != j:
            F[i, j] = 1.0 / (w[j] - w[i])


def eigh_loss_jvp(da):
    p = v.T @ da @ v
    dw = np.diag(p)
    dv = v @ (F * p)
    dproj = dv @ np.diag(c) @ v.T + v @ np.diag(c) @ dv.T
    return np.sum(W * dproj) + u @ dw + np.sum(Z * 2 * v * dv)


# The symmetric convention: for symmetric E_ij (i >= j), <G, E_ij> = the directional derivative,
# so G_ij = G_ji = that / (2 if i != j else 1).
grad = np.zeros((n, n))
for i in range(n):
    for j in range(i + 1):
        e = np.zeros((n, n))
        e[i, j] = e[j, i] = 1.0
        grad[i, j] = grad[j, i] = eigh_loss_jvp(e) / (2.0 if i != j else 1.0)
values.update(dict(eigh_a=given, eigh_w=w, eigh_v=v, eigh_c=c, eigh_W=W, eigh_u=u, eigh_Z=Z, eigh_grad=grad))

for name, value in values.items():
    np.save(out / f"{name}.npy", np.ascontiguousarray(value, dtype=np.float64))
