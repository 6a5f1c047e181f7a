"""Five models written the way a JAX user writes them, parameterised by the namespaces they import, so that one text
runs under JAX (`jnp, lax, jsp = jax.numpy, jax.lax, jax.scipy`) and under vtape (`vtape.numpy, vtape.lax,
vtape.scipy`): porting is the import line. Used by test_ports.py and tools/reference/make_port_reference.py."""

import numpy as np

RNG = np.random.default_rng(2026)


def kalman(jnp, lax, jsp, params, y):
    """A local-level state-space model's log-likelihood by the Kalman filter, a scan over the observations."""
    log_q, log_r = params
    q, r = jnp.exp(log_q), jnp.exp(log_r)

    def step(carry, yt):
        m, p = carry
        p_pred = p + q
        s = p_pred + r
        k = p_pred / s
        resid = yt - m
        ll = -0.5 * (jnp.log(2 * jnp.pi * s) + resid ** 2 / s)
        return (m + k * resid, (1 - k) * p_pred), ll

    _, lls = lax.scan(step, (0.0, 10.0), y)
    return jnp.sum(lls)


def mixture(jnp, lax, jsp, params, x):
    """A three-component 1-D Gaussian mixture's log-likelihood, in the [N, K] layout, by logsumexp."""
    logits, mu, log_sigma = params[:3], params[3:6], params[6:]
    log_w = logits - jsp.special.logsumexp(logits)
    lp = jsp.stats.norm.logpdf(x[:, None], mu, jnp.exp(log_sigma))
    return jnp.sum(jsp.special.logsumexp(log_w + lp, axis=1))


def eight_schools(jnp, lax, jsp, params, y, sigma):
    """The non-centred eight schools model's log density (with the log-scale Jacobian)."""
    mu, log_tau, eta = params[0], params[1], params[2:]
    tau = jnp.exp(log_tau)
    theta = mu + tau * eta
    lp = jsp.stats.norm.logpdf(mu, 0.0, 5.0) + jsp.stats.t.logpdf(tau, 3.0, 0.0, 5.0) + log_tau
    lp = lp + jnp.sum(jsp.stats.norm.logpdf(eta))
    return lp + jnp.sum(jsp.stats.norm.logpdf(y, theta, sigma))


def kepler(jnp, lax, jsp, params, t, rv):
    """A Keplerian radial-velocity curve: the eccentric anomaly by 20 Newton steps in a fori_loop, the true anomaly by
    arctan2, a Gaussian log-likelihood."""
    log_period, e_logit, k, w, t0 = params
    period = jnp.exp(log_period)
    e = 1.0 / (1.0 + jnp.exp(-e_logit))
    mean_anomaly = 2 * jnp.pi * (t - t0) / period

    def newton(i, ecc):
        return ecc - (ecc - e * jnp.sin(ecc) - mean_anomaly) / (1 - e * jnp.cos(ecc))

    ecc = lax.fori_loop(0, 20, newton, mean_anomaly)
    nu = 2 * jnp.arctan2(jnp.sqrt(1 + e) * jnp.sin(ecc / 2), jnp.sqrt(1 - e) * jnp.cos(ecc / 2))
    model = k * (jnp.cos(nu + w) + e * jnp.cos(w))
    return -0.5 * jnp.sum((rv - model) ** 2)


def gp(jnp, lax, jsp, params, x, y):
    """An ARD squared-exponential Gaussian process's log marginal likelihood: distances by broadcasting, a Cholesky
    factor by cho_factor, cho_solve."""
    n, d = x.shape
    log_ls, log_amp, log_noise = params[:d], params[d], params[d + 1]
    xs = x / jnp.exp(log_ls)
    d2 = jnp.sum((xs[:, None, :] - xs[None, :, :]) ** 2, axis=-1)
    cov = jnp.exp(2 * log_amp) * jnp.exp(-0.5 * d2) + (jnp.exp(2 * log_noise) + 1e-6) * jnp.eye(n)
    c = jsp.linalg.cho_factor(cov, lower=True)
    alpha = jsp.linalg.cho_solve(c, y)
    return -0.5 * jnp.dot(y, alpha) - jnp.sum(jnp.log(jnp.diagonal(c[0]))) - 0.5 * n * jnp.log(2 * jnp.pi)


def _data():
    t = np.sort(RNG.uniform(0, 30, 40))
    kalman_y = np.cumsum(RNG.standard_normal(60) * 0.3) + RNG.standard_normal(60) * 0.5
    mix_x = np.concatenate([RNG.normal(-2, 0.5, 30), RNG.normal(1, 0.8, 40), RNG.normal(4, 0.3, 20)])
    gp_x = RNG.uniform(-2, 2, (25, 3))
    gp_y = np.sin(gp_x[:, 0]) + 0.5 * gp_x[:, 1] ** 2 + 0.1 * RNG.standard_normal(25)
    rv = 12.0 * np.cos(2 * np.pi * t / 7.3 + 0.4) + RNG.standard_normal(40)
    y8 = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    s8 = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    return {
        "kalman": (kalman, (kalman_y,), 2),
        "mixture": (mixture, (mix_x,), 9),
        "eight_schools": (eight_schools, (y8, s8), 10),
        "kepler": (kepler, (t, rv), 5),
        "gp": (gp, (gp_x, gp_y), 5),
    }


MODELS = _data()


def parameters(name: str, batch: int = 4) -> np.ndarray:
    """A fixed batch of parameter vectors for a model: [batch, its number of parameters]."""
    rng = np.random.default_rng(sum(map(ord, name)))
    p = MODELS[name][2]
    base = {"kepler": np.array([np.log(7.3), -1.0, 11.0, 0.4, 0.2])}.get(name, np.zeros(p))
    return base + 0.3 * rng.standard_normal((batch, p))
