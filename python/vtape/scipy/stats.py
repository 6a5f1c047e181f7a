"""jax.scipy.stats' log densities models use, over vtape's tensors: norm, multivariate_normal, t and gamma."""

from __future__ import annotations

import math
from types import SimpleNamespace

from .. import _vtape
from .._tensor import asarray as _asarray

_t = _asarray  # a tensor as it is, anything else converted

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _log(v):
    """log of a Python number as a number (a weak scalar; NaN for v <= 0, as scipy's), else of a tensor."""
    if isinstance(v, (int, float)):
        return math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)
    return _vtape.log(_t(v))


def _norm_logpdf(x, loc=0.0, scale=1.0):
    """log N(x; loc, scale^2), elementwise."""
    z = (_t(x) - loc) / scale
    return -0.5 * z * z - _log(scale) - _HALF_LOG_2PI


def _norm_cdf(x, loc=0.0, scale=1.0):
    return 0.5 * _vtape.erfc(-((_t(x) - loc) / scale) * 0.7071067811865476)


def _norm_logcdf(x, loc=0.0, scale=1.0):
    """log of the normal CDF; below z = -20, where the CDF's own digits run out, by the asymptotic series
    -z^2/2 - log(-z sqrt(2 pi)) + log(1 - 1/z^2 + 3/z^4 - 15/z^6 + 105/z^8) (relative error below 1e-12)."""
    z = (_t(x) - loc) / scale
    far = z < -20.0
    zf = _vtape.where(far, z, -20.0)  # the series' argument, kept in its range where it is not used
    r = 1.0 / (zf * zf)
    series = -0.5 * zf * zf - _vtape.log(-zf) - _HALF_LOG_2PI + _vtape.log1p(r * (-1.0 + r * (3.0 + r * (-15.0 + 105.0 * r))))
    zn = _vtape.where(far, -20.0, z)
    return _vtape.where(far, series, _vtape.log(0.5 * _vtape.erfc(-zn * 0.7071067811865476)))


def _mvn_logpdf(x, mean, cov):
    """log N(x; mean, cov) for x [..., d], by the Cholesky factor of cov [d, d]."""
    x, mean, cov = _t(x), _t(mean), _t(cov)
    d = cov.shape[-1]
    factor = _vtape.cholesky(cov)
    r = x - mean
    rows = _vtape.reshape(r, (-1, d))
    z = _vtape.triangular_solve(factor, _vtape.swapaxes(rows, -1, -2), lower=True)
    quad = _vtape.reshape(_vtape.sum(z * z, 0), r.shape[:-1])
    log_det = 2.0 * _vtape.sum(_vtape.log(_vtape.diagonal(factor)), -1)
    return -0.5 * quad - 0.5 * log_det - d * _HALF_LOG_2PI


def _t_logpdf(x, df, loc=0.0, scale=1.0):
    """log of Student's t density with df degrees of freedom."""
    df = _t(float(df) if isinstance(df, (int, float)) else df)
    z = (_t(x) - loc) / scale
    return (_vtape.lgamma((df + 1.0) * 0.5) - _vtape.lgamma(df * 0.5) - 0.5 * _vtape.log(df * math.pi)
            - _log(scale) - (df + 1.0) * 0.5 * _vtape.log1p(z * z / df))


def _gamma_logpdf(x, a, loc=0.0, scale=1.0):
    """log of the gamma density with shape a: -inf below loc."""
    a = _t(float(a) if isinstance(a, (int, float)) else a)
    y = (_t(x) - loc) / scale
    inside = y >= 0  # x = loc included: 0 for a = 1, +-inf otherwise (xlogy), as JAX's
    safe = _vtape.where(inside, y, 1.0)
    linear = _vtape.where(a == 1.0, 0.0, (a - 1.0) * _vtape.log(safe))
    value = linear - safe - _vtape.lgamma(a) - _log(scale)
    return _vtape.where(inside, value, -math.inf)


norm = SimpleNamespace(logpdf=_norm_logpdf, pdf=lambda x, loc=0.0, scale=1.0: _vtape.exp(_norm_logpdf(x, loc, scale)),
                       cdf=_norm_cdf, logcdf=_norm_logcdf)
multivariate_normal = SimpleNamespace(logpdf=_mvn_logpdf,
                                      pdf=lambda x, mean, cov: _vtape.exp(_mvn_logpdf(x, mean, cov)))
t = SimpleNamespace(logpdf=_t_logpdf, pdf=lambda x, df, loc=0.0, scale=1.0: _vtape.exp(_t_logpdf(x, df, loc, scale)))
gamma = SimpleNamespace(logpdf=_gamma_logpdf,
                        pdf=lambda x, a, loc=0.0, scale=1.0: _vtape.exp(_gamma_logpdf(x, a, loc, scale)))
