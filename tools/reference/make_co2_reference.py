#!/usr/bin/env python3
"""Reference for tests/test_gp.cpp: scikit-learn's log marginal likelihood of the Mauna Loa CO2 data
and its gradient (in sklearn's theta order, natural-log hyperparameters) at the documented learned kernel.

Writes tests/data/co2/{theta,lml,grad}.npy.   python3 tools/reference/make_co2_reference.py  (needs scikit-learn)
"""
import pathlib

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, RationalQuadratic, WhiteKernel

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "data" / "co2"
out.mkdir(parents=True, exist_ok=True)
d = np.loadtxt(root / "examples" / "data" / "co2_monthly.csv", delimiter=",", skiprows=1)
X, y = d[:, :1], d[:, 1] - d[:, 1].mean()
kernel = (44.8**2 * RBF(51.6) + 2.64**2 * RBF(91.5) * ExpSineSquared(1.48, periodicity=1.0, periodicity_bounds="fixed")
          + 0.536**2 * RationalQuadratic(alpha=2.89, length_scale=0.968) + 0.188**2 * RBF(0.122) + WhiteKernel(0.0367))
gpr = GaussianProcessRegressor(kernel=kernel, optimizer=None).fit(X, y)
lml, grad = gpr.log_marginal_likelihood(kernel.theta, eval_gradient=True)
np.save(out / "theta.npy", kernel.theta)
np.save(out / "lml.npy", np.array(lml))
np.save(out / "grad.npy", grad)
print(f"lml {lml:.10f} at theta {kernel.theta}")
