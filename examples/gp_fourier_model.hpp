#pragma once
// The likelihood family of JAX issue 21313, as used in pulsar-timing analyses: residuals y at
// times t modelled as a Fourier-basis Gaussian process with a power-law spectrum plus white noise,
//   log N(y | 0, F diag(phi) F^T + sigma^2 I),
//   phi_k = 10^(2 (log10_A + 14)) / (12 pi^2) f_k^-gamma / T   (both the sin and cos of f_k),
// f_k = k / T for k = 1..ngp, times in years, amplitudes relative to A = 1e-14.
#include <cmath>
#include <numbers>
#include <random>
#include <vtape/vtape.hpp>

namespace gpf {

struct Problem {
  vt::Tensor F;         // [nobs, 2 ngp]: sin in even columns, cos in odd ones
  vt::Tensor freqs;     // [2 ngp]: f_k for each column
  vt::Tensor y;         // [nobs]
  double span = 0;      // T in years
  double sigma2 = 1.0;  // white-noise variance
};

// phi for (log10_A, gamma) = params [2].
inline vt::Tensor spectrum(const vt::Tensor& params, const Problem& p) {
  const vt::Tensor log10_a = vt::slice(params, 0, 0, 1), gamma = vt::slice(params, 0, 1, 2);
  const double c = std::log(10.0);
  return vt::exp((log10_a + 14.0) * (2 * c) - gamma * vt::log(p.freqs)) /
         (12 * std::numbers::pi * std::numbers::pi * p.span);
}

// Direct form: one Cholesky of the nobs x nobs covariance.
inline vt::Tensor log_likelihood(const vt::Tensor& params, const Problem& p) {
  const auto n = static_cast<double>(p.y.shape(0));
  const vt::Tensor C = vt::matmul(p.F * spectrum(params, p), p.F.t()) + vt::eye(p.y.shape(0)) * p.sigma2;
  const vt::CholeskyFactor f = vt::cho_factor(C);
  return (vt::sum(p.y * vt::cho_solve(f, p.y)) + vt::logdet(f) + n * std::log(2 * std::numbers::pi)) * -0.5;
}

// Woodbury form: a Cholesky of the 2ngp x 2ngp matrix Sigma = diag(1/phi) + F^T F / sigma^2.
inline vt::Tensor log_likelihood_woodbury(const vt::Tensor& params, const Problem& p) {
  const auto n = static_cast<double>(p.y.shape(0));
  const vt::Tensor phi = spectrum(params, p);
  const vt::Tensor fty = vt::matmul(p.y, p.F);
  const vt::CholeskyFactor f = vt::cho_factor(vt::diag(1.0 / phi) + vt::matmul(p.F.t(), p.F) / p.sigma2);
  const vt::Tensor quad = vt::sum(p.y * p.y) / p.sigma2 - vt::sum(fty * vt::cho_solve(f, fty)) / (p.sigma2 * p.sigma2);
  const vt::Tensor logdet = vt::logdet(f) + vt::sum(vt::log(phi)) + n * std::log(p.sigma2);
  return (quad + logdet + n * std::log(2 * std::numbers::pi)) * -0.5;
}

// Synthetic residuals from the model itself (log10_A = -14, gamma = 13/3), fixed seed.
inline Problem synthetic(std::int64_t nobs, std::int64_t ngp, std::uint64_t seed, double span = 10.0) {
  Problem p;
  p.span = span;
  std::vector<double> f(static_cast<std::size_t>(nobs * 2 * ngp)), fr(static_cast<std::size_t>(2 * ngp));
  for (std::int64_t k = 0; k < ngp; ++k) fr[2 * k] = fr[2 * k + 1] = static_cast<double>(k + 1) / span;
  for (std::int64_t i = 0; i < nobs; ++i) {
    const double t = span * static_cast<double>(i) / static_cast<double>(std::max<std::int64_t>(nobs - 1, 1));
    for (std::int64_t k = 0; k < ngp; ++k) {
      const double w = 2 * std::numbers::pi * fr[2 * k] * t;
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * k)] = std::sin(w);
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * k + 1)] = std::cos(w);
    }
  }
  p.F = vt::Tensor::from_vector(f, {nobs, 2 * ngp});
  p.freqs = vt::Tensor::from_vector(fr, {2 * ngp});
  const std::vector<double> phi = spectrum(vt::Tensor::from_vector({-14.0, 13.0 / 3.0}, {2}), p).to_vector<double>();
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<double> a(phi.size()), y(static_cast<std::size_t>(nobs));
  for (std::size_t k = 0; k < a.size(); ++k) a[k] = std::sqrt(phi[k]) * normal(gen);
  for (std::int64_t i = 0; i < nobs; ++i) {
    double v = std::sqrt(p.sigma2) * normal(gen);
    for (std::size_t k = 0; k < a.size(); ++k) v += f[static_cast<std::size_t>(i) * a.size() + k] * a[k];
    y[static_cast<std::size_t>(i)] = v;
  }
  p.y = vt::Tensor::from_vector(y, {nobs});
  return p;
}

}  // namespace gpf
