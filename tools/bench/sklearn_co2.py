#!/usr/bin/env python3
"""scikit-learn's fit of the Mauna Loa CO2 kernel, for a side-by-side wall time with examples/gp_co2.

The kernel, data preprocessing (y minus its mean, normalize_y=False) and optimizer (L-BFGS-B through
scipy, 1 + n_restarts_optimizer starts) are those of scikit-learn's CO2 example; --starts 1 is scikit-learn's
default fit (n_restarts_optimizer=0). Prints one JSON object; `evaluations` counts the likelihood-and-gradient
evaluations the optimizer asked for (a subclass counts them; the fit itself is scikit-learn's, unchanged).

    python3 tools/bench/sklearn_co2.py --starts 1
"""
import argparse
import json
import os
import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, RationalQuadratic, WhiteKernel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class CountingGPR(GaussianProcessRegressor):
    evaluations = 0

    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        if eval_gradient:
            CountingGPR.evaluations += 1
        return super().log_marginal_likelihood(theta, eval_gradient=eval_gradient, clone_kernel=clone_kernel)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "data", "co2_monthly.csv"))
    ap.add_argument("--starts", type=int, default=8)
    args = ap.parse_args()
    d = np.loadtxt(args.data, delimiter=",", skiprows=1)
    X, y = d[:, :1], d[:, 1] - d[:, 1].mean()
    kernel = (50.0**2 * RBF(length_scale=50.0)
              + 2.0**2 * RBF(length_scale=100.0) * ExpSineSquared(length_scale=1.0, periodicity=1.0, periodicity_bounds="fixed")
              + 0.5**2 * RationalQuadratic(alpha=1.0, length_scale=1.0) + 0.1**2 * RBF(length_scale=0.1)
              + WhiteKernel(noise_level=0.1**2, noise_level_bounds=(1e-5, 1e5)))
    gpr = CountingGPR(kernel=kernel, normalize_y=False, n_restarts_optimizer=args.starts - 1, random_state=0)
    c0, t0 = time.process_time(), time.perf_counter()
    gpr.fit(X, y)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"n": len(y), "starts": args.starts, "fit_seconds": seconds, "fit_cpu_seconds": cpu,
                      "evaluations": CountingGPR.evaluations,
                      "lml": float(gpr.log_marginal_likelihood_value_), "kernel": str(gpr.kernel_)}))


if __name__ == "__main__":
    main()
