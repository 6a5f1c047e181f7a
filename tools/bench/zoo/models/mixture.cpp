// A 1-D Gaussian mixture of K = 3 components over N = 5000 points, written in the [N, K] layout a JAX user
// writes (x[:, None] - mu): theta = [logits(3), mu(3), log s(3)],
// log p = sum_n logsumexp_k(log w_k + log N(x_n | mu_k, s_k)) - |logits|^2 / 2 - |mu|^2 / 200 - |log s|^2 / 2,
// w = softmax(logits). Every elementwise op runs over [5000, 3], a tiny innermost axis.
#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <numbers>

#include "../zoo.hpp"

namespace zoo {

namespace {
constexpr std::int64_t n = 5000, k = 3;
}

Model mixture() {
  const std::array<double, k> centres{-2.0, 0.5, 3.0};
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    x[static_cast<std::size_t>(i)] =
        centres[static_cast<std::size_t>(i % k)] + 0.7 * std::sin(12.9898 * static_cast<double>(i));
  Model model;
  model.name = "mixture";
  model.about = "1-D Gaussian mixture, 5000 points, 3 components, [N, K] layout (x[:, None] - mu), logsumexp";
  model.base = {0.0, 0.0, 0.0, -1.5, 0.3, 2.5};
  for (std::int64_t j = 0; j < k; ++j) model.base.push_back(std::log(0.8));
  const double half_log_2pi = 0.5 * std::log(2.0 * std::numbers::pi);
  const vt::Tensor X = vt::reshape(vt::Tensor::from_vector(x, {n}), {n, 1});
  model.log_density = [X, half_log_2pi](const vt::Tensor& theta) {
    const vt::Tensor logits = vt::slice(theta, 0, 0, k), mu = vt::slice(theta, 0, k, 2 * k);
    const vt::Tensor log_s = vt::slice(theta, 0, 2 * k, 3 * k);
    const vt::Tensor log_w = logits - vt::logsumexp(logits);
    const vt::Tensor z = (X - mu) / vt::exp(log_s);
    const vt::Tensor components = log_w - 0.5 * vt::square(z) - log_s - half_log_2pi;
    return vt::sum(vt::logsumexp(components, {1})) - 0.5 * vt::sum(vt::square(logits)) -
           vt::sum(vt::square(mu)) / 200.0 - 0.5 * vt::sum(vt::square(log_s));
  };

  // The limit: per example, the K columns of z and of the log terms as contiguous arrays over the points
  // (the [K, N] layout), the responsibilities r = exp(l - logsumexp(l)) give every gradient:
  // d logits_k = sum_n r_nk - N w_k - logits_k, d mu_k = sum_n r_nk z_nk / s_k - mu_k / 100,
  // d log s_k = sum_n r_nk (z_nk^2 - 1) - log s_k.
  const Eigen::ArrayXd xa = Eigen::Map<const Eigen::ArrayXd>(x.data(), n);
  model.limit = [xa, half_log_2pi](const double* thetas, std::int64_t batch, double* values, double* grads) {
    constexpr std::int64_t p = 3 * k;
#pragma omp parallel
    {
      std::array<Eigen::ArrayXd, k> z, l;
      for (auto& a : z) a.resize(n);
      for (auto& a : l) a.resize(n);
      Eigen::ArrayXd top(n), total(n);
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < batch; ++b) {
        const double* th = thetas + b * p;
        double* g = grads + b * p;
        const double most = std::max({th[0], th[1], th[2]});
        double norm = 0.0;
        for (std::int64_t j = 0; j < k; ++j) norm += std::exp(th[j] - most);
        const double log_norm = most + std::log(norm);
        double value = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
          const auto jj = static_cast<std::size_t>(j);
          const double log_s = th[2 * k + j];
          z[jj] = (xa - th[k + j]) * std::exp(-log_s);
          l[jj] = (th[j] - log_norm - log_s - half_log_2pi) - 0.5 * z[jj].square();
          value -= 0.5 * th[j] * th[j] + th[k + j] * th[k + j] / 200.0 + 0.5 * log_s * log_s;
        }
        top = l[0].max(l[1]).max(l[2]);
        for (auto& a : l) a = (a - top).exp();
        total = l[0] + l[1] + l[2];
        value += (top + total.log()).sum();
        for (std::int64_t j = 0; j < k; ++j) {
          const auto jj = static_cast<std::size_t>(j);
          l[jj] /= total;  // the responsibilities
          g[j] = l[jj].sum() - static_cast<double>(n) * std::exp(th[j] - log_norm) - th[j];
          g[k + j] = (l[jj] * z[jj]).sum() * std::exp(-th[2 * k + j]) - th[k + j] / 100.0;
          g[2 * k + j] = (l[jj] * (z[jj].square() - 1.0)).sum() - th[2 * k + j];
        }
        values[b] = value;
      }
    }
  };
  return model;
}

}  // namespace zoo
