// The Fourier-basis likelihood of JAX issue 21313 (pulsar-timing style): value and gradient of
// log N(y | 0, F diag(phi) F^T + sigma^2 I) over a batch of (log10_A, gamma) samples, as one
// jitted, vmapped call, in the direct form (a 256 x 256 Cholesky per sample) and the Woodbury form
// (2 ngp x 2 ngp).
//
//   gp_fourier [--nobs 256] [--ngp 32] [--samples 64] [--reps 5]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "gp_fourier_model.hpp"

int main(int argc, char** argv) try {
  std::int64_t nobs = 256, ngp = 32, samples = 64;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (v < 1) throw vt::Error(fmt::format("{} needs a positive integer", a));
    if (a == "--nobs") nobs = v;
    else if (a == "--ngp") ngp = v;
    else if (a == "--samples") samples = v;
    else if (a == "--reps") reps = static_cast<int>(v);
    else throw vt::Error("usage: gp_fourier [--nobs N] [--ngp M] [--samples K] [--reps R]");
  }
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
} catch (const vt::Error& e) {
  fmt::print(stderr, "gp_fourier: {}\n", e.what());
  return 1;
}
