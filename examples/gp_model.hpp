#pragma once
// Gaussian-process pieces shared by examples/gp_co2 and its tests: the CSV reader, scikit-learn's
// Mauna Loa CO2 kernel in log-hyperparameters, and the log marginal likelihood.
#include <fmt/core.h>

#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace gp {

struct Series {
  std::vector<double> t, y;
};

// Two numeric columns with a header line; any other line is an error naming the file and line.
inline Series read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw vt::Error(fmt::format("read_csv: cannot open '{}'", path));
  Series s;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 || line.empty()) continue;  // header
    std::stringstream fields(line);
    std::string a, b, rest;
    std::size_t used_a = 0, used_b = 0;
    double x = 0, v = 0;
    bool ok = std::getline(fields, a, ',') && std::getline(fields, b, ',') && !std::getline(fields, rest, ',');
    try {
      if (ok) {
        x = std::stod(a, &used_a);
        v = std::stod(b, &used_b);
      }
    } catch (const std::exception&) {
      ok = false;
    }
    ok = ok && used_a == a.size() && used_b == b.size() && std::isfinite(x) && std::isfinite(v);
    if (!ok)
      throw vt::Error(fmt::format("read_csv: {}:{}: expected two numbers 't,value', got '{}'", path, number, line));
    s.t.push_back(x);
    s.y.push_back(v);
  }
  if (s.t.empty()) throw vt::Error(fmt::format("read_csv: '{}' has no data rows", path));
  return s;
}

// theta, natural logs, in scikit-learn's order:
// [c1, l1, c2, l2, l_sine, c3, alpha, l3, c4, l4, noise]
constexpr int n_theta = 11;
inline const std::vector<double> sklearn_initial = {std::log(50.0 * 50.0), std::log(50.0),     std::log(2.0 * 2.0),
                                                    std::log(100.0),       std::log(1.0),      std::log(0.5 * 0.5),
                                                    std::log(1.0),         std::log(1.0),      std::log(0.1 * 0.1),
                                                    std::log(0.1),         std::log(0.1 * 0.1)};

// Pairwise quantities of the inputs that do not depend on theta.
struct Inputs {
  vt::Tensor sq;    // (t_i - t_j)^2
  vt::Tensor sin2;  // sin^2(pi (t_i - t_j) / periodicity), periodicity fixed at 1
  vt::Tensor eye;
  explicit Inputs(const std::vector<double>& t, vt::Device device = {}) {
    const auto n = static_cast<std::int64_t>(t.size());
    std::vector<double> sq(static_cast<std::size_t>(n * n)), s2(sq.size());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const double d = t[static_cast<std::size_t>(i)] - t[static_cast<std::size_t>(j)];
        sq[static_cast<std::size_t>(i * n + j)] = d * d;
        const double s = std::sin(std::numbers::pi * d);
        s2[static_cast<std::size_t>(i * n + j)] = s * s;
      }
    this->sq = vt::Tensor::from_vector(sq, {n, n}, vt::DType::f64, device);
    this->sin2 = vt::Tensor::from_vector(s2, {n, n}, vt::DType::f64, device);
    eye = vt::eye(n, vt::DType::f64, device);
  }
};

// The covariance matrix for one theta [11]:
//   c1 RBF(l1) + c2 RBF(l2) ExpSineSquared(l_sine, 1) + c3 RQ(alpha, l3) + c4 RBF(l4) + (noise + 1e-10) I
inline vt::Tensor covariance(const vt::Tensor& theta, const Inputs& x) {
  auto p = [&](int i) { return vt::exp(vt::slice(theta, 0, i, i + 1)); };
  const vt::Tensor long_term = p(0) * vt::exp(x.sq * (-0.5) / vt::square(p(1)));
  const vt::Tensor seasonal = p(2) * vt::exp(x.sq * (-0.5) / vt::square(p(3)) - x.sin2 * 2.0 / vt::square(p(4)));
  const vt::Tensor alpha = p(6);
  const vt::Tensor medium = p(5) * vt::pow(1.0 + x.sq / (alpha * vt::square(p(7)) * 2.0), vt::neg(alpha));
  const vt::Tensor noise_corr = p(8) * vt::exp(x.sq * (-0.5) / vt::square(p(9)));
  // 1e-10 on the diagonal: scikit-learn's GaussianProcessRegressor default (alpha).
  return long_term + seasonal + medium + noise_corr + x.eye * (p(10) + 1e-10);
}

// log N(y | 0, K) = -y^T K^-1 y / 2 - log det K / 2 - n log(2 pi) / 2
inline vt::Tensor log_marginal_likelihood(const vt::Tensor& theta, const Inputs& x, const vt::Tensor& y) {
  const vt::CholeskyFactor f = vt::cho_factor(covariance(theta, x));
  const double n = static_cast<double>(y.shape(0));
  return (vt::sum(y * vt::cho_solve(f, y)) + vt::logdet(f)) * -0.5 - 0.5 * n * std::log(2 * std::numbers::pi);
}

// The kernel in scikit-learn's notation, 3 significant figures.
inline std::string sklearn_notation(const std::vector<double>& theta) {
  auto v = [&](int i) { return std::exp(theta[static_cast<std::size_t>(i)]); };
  auto g = [](double x) { return fmt::format("{:.3g}", x); };
  return fmt::format(
      "{}**2 * RBF(length_scale={}) + {}**2 * RBF(length_scale={}) * ExpSineSquared(length_scale={}, periodicity=1) + "
      "{}**2 * RationalQuadratic(alpha={}, length_scale={}) + {}**2 * RBF(length_scale={}) + "
      "WhiteKernel(noise_level={})",
      g(std::sqrt(v(0))), g(v(1)), g(std::sqrt(v(2))), g(v(3)), g(v(4)), g(std::sqrt(v(5))), g(v(6)), g(v(7)),
      g(std::sqrt(v(8))), g(v(9)), g(v(10)));
}

}  // namespace gp
