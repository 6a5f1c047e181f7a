"""The README's Python tour: a GP's log marginal likelihood, its gradient for many starts at once, and its Hessian.

    PYTHONPATH=build/python python3 examples/python/demo.py      (or after `pip install .`: python3 demo.py)
"""
import numpy as np

import vtape as vt

x = np.linspace(0, 5, 40)
y = np.sin(x) + 0.1 * np.random.default_rng(0).standard_normal(40)
d2 = (x[:, None] - x[None, :]) ** 2


def lml(theta):  # theta = [log amplitude, log length, log noise], as in jax.numpy
    amp, length, noise = vt.exp(theta[0]), vt.exp(theta[1]), vt.exp(theta[2])
    k = amp * vt.exp(-0.5 * d2 / length**2) + noise * vt.eye(40)
    c = vt.cho_factor(k)
    return -0.5 * (vt.sum(y * vt.cho_solve(c, y)) + vt.logdet(c))


step = vt.jit(vt.vmap(vt.value_and_grad(lml)))  # traced once, for every batch size
values, grads = step(np.random.default_rng(1).standard_normal((8, 3)))  # 8 starts: values [8], grads [8, 3]
values, grads = step(np.zeros((3, 3)))  # another batch size: the same plan
H = vt.hessian(lml)(np.zeros(3))  # [3, 3]
print(np.asarray(values), np.asarray(grads).shape, step.counters()["traces"], np.asarray(H).shape)
