// Grouped data: a Gaussian likelihood with per-class noise parameters and per-group correlated
// noise (pulsar timing's EFAC and ECORR), written with take and segment_sum, so one evaluation
// costs O(n) instead of the O(n^3) of a dense Cholesky.
//
// Point i has residual r_i, measurement error e_i, a group g(i) (an observing epoch) and, through
// its group, a class k(g) (the backend that recorded the epoch). For a parameter vector
// theta = [log_efac (K), log_ecorr (K)] the covariance is
//   C = diag(sigma^2) + U diag(J) U^T,   sigma_i = efac[k(g(i))] e_i,   J_g = ecorr[k(g)]^2,
// with U the n x G indicator of the groups. C is block diagonal with one rank-one update per block,
// so (Sherman-Morrison per group, with w_i = 1 / sigma_i^2, s_g = sum_{i in g} w_i and
// a_g = sum_{i in g} w_i r_i)
//   r^T C^-1 r = sum_i w_i r_i^2 - sum_g J_g a_g^2 / (1 + J_g s_g),
//   log det C  = sum_i log sigma_i^2 + sum_g log(1 + J_g s_g).
// The gathers (efac[k(g(i))], ecorr[k(g)]) are `take`, the per-group sums `segment_sum`.
//
// The example draws its own data, evaluates jit(value_and_grad) of the summed log likelihood over a
// vmapped batch of parameter vectors, checks the first --ncheck of them against the dense form
// (the n x n covariance built with indicator matrices, factored by cholesky) and times both.
//
//   gp_grouped [--npoints 2000] [--ngroups 200] [--nclasses 4] [--nbatch 64] [--ncheck 2] [--reps 5] [--json]
//   (--help gives the bounds)
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "example_cli.hpp"

namespace {

// Bounds: the dense check holds [ncheck, npoints, npoints] of float64, at most 2^4 * 2^26 * 8 bytes
// = 8 GiB; the grouped form is O(nbatch * npoints).
constexpr std::int64_t max_npoints = 8192, max_ngroups = 8192, max_nclasses = 64, max_nbatch = 65536, max_ncheck = 16,
                       max_reps = 1000000;

struct Data {
  std::int64_t n, groups, classes;
  vt::Tensor residual, error;        // [n] float64
  vt::Tensor group_of_point;         // [n] int64
  vt::Tensor class_of_point;         // [n] int64, k(g(i))
  vt::Tensor class_of_group;         // [G] int64
  vt::Tensor group_indicator;        // [n, G] 0/1, only for the dense form
  vt::Tensor point_class_indicator;  // [n, K] 0/1, only for the dense form
  vt::Tensor group_class_indicator;  // [G, K] 0/1, only for the dense form
  std::vector<double> truth;         // [2K]: log_efac, log_ecorr
};

// Points fall into groups at random (unsorted, some groups may be empty); each group has a class;
// the residuals are drawn from the model at `truth`.
Data simulate(std::int64_t n, std::int64_t groups, std::int64_t classes, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(0.5, 1.5);
  std::uniform_int_distribution<std::int64_t> pick_group(0, groups - 1), pick_class(0, classes - 1);
  Data d{n, groups, classes, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  for (std::int64_t k = 0; k < classes; ++k) d.truth.push_back(std::log(0.8 + 0.2 * static_cast<double>(k)));
  for (std::int64_t k = 0; k < classes; ++k) d.truth.push_back(std::log(0.5 + 0.3 * static_cast<double>(k)));

  std::vector<std::int64_t> class_of_group(static_cast<std::size_t>(groups)), group_of_point, class_of_point;
  for (auto& k : class_of_group) k = pick_class(gen);
  std::vector<double> group_shift(static_cast<std::size_t>(groups));
  for (std::int64_t g = 0; g < groups; ++g)
    group_shift[static_cast<std::size_t>(g)] =
        std::exp(d.truth[static_cast<std::size_t>(classes + class_of_group[static_cast<std::size_t>(g)])]) *
        normal(gen);
  std::vector<double> residual, error, by_group(static_cast<std::size_t>(n * groups), 0.0),
      by_point_class(static_cast<std::size_t>(n * classes), 0.0),
      by_group_class(static_cast<std::size_t>(groups * classes), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t g = pick_group(gen), k = class_of_group[static_cast<std::size_t>(g)];
    const double e = uniform(gen);
    group_of_point.push_back(g);
    class_of_point.push_back(k);
    error.push_back(e);
    residual.push_back(std::exp(d.truth[static_cast<std::size_t>(k)]) * e * normal(gen) +
                       group_shift[static_cast<std::size_t>(g)]);
    by_group[static_cast<std::size_t>(i * groups + g)] = 1.0;
    by_point_class[static_cast<std::size_t>(i * classes + k)] = 1.0;
  }
  for (std::int64_t g = 0; g < groups; ++g)
    by_group_class[static_cast<std::size_t>(g * classes + class_of_group[static_cast<std::size_t>(g)])] = 1.0;
  d.residual = vt::Tensor::from_vector(residual, {n});
  d.error = vt::Tensor::from_vector(error, {n});
  d.group_of_point = vt::Tensor::from_ints(group_of_point, {n});
  d.class_of_point = vt::Tensor::from_ints(class_of_point, {n});
  d.class_of_group = vt::Tensor::from_ints(class_of_group, {groups});
  d.group_indicator = vt::Tensor::from_vector(by_group, {n, groups});
  d.point_class_indicator = vt::Tensor::from_vector(by_point_class, {n, classes});
  d.group_class_indicator = vt::Tensor::from_vector(by_group_class, {groups, classes});
  return d;
}

const double log_2pi = std::log(2.0 * std::numbers::pi);

// log N(r | 0, C(theta)) for one parameter vector, in O(n): gathers and per-group sums.
vt::Tensor grouped_log_likelihood(const vt::Tensor& theta, const Data& d) {
  const vt::Tensor log_efac = vt::slice(theta, 0, 0, d.classes);
  const vt::Tensor log_ecorr = vt::slice(theta, 0, d.classes, 2 * d.classes);
  const vt::Tensor sigma2 = vt::square(vt::take(vt::exp(log_efac), d.class_of_point) * d.error);  // [n]
  const vt::Tensor w = 1.0 / sigma2;
  const vt::Tensor s = vt::segment_sum(w, d.group_of_point, d.groups);               // [G]
  const vt::Tensor a = vt::segment_sum(w * d.residual, d.group_of_point, d.groups);  // [G]
  const vt::Tensor J = vt::exp(vt::take(log_ecorr, d.class_of_group) * 2.0);         // [G]
  const vt::Tensor quadratic = vt::sum(w * vt::square(d.residual)) - vt::sum(J * vt::square(a) / (1.0 + J * s));
  const vt::Tensor log_det = vt::sum(vt::log(sigma2)) + vt::sum(vt::log1p(J * s));
  return (quadratic + log_det + static_cast<double>(d.n) * log_2pi) * -0.5;
}

// The same likelihood from the n x n covariance, with indicator matrices for the gathers: O(n^3).
vt::Tensor dense_log_likelihood(const vt::Tensor& theta, const Data& d) {
  const vt::Tensor efac = vt::exp(vt::slice(theta, 0, 0, d.classes));
  const vt::Tensor ecorr = vt::exp(vt::slice(theta, 0, d.classes, 2 * d.classes));
  const vt::Tensor sigma2 = vt::square(vt::matmul(d.point_class_indicator, efac) * d.error);  // [n]
  const vt::Tensor J = vt::square(vt::matmul(d.group_class_indicator, ecorr));                // [G]
  const vt::Tensor C = vt::diag(sigma2) + vt::matmul(d.group_indicator * J, d.group_indicator.t());
  const vt::CholeskyFactor factor = vt::cho_factor(C);
  const vt::Tensor quadratic = vt::sum(d.residual * vt::cho_solve(factor, d.residual));
  return (quadratic + vt::logdet(factor) + static_cast<double>(d.n) * log_2pi) * -0.5;
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

}  // namespace

int main(int argc, char** argv) try {
  std::int64_t npoints = 2000, ngroups = 200, nclasses = 4, nbatch = 64, ncheck = 2;
  int reps = 5;
  bool json = false;
  CLI::App app{
      "A Gaussian likelihood with per-class white noise and per-group correlated noise, written with take and "
      "segment_sum (O(n)), checked against and timed beside the dense n x n Cholesky form.",
      "gp_grouped"};
  cli::configure(app);
  app.footer(
      "The dense check holds ncheck covariances of npoints x npoints float64 (at most 8 GiB within the bounds).");
  cli::add_integer(app, "--npoints", npoints, 1, max_npoints, "N", "data points");
  cli::add_integer(app, "--ngroups", ngroups, 1, max_ngroups, "G", "groups with correlated noise (epochs)");
  cli::add_integer(app, "--nclasses", nclasses, 1, max_nclasses, "K", "classes with their own parameters (backends)");
  cli::add_integer(app, "--nbatch", nbatch, 1, max_nbatch, "B", "parameter vectors evaluated at once");
  cli::add_integer(app, "--ncheck", ncheck, 1, max_ncheck, "C", "of them also evaluated densely (at most nbatch)");
  cli::add_integer(app, "--reps", reps, 1, max_reps, "R", "timed calls of each form, the median is reported");
  app.add_flag("--json", json, "print the results as one JSON object");
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;
  if (ncheck > nbatch) throw vt::Error(fmt::format("--ncheck: {} is more than --nbatch ({})", ncheck, nbatch));

  const Data d = simulate(npoints, ngroups, nclasses, 20261201);
  std::mt19937_64 gen(11);
  std::normal_distribution<double> normal;
  std::vector<double> thetas;
  for (std::int64_t b = 0; b < nbatch; ++b)
    for (double t : d.truth) thetas.push_back(t + 0.1 * normal(gen));
  const vt::Tensor batch = vt::as_batch(vt::Tensor::from_vector(thetas, {nbatch, 2 * nclasses}));
  const vt::Tensor checked = vt::as_batch(vt::slice(vt::unbatch(batch), 0, 0, ncheck));

  // value_and_grad of the summed log likelihood: the gradient holds one row per parameter vector.
  auto over_batch = [&](auto log_likelihood) {
    return vt::jit(vt::value_and_grad([&d, log_likelihood](const vt::Tensor& thetas) {
      return vt::sum(vt::vmap([&](const vt::Tensor& theta) { return log_likelihood(theta, d); })(thetas));
    }));
  };
  auto grouped = over_batch(grouped_log_likelihood);
  auto dense = over_batch(dense_log_likelihood);
  auto per_example = vt::jit(vt::vmap([&](const vt::Tensor& theta) { return grouped_log_likelihood(theta, d); }));

  const auto [grouped_sum, grouped_grad] = grouped(batch);
  const auto [dense_sum, dense_grad] = dense(checked);
  const std::vector<double> values = per_example(checked).to_vector<double>();
  const std::vector<double> g = grouped_grad.to_vector<double>(), h = dense_grad.to_vector<double>();
  // The dense value is the sum over the checked vectors; compare it with the grouped values' sum.
  double grouped_checked_sum = 0;
  for (double v : values) grouped_checked_sum += v;
  const double value_diff = std::abs(grouped_checked_sum - dense_sum.item()) / std::abs(dense_sum.item());
  double grad_diff = 0, grad_scale = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    grad_diff = std::max(grad_diff, std::abs(g[i] - h[i]));
    grad_scale = std::max(grad_scale, std::abs(h[i]));
  }
  grad_diff /= grad_scale;

  const double grouped_ms = median_ms(reps, [&] { grouped(batch).first.item(); });
  const double dense_ms = median_ms(reps, [&] { dense(checked).first.item(); });
  const double grouped_per = grouped_ms / static_cast<double>(nbatch),
               dense_per = dense_ms / static_cast<double>(ncheck);
  if (json) {
    fmt::print(
        "{{\"npoints\": {}, \"ngroups\": {}, \"nclasses\": {}, \"nbatch\": {}, \"ncheck\": {}, "
        "\"value_rel_diff\": {:.3e}, \"grad_rel_diff\": {:.3e}, \"grouped_ms_per_vector\": {:.5f}, "
        "\"dense_ms_per_vector\": {:.3f}, \"log_likelihood_0\": {:.12g}}}\n",
        npoints, ngroups, nclasses, nbatch, ncheck, value_diff, grad_diff, grouped_per, dense_per, values[0]);
    return 0;
  }
  fmt::print("{} points in {} groups of {} classes; {} parameter vectors [log_efac, log_ecorr] x {}\n", npoints,
             ngroups, nclasses, nbatch, nclasses);
  fmt::print("log likelihood of the first vectors: ");
  for (double v : values) fmt::print("{:.6f} ", v);
  fmt::print(
      "\ngrouped (take + segment_sum) and dense (Cholesky of the {} x {} covariance) agree to {:.1e} (value) "
      "and {:.1e} (gradient, relative)\n",
      npoints, npoints, value_diff, grad_diff);
  fmt::print(
      "value_and_grad per parameter vector: grouped {:.4f} ms (batch of {}), dense {:.2f} ms (batch of {}): "
      "{:.0f}x (median of {})\n",
      grouped_per, nbatch, dense_per, ncheck, dense_per / grouped_per, reps);
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("gp_grouped");
}
