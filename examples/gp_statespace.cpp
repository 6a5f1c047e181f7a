// A Gaussian process in O(n): the Matérn-3/2 kernel as a linear state-space model, its log marginal
// likelihood computed by a Kalman filter written with vt::scan, and its gradient by reverse mode
// through the scan.
//
// k(tau) = s2 (1 + lam |tau|) exp(-lam |tau|), lam = sqrt(3) / ell, is the covariance of the first
// coordinate of the state [f, f'] of dx = F x dt + noise, F = [[0, 1], [-lam^2, -2 lam]], whose
// stationary covariance is Pinf = diag(s2, lam^2 s2). Between observations dt apart the state moves
// by A = expm(F dt) = exp(-lam dt) [[1 + lam dt, dt], [-lam^2 dt, 1 - lam dt]] and gains the noise
// Q = Pinf - A Pinf A^T. The filter predicts (m = A m, P = A P A^T + Q), then updates with y_k
// (innovation v = y_k - m_0, variance S = P_00 + noise): log p(y) = sum_k log N(v_k | 0, S_k).
//
// The example draws a series, checks the filter's value and gradient against the dense Cholesky
// likelihood of the same GP on its first --ncheck points, and times jit(value_and_grad) of the
// filter on all --npoints. theta = [log s, log ell, log noise_sd].
//
//   gp_statespace [--npoints 100000] [--ncheck 500] [--reps 3] [--json]   (--help gives the bounds)
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "example_cli.hpp"

namespace {

constexpr std::int64_t max_npoints = 10'000'000, max_ncheck = 4096, max_reps = 1000;
const double log_2pi = std::log(2.0 * std::numbers::pi);

struct Series {
  vt::Tensor t, y, dt;  // [n] each; dt[0] = 0
};

// Irregular times (exponential gaps of mean 0.1) and a smooth signal plus noise.
Series simulate(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::exponential_distribution<double> gap(10.0);
  std::normal_distribution<double> normal;
  std::vector<double> t, y, dt;
  double now = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = i == 0 ? 0.0 : gap(gen);
    now += d;
    t.push_back(now);
    dt.push_back(d);
    y.push_back(std::sin(now) + 0.5 * std::sin(3.1 * now + 1.0) + 0.3 * normal(gen));
  }
  return {vt::Tensor::from_vector(t, {n}), vt::Tensor::from_vector(y, {n}), vt::Tensor::from_vector(dt, {n})};
}

vt::Tensor part(const vt::Tensor& v, std::int64_t i) { return vt::slice(v, 0, i, i + 1); }

// log p(y | theta) by the Kalman filter: one scan step per observation.
vt::Tensor kalman_log_likelihood(const vt::Tensor& theta, const Series& s) {
  const vt::Tensor s2 = vt::exp(part(theta, 0) * 2.0), lam = std::sqrt(3.0) / vt::exp(part(theta, 1));
  const vt::Tensor noise = vt::exp(part(theta, 2) * 2.0);
  // Per step: A's four entries, Q's three, and the observation: xs [n, 8].
  const vt::Tensor e = vt::exp(-lam * s.dt), ldt = lam * s.dt;
  const vt::Tensor a00 = e * (1.0 + ldt), a01 = e * s.dt, a10 = -e * lam * ldt, a11 = e * (1.0 - ldt);
  const vt::Tensor p0 = s2, p1 = lam * lam * s2;
  const vt::Tensor q00 = p0 - (a00 * a00 * p0 + a01 * a01 * p1), q01 = -(a00 * a10 * p0 + a01 * a11 * p1),
                   q11 = p1 - (a10 * a10 * p0 + a11 * a11 * p1);
  const vt::Tensor xs = vt::stack({a00, a01, a10, a11, q00, q01, q11, s.y}, 1);
  // The carry: the state's mean and covariance [m0, m1, P00, P01, P11], from the stationary prior.
  const vt::Tensor zero = vt::zeros({1});
  const vt::Tensor init = vt::concatenate({zero, zero, p0, zero, p1}, 0);
  auto step = [&](const vt::Tensor& c, const vt::Tensor& x) {
    const vt::Tensor m0 = part(c, 0), m1 = part(c, 1), P00 = part(c, 2), P01 = part(c, 3), P11 = part(c, 4);
    const vt::Tensor A00 = part(x, 0), A01 = part(x, 1), A10 = part(x, 2), A11 = part(x, 3);
    // Predict: m = A m, P = A P A^T + Q.
    const vt::Tensor pm0 = A00 * m0 + A01 * m1, pm1 = A10 * m0 + A11 * m1;
    const vt::Tensor t00 = A00 * P00 + A01 * P01, t01 = A00 * P01 + A01 * P11;
    const vt::Tensor t10 = A10 * P00 + A11 * P01, t11 = A10 * P01 + A11 * P11;
    const vt::Tensor pP00 = t00 * A00 + t01 * A01 + part(x, 4), pP01 = t00 * A10 + t01 * A11 + part(x, 5),
                     pP11 = t10 * A10 + t11 * A11 + part(x, 6);
    // Update with y: innovation v, its variance S, gain k = P[:, 0] / S.
    const vt::Tensor S = pP00 + noise, v = part(x, 7) - pm0, k0 = pP00 / S, k1 = pP01 / S;
    const vt::Tensor next =
        vt::concatenate({pm0 + k0 * v, pm1 + k1 * v, pP00 - k0 * pP00, pP01 - k0 * pP01, pP11 - k1 * pP01}, 0);
    return std::pair{next, (vt::log(S) + v * v / S + log_2pi) * -0.5};
  };
  return vt::sum(vt::scan(step, init, xs).second);
}

// The same likelihood from the dense n x n covariance and its Cholesky factor.
vt::Tensor dense_log_likelihood(const vt::Tensor& theta, const Series& s) {
  const vt::Tensor s2 = vt::exp(part(theta, 0) * 2.0), lam = std::sqrt(3.0) / vt::exp(part(theta, 1));
  const vt::Tensor noise = vt::exp(part(theta, 2) * 2.0);
  const std::int64_t n = s.t.shape(0);
  const vt::Tensor tau = vt::abs(vt::reshape(s.t, {n, 1}) - vt::reshape(s.t, {1, n})) * lam;
  const vt::Tensor K = s2 * (1.0 + tau) * vt::exp(-tau) + noise * vt::eye(n);
  const vt::CholeskyFactor factor = vt::cho_factor(K);
  return (vt::sum(s.y * vt::cho_solve(factor, s.y)) + vt::logdet(factor) + static_cast<double>(n) * log_2pi) * -0.5;
}

double median_ms(int reps, const auto& call) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double max_rel_diff(const vt::Tensor& a, const vt::Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

}  // namespace

int main(int argc, char** argv) try {
  std::int64_t npoints = 100'000, ncheck = 500;
  int reps = 3;
  bool json = false;
  CLI::App app{
      "A Matern-3/2 Gaussian process as a state-space model: its log marginal likelihood by a Kalman filter written "
      "with vt::scan (O(n)) and its gradient through the scan, checked against the dense Cholesky likelihood.",
      "gp_statespace"};
  cli::configure(app);
  cli::add_integer(app, "--npoints", npoints, 1, max_npoints, "N", "observations filtered and timed");
  cli::add_integer(app, "--ncheck", ncheck, 1, max_ncheck, "C", "of them also evaluated densely (at most npoints)");
  cli::add_integer(app, "--reps", reps, 1, max_reps, "R", "timed calls, the median is reported");
  app.add_flag("--json", json, "print the results as one JSON object");
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;
  if (ncheck > npoints) throw vt::Error(fmt::format("--ncheck: {} is more than --npoints ({})", ncheck, npoints));

  const Series all = simulate(npoints, 20261204);
  const Series head{vt::slice(all.t, 0, 0, ncheck), vt::slice(all.y, 0, 0, ncheck), vt::slice(all.dt, 0, 0, ncheck)};
  const vt::Tensor theta = vt::Tensor::from_vector({std::log(0.9), std::log(0.7), std::log(0.35)}, {3});

  auto filter_on = [](const Series& s) {
    return vt::jit(vt::value_and_grad([&s](const vt::Tensor& th) { return kalman_log_likelihood(th, s); }));
  };
  auto check = filter_on(head);
  const auto [kalman_value, kalman_grad] = check(theta);
  const auto [dense_value, dense_grad] =
      vt::value_and_grad([&](const vt::Tensor& th) { return dense_log_likelihood(th, head); })(theta);
  const double value_diff = std::abs(kalman_value.item() - dense_value.item()) / std::abs(dense_value.item());
  const double grad_diff = max_rel_diff(kalman_grad, dense_grad);

  auto full = filter_on(all);
  const auto t0 = std::chrono::steady_clock::now();
  const double value = full(theta).first.item();
  const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double ms = median_ms(reps, [&] { full(theta).first.item(); });
  if (json) {
    fmt::print(
        "{{\"npoints\": {}, \"ncheck\": {}, \"value_rel_diff\": {:.3e}, \"grad_rel_diff\": {:.3e}, "
        "\"log_likelihood\": {:.10g}, \"first_call_ms\": {:.3f}, \"value_and_grad_ms\": {:.3f}}}\n",
        npoints, ncheck, value_diff, grad_diff, value, first_ms, ms);
  } else {
    fmt::print(
        "Kalman filter (scan) and dense Cholesky on the first {} points agree to {:.1e} (value) and {:.1e} "
        "(gradient)\n",
        ncheck, value_diff, grad_diff);
    fmt::print("{} points: log likelihood {:.6f}; value and gradient {:.1f} ms (first call {:.1f} ms)\n", npoints,
               value, ms, first_ms);
  }
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("gp_statespace");
}
