#!/usr/bin/env python3
"""Renders the Mauna Loa CO2 fit of examples/gp_co2 to a PNG: the data, the posterior mean with a
2-sigma band, and 15 years extrapolated.

Runs the example (--json) for the fitted hyperparameters, or takes them with --theta; the posterior
itself is computed here with scikit-learn's GaussianProcessRegressor at that fixed kernel
(optimizer=None), an independent implementation of the same model.

    python3 tools/plot_co2.py [--theta t1,...,t11] [--out docs/gp_co2.png]
"""
import argparse
import json
import os
import subprocess

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--theta", help="natural-log hyperparameters in scikit-learn's order; default: fit with gp_co2")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "gp_co2.png"))
    ap.add_argument("--example", default=os.path.join(os.environ.get("VTAPE_BUILD_DIR", os.path.join(ROOT, "build")),
                                                       "examples", "gp_co2"))
    args = ap.parse_args()
    if args.theta:
        theta, lml = [float(v) for v in args.theta.split(",")], None
    else:
        fit = json.loads(subprocess.run([args.example, "--json"], check=True, capture_output=True, text=True).stdout)
        theta, lml = fit["theta"], fit["lml"]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, RationalQuadratic, WhiteKernel

    d = np.loadtxt(os.path.join(ROOT, "examples", "data", "co2_monthly.csv"), delimiter=",", skiprows=1)
    X, y = d[:, :1], d[:, 1]
    e = np.exp(theta)
    kernel = (e[0] * RBF(e[1]) + e[2] * RBF(e[3]) * ExpSineSquared(e[4], periodicity=1.0, periodicity_bounds="fixed")
              + e[5] * RationalQuadratic(alpha=e[6], length_scale=e[7]) + e[8] * RBF(e[9]) + WhiteKernel(e[10]))
    gpr = GaussianProcessRegressor(kernel=kernel, optimizer=None).fit(X, y - y.mean())
    grid = np.linspace(X.min(), X.max() + 15, 1000)[:, None]
    mean, std = gpr.predict(grid, return_std=True)
    mean += y.mean()

    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(X[:, 0], y, ".", ms=2.5, color="black", label="monthly mean CO2 (Mauna Loa)")
    ax.plot(grid[:, 0], mean, color="tab:blue", lw=1.2, label="posterior mean")
    ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="tab:blue", alpha=0.25, label="2 sigma")
    ax.axvline(X.max(), color="gray", ls=":", lw=1)
    ax.set_xlabel("year")
    ax.set_ylabel("CO2 (ppm)")
    title = "Gaussian-process fit with vtape (examples/gp_co2), 15 years extrapolated"
    ax.set_title(title if lml is None else f"{title}\nlog marginal likelihood {lml:.2f}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
