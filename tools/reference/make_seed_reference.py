#!/usr/bin/env python3
"""Reference for the JAX-issue program (examples/seed_cholesky_grad), from numpy in closed form.

loss(P) = mean_i f(P_i), f(p) = mean(A^-1 1), A = F diag(p^2) F^T + I. With x = A^-1 1:
d f / d p_j = -(2 / nobs) p_j (F_j . x)^2, and the loss gradient divides that by B.
Writes tests/data/seed/{P,grad}.npy and prints the value (small sizes: nobs 32, ngp 4, B 3).

    python3 tools/reference/make_seed_reference.py
"""
import pathlib

import numpy as np

nobs, ngp, B = 32, 4, 3
out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "seed"
out.mkdir(parents=True, exist_ok=True)
t = np.linspace(0, 1, nobs)
f = np.arange(1, ngp + 1, dtype=np.float64)
F = np.zeros((nobs, 2 * ngp))
F[:, ::2] = np.sin(2.0 * np.pi * f * t[:, None])
F[:, 1::2] = np.cos(2.0 * np.pi * f * t[:, None])
P = np.random.default_rng(21313).standard_normal((B, 2 * ngp))
values, G = [], np.zeros_like(P)
for i in range(B):
    A = F @ np.diag(P[i] ** 2) @ F.T + np.eye(nobs)
    x = np.linalg.solve(A, np.ones(nobs))
    values.append(x.mean())
    G[i] = -(2.0 / nobs) * P[i] * (F.T @ x) ** 2 / B
np.save(out / "P.npy", P)
np.save(out / "grad.npy", G)
np.save(out / "value.npy", np.array(np.mean(values)))
print(f"value {np.mean(values):.15f}")
