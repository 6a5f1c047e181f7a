#!/usr/bin/env python3
"""Reference values for tests/test_linalg.cpp, from numpy/scipy (independent of vtape).

Writes tests/data/linalg/*.npy. Gradients are closed forms, or (for the Cholesky factor) a
forward-mode derivative dL = L Phi(L^-1 dA L^-T) contracted over a basis of symmetric directions,
an independent route from vtape's reverse-mode adjoint.

    python3 tools/reference/make_linalg_reference.py
"""
import pathlib

import numpy as np
import scipy.linalg as sla

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "linalg"
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(20261130)
n, k = 6, 3

X = rng.standard_normal((n, n))
A = X @ X.T / n + np.eye(n)
b = rng.standard_normal(n)
B = rng.standard_normal((n, k))
w = rng.standard_normal(n)        # weights: loss = w . cho_solve(A, b)
W = rng.standard_normal((n, n))   # weights: loss = sum(W * cholesky(A))

L = sla.cholesky(A, lower=True)
x = sla.cho_solve((L, True), b)
XB = sla.cho_solve((L, True), B)
T_solve = sla.solve_triangular(L, B, lower=True, trans=1)  # L^T Y = B
logdet = 2 * np.sum(np.log(np.diag(L)))

Ainv = np.linalg.inv(A)
# d/dA of w . A^-1 b = -A^-1 w x^T, symmetrised; d/db = A^-1 w.
G = -Ainv @ np.outer(w, x)
grad_solve_A = 0.5 * (G + G.T)
grad_solve_b = Ainv @ w


def dchol(dA):
    Linv = np.linalg.inv(L)
    M = Linv @ dA @ Linv.T
    phi = np.tril(M) - 0.5 * np.diag(np.diag(M))
    return L @ phi


# Gradient of sum(W * L) in the symmetric convention: for symmetric E_ij (i >= j),
# <G, E_ij> = directional derivative; G_ij = G_ji = that / (2 if i != j else 1).
grad_chol = np.zeros((n, n))
for i in range(n):
    for j in range(i + 1):
        E = np.zeros((n, n))
        E[i, j] = E[j, i] = 1.0
        d = np.sum(W * dchol(E))
        grad_chol[i, j] = grad_chol[j, i] = d / (2.0 if i != j else 1.0)

for name, value in dict(A=A, b=b, B=B, w=w, W=W, L=L, x=x, XB=XB, T_solve=T_solve, logdet=np.array(logdet),
                        grad_logdet=Ainv, grad_solve_A=grad_solve_A, grad_solve_b=grad_solve_b,
                        grad_chol=grad_chol).items():
    np.save(out / f"{name}.npy", np.ascontiguousarray(value, dtype=np.float64))
print(f"wrote {len(list(out.glob('*.npy')))} files to {out}")
