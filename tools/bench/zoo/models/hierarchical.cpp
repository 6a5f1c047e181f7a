// Many small GP factors sharing hyperparameters: G = 64 groups of m = 16 observations,
// log p = sum_g log N(y_g - mu 1 | 0, K_g), K_g = amp^2 exp(-(t_gi - t_gj)^2 / (2 ell^2)) + sigma^2 I,
// theta = [log amp, log ell, log sigma, mu]. The vtape form factors the 64 matrices as one batched cho_factor;
// the limit loops over the groups with a fixed-size 16 x 16 LLT in place, K^-1 from L^-T, and the analytic gradient
// 0.5 tr((alpha alpha^T - K^-1) dK/dtheta), sum(alpha) for mu, all in one pass per group.
#include <vtape/core/eigen.hpp>
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <memory>
#include <numbers>

#include "../zoo.hpp"

namespace zoo {

Model hierarchical() {
  constexpr std::int64_t groups = 64, m = 16;
  std::vector<double> t(static_cast<std::size_t>(groups * m)), y(t.size()), d(static_cast<std::size_t>(groups * m * m));
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t j = 0; j < m; ++j) {
      const auto gj = static_cast<std::size_t>(g * m + j);
      t[gj] = static_cast<double>(j) / 16.0 + 0.01 * static_cast<double>(g);
      y[gj] = std::sin(3.0 * t[gj] + 0.1 * static_cast<double>(g)) + 0.2 * std::cos(11.0 * t[gj]) +
              0.05 * std::sin(97.0 * static_cast<double>(gj));
    }
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < m; ++j) {
        const double dt = t[static_cast<std::size_t>(g * m + i)] - t[static_cast<std::size_t>(g * m + j)];
        d[static_cast<std::size_t>((g * m + i) * m + j)] = dt * dt;
      }
  Model model;
  model.name = "hierarchical";
  model.about =
      "64 groups x 16 points, per-group RBF GP with shared [log amp, log ell, log sigma, mu]: "
      "batched cho_factor of [64, 16, 16]";
  model.base = {0.0, std::log(0.3), std::log(0.1), 0.05};
  const vt::Tensor D = vt::Tensor::from_vector(d, {groups, m, m}), Y = vt::Tensor::from_vector(y, {groups, m});
  const vt::Tensor identity = vt::eye(m);
  const double log_2pi_terms = 0.5 * static_cast<double>(groups * m) * std::log(2.0 * std::numbers::pi);
  model.log_density = [D, Y, identity, log_2pi_terms](const vt::Tensor& theta) {
    const vt::Tensor amp = vt::exp(vt::slice(theta, 0, 0, 1)), ell = vt::exp(vt::slice(theta, 0, 1, 2));
    const vt::Tensor sigma = vt::exp(vt::slice(theta, 0, 2, 3)), mu = vt::slice(theta, 0, 3, 4);
    const vt::Tensor K = vt::square(amp) * vt::exp(D * -0.5 / vt::square(ell)) + vt::square(sigma) * identity;
    const vt::CholeskyFactor f = vt::cho_factor(K);
    const vt::Tensor r = vt::reshape(Y - mu, {groups, m, 1});
    return -0.5 * (vt::sum(r * vt::cho_solve(f, r)) + vt::sum(vt::logdet(f))) - log_2pi_terms;
  };

  // The limit reads only the strict lower triangle of each group's squared differences (D_g[i, j], i > j, packed
  // column by column, so that column j of K and of K^-1 below it is contiguous): K is symmetric, D = 0 on the diagonal.
  constexpr std::int64_t pairs = m * (m - 1) / 2;
  auto packed = std::make_shared<std::vector<double>>(static_cast<std::size_t>(groups * pairs));
  for (std::int64_t g = 0, k = 0; g < groups; ++g)
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t i = j + 1; i < m; ++i, ++k)
        (*packed)[static_cast<std::size_t>(k)] = d[static_cast<std::size_t>((g * m + i) * m + j)];
  auto ys = std::make_shared<const std::vector<double>>(y);
  model.limit = [packed, ys, log_2pi_terms](const double* thetas, std::int64_t batch, double* values, double* grads) {
    using Mat = Eigen::Matrix<double, m, m>;
    using Vec = Eigen::Matrix<double, m, 1>;
    using Pairs = Eigen::Array<double, pairs, 1>;
#pragma omp parallel
    {
      Mat K, X, Kinv;
      Vec z, alpha;
      Pairs scaled;  // amp^2 exp(-D / (2 ell^2)) below the diagonal, kept for the gradient
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < batch; ++b) {
        const double* th = thetas + b * 4;
        const double amp2 = std::exp(2.0 * th[0]), inv_ell2 = std::exp(-2.0 * th[1]), s2 = std::exp(2.0 * th[2]);
        const double mu = th[3], c = -0.5 * inv_ell2;
        double value = 0, g_amp = 0, g_ell = 0, g_sigma = 0, g_mu = 0;
        bool positive_definite = true;
        for (std::int64_t g = 0; g < groups; ++g) {
          const Eigen::Map<const Pairs> dg(packed->data() + g * pairs);
          scaled = amp2 * (c * dg).exp();  // Eigen's vectorised exp
          for (std::int64_t j = 0, k = 0; j < m; ++j) {
            K(j, j) = amp2 + s2;
            for (std::int64_t i = j + 1; i < m; ++i, ++k) K(i, j) = scaled(k);
          }
          const Eigen::LLT<Eigen::Ref<Mat>, Eigen::Lower> llt(K);
          positive_definite = positive_definite && llt.info() == Eigen::Success;
          // X = L^-T by column operations on I (full fixed-size columns vectorise; Eigen's small triangular
          // solves do not), then K^-1 = X X^T as rank-1 updates (X is upper triangular).
          X.setIdentity();
          double diagonal = 1;  // prod L_ii >= sigma^16: one log per group
          for (std::int64_t k = 0; k < m; ++k) {
            diagonal *= K(k, k);
            X.col(k) *= 1.0 / K(k, k);
            for (std::int64_t i = k + 1; i < m; ++i) X.col(i) -= K(i, k) * X.col(k);
          }
          Kinv.setZero();
          for (std::int64_t k = 0; k < m; ++k)
            for (std::int64_t j = 0; j <= k; ++j) Kinv.col(j) += X(j, k) * X.col(k);
          // z = L^-1 (y_g - mu): the quadratic form is z^T z, and alpha = K^-1 (y_g - mu) = X z.
          const Eigen::Map<const Vec> yg(ys->data() + g * m);
          alpha.setZero();
          for (std::int64_t k = 0; k < m; ++k) {
            z(k) = X.col(k).dot(yg) - mu * X.col(k).sum();
            alpha += z(k) * X.col(k);
          }
          value -= 0.5 * z.squaredNorm() + std::log(diagonal);
          // W = alpha alpha^T - K^-1; dK/dlog amp = 2 scaled, dK/dlog ell = scaled D / ell^2, dK/dlog sigma = 2 s2 I.
          double w_scaled = 0, w_scaled_d = 0, trace = 0;
          for (std::int64_t j = 0, k = 0; j < m; ++j) {
            for (std::int64_t i = j + 1; i < m; ++i, ++k) {
              const double ws = (alpha(i) * alpha(j) - Kinv(i, j)) * scaled(k);
              w_scaled += ws;
              w_scaled_d += ws * dg(k);
            }
            trace += alpha(j) * alpha(j) - Kinv(j, j);
          }
          g_amp += 2.0 * w_scaled + amp2 * trace;  // off-diagonal pairs twice, 0.5 * 2 cancels
          g_ell += w_scaled_d * inv_ell2;          // 0.5 * 2 (both triangles), D = 0 on the diagonal
          g_sigma += s2 * trace;
          g_mu += alpha.sum();
        }
        // vtape raises on a matrix that is not positive definite; a batch of examples reports NaN for it instead.
        if (!positive_definite) value = g_amp = g_ell = g_sigma = g_mu = std::numeric_limits<double>::quiet_NaN();
        values[b] = value - log_2pi_terms;
        double* gr = grads + b * 4;
        gr[0] = g_amp;
        gr[1] = g_ell;
        gr[2] = g_sigma;
        gr[3] = g_mu;
      }
    }
  };
  return model;
}

}  // namespace zoo
