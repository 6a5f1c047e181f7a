// Eight schools, non-centred (Rubin 1981; the Stan and PyMC example): theta = [mu, log tau, eta_1 .. eta_8],
// log p = log N(mu | 0, 5) + log HalfCauchy(tau | 5) + log tau + sum_j log N(eta_j | 0, 1)
//       + sum_j log N(y_j | mu + tau eta_j, sigma_j), constants dropped. A tiny model: ten parameters,
// eight observations, a dozen small ops whose fixed costs are the whole story.
#include <cmath>

#include "../zoo.hpp"

namespace zoo {

Model eight_schools() {
  constexpr std::int64_t schools = 8;
  const std::vector<double> y{28, 8, -3, 7, -1, 1, 18, 12}, sigma{15, 10, 16, 11, 9, 11, 10, 18};
  Model model;
  model.name = "eight_schools";
  model.about = "eight schools, non-centred: [mu, log tau, eta(8)], normal and half-Cauchy priors, 10 parameters";
  model.base = {4.0, std::log(3.0)};
  for (std::int64_t j = 0; j < schools; ++j) model.base.push_back(0.1 * std::sin(static_cast<double>(j)));
  const vt::Tensor Y = vt::Tensor::from_vector(y, {schools}), S = vt::Tensor::from_vector(sigma, {schools});
  model.log_density = [Y, S](const vt::Tensor& theta) {
    const vt::Tensor mu = vt::reshape(vt::slice(theta, 0, 0, 1), {});
    const vt::Tensor log_tau = vt::reshape(vt::slice(theta, 0, 1, 2), {}), tau = vt::exp(log_tau);
    const vt::Tensor eta = vt::slice(theta, 0, 2, 2 + schools);
    const vt::Tensor prior =
        -vt::square(mu) / 50.0 - vt::log1p(vt::square(tau / 5.0)) + log_tau - 0.5 * vt::sum(vt::square(eta));
    return prior - 0.5 * vt::sum(vt::square((Y - (mu + tau * eta)) / S));
  };
  model.limit = [y, sigma](const double* thetas, std::int64_t batch, double* values, double* grads) {
    constexpr std::int64_t p = 2 + schools;
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b) {
      const double* th = thetas + b * p;
      double* g = grads + b * p;
      const double mu = th[0], tau = std::exp(th[1]), u = tau / 5.0;
      double value = -mu * mu / 50.0 - std::log1p(u * u) + th[1], d_mu = -mu / 25.0, d_tau = 0.0;
      for (std::int64_t j = 0; j < schools; ++j) {
        const double eta = th[2 + j], s2 = sigma[static_cast<std::size_t>(j)] * sigma[static_cast<std::size_t>(j)];
        const double e = y[static_cast<std::size_t>(j)] - mu - tau * eta, r = e / s2;
        value -= 0.5 * (eta * eta + e * r);
        d_mu += r;
        d_tau += r * eta;
        g[2 + j] = tau * r - eta;
      }
      values[b] = value;
      g[0] = d_mu;
      g[1] = tau * (d_tau - 2.0 * u / 5.0 / (1.0 + u * u)) + 1.0;
    }
  };
  return model;
}

}  // namespace zoo
