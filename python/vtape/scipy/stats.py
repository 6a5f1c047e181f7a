"""jax.scipy.stats' log densities models use, over vtape's tensors: norm, multivariate_normal, t and gamma."""

from __future__ import annotations

import math
from types import SimpleNamespace

from .. import _vtape
from .._tensor import Tensor, asarray as _asarray

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else _asarray(x)


def _log(v):
    """log of a Python number as a number (a weak scalar), else of a tensor."""
    return math.log(v) if isinstance(v, (int, float)) else _vtape.log(_t(v))


def _norm_logpdf(x, loc=0.0, scale=1.0):
    """log N(x; loc, scale^2), elementwise."""
    z = (_t(x) - loc) / scale
    return -0.5 * z * z - _log(scale) - _HALF_LOG_2PI


def _norm_cdf(x, loc=0.0, scale=1.0):
    return 0.5 * _vtape.erfc(-((_t(x) - loc) / scale) * 0.7071067811865476)


def _norm_logcdf(x, loc=0.0, scale=1.0):
    return _vtape.log(_norm_cdf(x, loc, scale))


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
    inside = y > 0
    safe = _vtape.where(inside, y, 1.0)
    value = (a - 1.0) * _vtape.log(safe) - safe - _vtape.lgamma(a) - _log(scale)
    return _vtape.where(inside, value, -math.inf)


norm = SimpleNamespace(logpdf=_norm_logpdf, pdf=lambda x, loc=0.0, scale=1.0: _vtape.exp(_norm_logpdf(x, loc, scale)),
                       cdf=_norm_cdf, logcdf=_norm_logcdf)
multivariate_normal = SimpleNamespace(logpdf=_mvn_logpdf,
                                      pdf=lambda x, mean, cov: _vtape.exp(_mvn_logpdf(x, mean, cov)))
t = SimpleNamespace(logpdf=_t_logpdf, pdf=lambda x, df, loc=0.0, scale=1.0: _vtape.exp(_t_logpdf(x, df, loc, scale)))
gamma = SimpleNamespace(logpdf=_gamma_logpdf,
                        pdf=lambda x, a, loc=0.0, scale=1.0: _vtape.exp(_gamma_logpdf(x, a, loc, scale)))
