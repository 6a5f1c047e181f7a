#!/usr/bin/env python3
"""Reference values for tests/test_qr_eigh.cpp, from numpy (independent of vtape).

Writes tests/data/qr_eigh/*.npy:
  - numpy.linalg.qr (reduced; LAPACK geqrf + orgqr) of a tall, a square and a wide matrix;
  - numpy.linalg.eigh (lower triangle) of a symmetric matrix given with garbage above its diagonal,
    each eigenvector's sign fixed so that its entry of largest magnitude is positive;
  - gradients of weighted sums of the results, from forward-mode derivatives (dQ, dR from
    Q^T dA R^-1; dw = diag(V^T dA V), dV = V (F o V^T dA V)) contracted over a basis of directions:
    an independent route from vtape's reverse-mode adjoints;
  - numpy.linalg.eigvalsh (LAPACK syevd) of three larger matrices whose entries the test builds
    itself, exactly, from an integer hash (splitmix64, below): so only their eigenvalues are stored.
      eigh_lapack_random_w   512 x 512, entries k / 2^23 (k a 24-bit integer): exact in float32
      eigh_lapack_rankdef_w  300 x 300, B B^T with B 300 x 150 of integers in [-8, 8): rank 150
      eigh_lapack_glued_w    ten Wilkinson W21+ matrices glued by 2^-40 (210 x 210, eigenvalues in
                             tight clusters of up to ten), rows and columns permuted by the hash

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


def splitmix64(seed, i, j):
    """The test's hash of (seed, i, j), elementwise on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) << np.uint64(40)) + (np.uint64(i) << np.uint64(20)) + np.uint64(j)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hashed_grid(seed, rows, cols):
    i, j = np.meshgrid(np.arange(rows, dtype=np.uint64), np.arange(cols, dtype=np.uint64), indexing="ij")
    return splitmix64(seed, i, j)


# Symmetric, the lower triangle's entry (i >= j) from the hash of (i, j).
n = 512
lower = ((hashed_grid(1, n, n) >> np.uint64(40)).astype(np.int64) - 2**23) / 2.0**23
a = np.tril(lower) + np.tril(lower, -1).T
values["eigh_lapack_random_w"] = np.linalg.eigvalsh(a)

b = (hashed_grid(2, 300, 150) >> np.uint64(60)).astype(np.int64) - 8
values["eigh_lapack_rankdef_w"] = np.linalg.eigvalsh((b @ b.T).astype(np.float64))

m, copies = 21, 10
n = m * copies
t = np.zeros((n, n))
for k in range(copies):
    for i in range(m):
        t[k * m + i, k * m + i] = abs(m // 2 - i)
        if i + 1 < m:
            t[k * m + i, k * m + i + 1] = t[k * m + i + 1, k * m + i] = 1.0
    if k + 1 < copies:
        t[k * m + m - 1, k * m + m] = t[k * m + m, k * m + m - 1] = 2.0**-40
p = np.argsort(hashed_grid(3, n, 1)[:, 0], kind="stable")  # row i of the test's matrix is row p[i] of t
values["eigh_lapack_glued_w"] = np.linalg.eigvalsh(t[np.ix_(p, p)])

for name, value in values.items():
    np.save(out / f"{name}.npy", np.ascontiguousarray(value, dtype=np.float64))
