// The Fourier-basis likelihood of JAX issue 21313 (pulsar-timing style): value and gradient of
// log N(y | 0, F diag(phi) F^T + sigma^2 I) over a batch of (log10_A, gamma) samples, as one
// jitted, vmapped call, in the direct form (a 256 x 256 Cholesky per sample) and the Woodbury form
// (2 ngp x 2 ngp).
//
//   gp_fourier [--nobs 256] [--ngp 32] [--samples 64] [--reps 5]
//   (--help gives the bounds: nobs 1..8192, ngp 1..4096, samples 1..65536, reps 1..1e6)
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "example_cli.hpp"
#include "gp_fourier_model.hpp"

namespace {

// Bounds, so that no size computed from them can overflow: nobs <= 8192, 2 ngp <= 8192 and at most
// 65536 samples, so the largest tensor, [samples, nobs, nobs] of float64 in the direct form, is at
// most 2^16 * 2^26 * 8 bytes = 32 TiB (more than a machine has: that is an out-of-memory error).
constexpr std::int64_t max_nobs = 8192, max_ngp = 4096, max_samples = 65536, max_reps = 1000000;

}  // namespace

int main(int argc, char** argv) try {
  std::int64_t nobs = 256, ngp = 32, samples = 64;
  int reps = 5;
  CLI::App app{"The Fourier-basis likelihood log N(y | 0, F diag(phi) F^T + sigma^2 I) of JAX issue 21313: value and "
               "gradient over a batch of (log10_A, gamma) samples, in the direct and the Woodbury forms.",
               "gp_fourier"};
  cli::configure(app);
  app.footer("The bounds keep every size in range: the largest tensor, [samples, nobs, nobs] of float64,\n"
             "is at most 32 TiB. "
             "Asking for more memory than the machine has ends with a one-line out-of-memory error.");
  cli::add_integer(app, "--nobs", nobs, 1, max_nobs, "N", "observations: the direct form factors nobs x nobs matrices");
  cli::add_integer(app, "--ngp", ngp, 1, max_ngp, "M", "Fourier frequencies: 2 ngp basis columns");
  cli::add_integer(app, "--samples", samples, 1, max_samples, "K", "parameter samples, the batch");
  cli::add_integer(app, "--reps", reps, 1, max_reps, "R", "timed calls of each form, the median is reported");
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;

  const gpf::Problem p = gpf::synthetic(nobs, ngp, 20261130);
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  std::vector<double> theta;
  for (std::int64_t k = 0; k < samples; ++k) {
    theta.push_back(-14.0 + 0.3 * normal(gen));
    theta.push_back(13.0 / 3.0 + 0.5 * normal(gen));
  }
  const vt::Tensor batch = vt::as_batch(vt::Tensor::from_vector(theta, {samples, 2}));

  auto direct = vt::jit(vt::vmap(vt::value_and_grad([&](const vt::Tensor& q) { return gpf::log_likelihood(q, p); })));
  auto woodbury =
      vt::jit(vt::vmap(vt::value_and_grad([&](const vt::Tensor& q) { return gpf::log_likelihood_woodbury(q, p); })));
  auto time_ms = [&](auto& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f(batch);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const auto [v1, g1] = direct(batch);
  const auto [v2, g2] = woodbury(batch);
  const std::vector<double> a = v1.to_vector<double>(), b = v2.to_vector<double>(), ga = g1.to_vector<double>();
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]) / std::abs(a[i]));
  fmt::print("{} samples of (log10_A, gamma); nobs = {}, {} Fourier components\n", samples, nobs, 2 * ngp);
  fmt::print("{:>10} {:>10} {:>16} {:>14} {:>14}\n", "log10_A", "gamma", "log likelihood", "d/dlog10_A", "d/dgamma");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, a.size()); ++i)
    fmt::print("{:>10.4f} {:>10.4f} {:>16.6f} {:>14.6f} {:>14.6f}\n", theta[2 * i], theta[2 * i + 1], a[i], ga[2 * i],
               ga[2 * i + 1]);
  fmt::print("direct and Woodbury forms agree to {:.1e} (relative); value_and_grad of the whole batch: direct {:.1f} ms, "
             "Woodbury {:.1f} ms (median of {})\n",
             diff, time_ms(direct), time_ms(woodbury), reps);
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("gp_fourier");
}
