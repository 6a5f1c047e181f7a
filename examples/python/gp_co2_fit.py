"""Mauna Loa CO2 with scikit-learn's kernel, fitted by scipy.optimize.minimize(method="L-BFGS-B", jac=True) on
vtape's jitted log marginal likelihood and gradient: examples/gp_co2's model, from Python.

    PYTHONPATH=build/python python3 examples/python/gp_co2_fit.py        (needs scipy)

The kernel, in 11 log-hyperparameters (scikit-learn's order, its initial values and bounds):
    c1 RBF(l1) + c2 RBF(l2) ExpSineSquared(l_sine, periodicity=1) + c3 RationalQuadratic(alpha, l3)
    + c4 RBF(l4) + WhiteKernel(noise)
Prints one JSON object: the fit's wall time, evaluations, log marginal likelihood and the fitted kernel in
scikit-learn's notation (tools/bench/sklearn_co2.py prints scikit-learn's).
"""
import argparse
import json
import os
import time

import numpy as np
import scipy.optimize

import vtape as vt

HERE = os.path.dirname(os.path.abspath(__file__))
INITIAL = np.log([50.0**2, 50.0, 2.0**2, 100.0, 1.0, 0.5**2, 1.0, 1.0, 0.1**2, 0.1, 0.1**2])
BOUNDS = [(np.log(1e-5), np.log(1e5))] * 11  # scikit-learn's defaults for every one of them


def model(t, y):
    """The log marginal likelihood of y at times t, as a function of theta [11]."""
    d = t[:, None] - t[None, :]
    sq, sin2, n = d * d, np.sin(np.pi * d) ** 2, len(t)
    eye = np.eye(n)

    def lml(theta):
        p = vt.exp(theta)
        long_term = p[0] * vt.exp(-0.5 * sq / p[1] ** 2)
        seasonal = p[2] * vt.exp(-0.5 * sq / p[3] ** 2 - 2.0 * sin2 / p[4] ** 2)
        medium = p[5] * (1.0 + sq / (2.0 * p[6] * p[7] ** 2)) ** -p[6]
        noise = p[8] * vt.exp(-0.5 * sq / p[9] ** 2)
        k = long_term + seasonal + medium + noise + (p[10] + 1e-10) * eye  # 1e-10: scikit-learn's alpha
        c = vt.cho_factor(k)
        return -0.5 * (vt.sum(y * vt.cho_solve(c, y)) + vt.logdet(c)) - 0.5 * n * np.log(2 * np.pi)

    return lml


def sklearn_notation(theta):
    v = np.exp(theta)
    g = lambda x: f"{x:.3g}"  # noqa: E731
    return (f"{g(np.sqrt(v[0]))}**2 * RBF(length_scale={g(v[1])}) + {g(np.sqrt(v[2]))}**2 * RBF(length_scale="
            f"{g(v[3])}) * ExpSineSquared(length_scale={g(v[4])}, periodicity=1) + {g(np.sqrt(v[5]))}**2 * "
            f"RationalQuadratic(alpha={g(v[6])}, length_scale={g(v[7])}) + {g(np.sqrt(v[8]))}**2 * RBF(length_scale="
            f"{g(v[9])}) + WhiteKernel(noise_level={g(v[10])})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "data", "co2_monthly.csv"))
    args = ap.parse_args()
    data = np.loadtxt(args.data, delimiter=",", skiprows=1)
    t, y = data[:, 0], data[:, 1] - data[:, 1].mean()
    value_and_grad = vt.jit(vt.value_and_grad(model(t, y)))
    evaluations = 0

    def negative(theta):  # scipy minimises: -lml and its gradient, as float64 numpy values
        nonlocal evaluations
        evaluations += 1
        value, grad = value_and_grad(theta)
        return -float(value), -np.asarray(grad)

    t0 = time.perf_counter()
    fit = scipy.optimize.minimize(negative, INITIAL, jac=True, method="L-BFGS-B", bounds=BOUNDS)
    seconds = time.perf_counter() - t0
    print(json.dumps({"n": len(y), "fit_seconds": seconds, "evaluations": evaluations, "lml": -float(fit.fun),
                      "converged": bool(fit.success), "theta": fit.x.tolist(), "kernel": sklearn_notation(fit.x)}))


if __name__ == "__main__":
    main()
