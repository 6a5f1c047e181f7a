// The Fourier-basis likelihood of JAX issue 21313 (pulsar-timing style): value and gradient of
// log N(y | 0, F diag(phi) F^T + sigma^2 I) over a batch of (log10_A, gamma) samples, as one
// jitted, vmapped call, in the direct form (a 256 x 256 Cholesky per sample) and the Woodbury form
// (2 ngp x 2 ngp).
//
//   gp_fourier [--nobs 256] [--ngp 32] [--samples 64] [--reps 5]
//   (--help gives the bounds: nobs 1..8192, ngp 1..4096, samples 1..65536, reps 1..1e6)
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>

#include "example_cli.hpp"
#include "gp_fourier_model.hpp"

namespace {

// Bounds, so that no size computed from them can overflow: nobs <= 8192, 2 ngp <= 8192 and at most
// 65536 samples, so the largest tensor, [samples, nobs, nobs] of float64 in the direct form, is at
// most 2^16 * 2^26 * 8 bytes = 32 TiB (more than a machine has: that is an out-of-memory error).
constexpr std::int64_t max_nobs = 8192, max_ngp = 4096, max_samples = 65536, max_reps = 1000000;

// A run's estimated time assumes this rate per thread: a round figure for the CPU's float64
// factorizations, good enough to tell seconds from hours.
constexpr double assumed_flops_per_thread = 1e10;
// Estimated runs longer than this report their progress on stderr.
constexpr double quiet_seconds = 2.0;

// The memory the system can still give (Linux's MemAvailable), or 0 when unknown.
double available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  return 0;
}

double gib(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

std::string duration(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min", seconds / 60);
  if (seconds < 2 * 86400) return fmt::format("{:.1f} h", seconds / 3600);
  return fmt::format("{:.0f} days", seconds / 86400);
}

// One form of the likelihood: its jitted value and gradient, and its work per sample.
struct Form {
  const char* name;
  std::function<std::pair<vt::Tensor, vt::Tensor>(const vt::Tensor&)> run;
  std::function<vt::PlanSummary(const vt::Tensor&)> compile;
  double flops_per_sample;
  std::int64_t factor_order;
};

}  // namespace

int main(int argc, char** argv) try {
  std::int64_t nobs = 256, ngp = 32, samples = 64;
  int reps = 5;
  CLI::App app{
      "The Fourier-basis likelihood log N(y | 0, F diag(phi) F^T + sigma^2 I) of JAX issue 21313: value and "
      "gradient over a batch of (log10_A, gamma) samples, in the direct and the Woodbury forms.",
      "gp_fourier"};
  cli::configure(app);
  app.footer(
      "The bounds keep every size in range: the largest tensor, [samples, nobs, nobs] of float64,\n"
      "is at most 32 TiB. Asking for more memory than the machine has ends, before any work, with a one-line\n"
      "out-of-memory error; a run estimated to take more than a few seconds reports its progress on stderr.");
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
  // Samples [from, to) as a batch: every batch size runs the same plan.
  auto samples_batch = [&](std::int64_t from, std::int64_t to) {
    return vt::as_batch(
        vt::Tensor::from_vector(std::vector<double>(theta.begin() + 2 * from, theta.begin() + 2 * to), {to - from, 2}));
  };
  const vt::Tensor batch = samples_batch(0, samples);

  auto direct = vt::jit(vt::vmap(vt::value_and_grad([&](const vt::Tensor& q) { return gpf::log_likelihood(q, p); })));
  auto woodbury =
      vt::jit(vt::vmap(vt::value_and_grad([&](const vt::Tensor& q) { return gpf::log_likelihood_woodbury(q, p); })));
  // Work per sample: the direct form builds, factors and inverts (for the gradient) an nobs x nobs
  // matrix; the Woodbury form does the same at order 2 ngp.
  const double n = static_cast<double>(nobs), m2 = 2.0 * static_cast<double>(ngp);
  const std::vector<Form> forms{
      {"direct",
       [&](const vt::Tensor& b) {
         auto [v, g] = direct(b);
         return std::pair{v, g};
       },
       [&](const vt::Tensor& b) { return direct.compile(b); }, n * n * n + 6 * m2 * n * n, nobs},
      {"Woodbury",
       [&](const vt::Tensor& b) {
         auto [v, g] = woodbury(b);
         return std::pair{v, g};
       },
       [&](const vt::Tensor& b) { return woodbury.compile(b); }, m2 * m2 * m2 + 5 * m2 * m2, 2 * ngp},
  };

  // Refuse up front what cannot fit: each thread holds one example's working set at least (the
  // plan's arena per example), beside the plan's fixed buffers and the problem's matrices.
  const int threads = std::max(1, omp_get_max_threads());
  const double in_flight = static_cast<double>(std::min<std::int64_t>(samples, threads));
  const double problem_bytes = 8.0 * (n * m2 * 3 + m2 * m2 + n);  // F, F^T and F^T F, y
  const double available = available_bytes();
  for (const Form& f : forms) {
    const vt::PlanSummary s = f.compile(batch);
    const double need = static_cast<double>(s.arena_bytes_fixed) +
                        static_cast<double>(s.arena_bytes_per_example) * in_flight + problem_bytes;
    if (available > 0 && need > available)
      return cli::fail("gp_fourier",
                       fmt::format("out of memory: the {} form needs at least {:.1f} GiB ({:.2f} GiB for each of the "
                                   "{} samples in flight on {} threads), more than the {:.1f} GiB available; lower "
                                   "--nobs or --ngp, or OMP_NUM_THREADS",
                                   f.name, gib(need), gib(static_cast<double>(s.arena_bytes_per_example)),
                                   static_cast<std::int64_t>(in_flight), threads, gib(available)));
  }

  // Runs a form over every sample. A run estimated to take long goes by slices of the batch (no new
  // trace: the plan serves every batch size) and reports its progress on stderr after each.
  // The plan runs examples in parallel: at most one thread per sample is busy.
  const double busy_threads = std::min<double>(threads, static_cast<double>(samples));
  auto estimated_seconds = [&](const Form& f) {
    return f.flops_per_sample * static_cast<double>(samples) / (assumed_flops_per_thread * busy_threads);
  };
  auto evaluate = [&](const Form& f, std::vector<double>& values, std::vector<double>& grads) {
    const double estimate = estimated_seconds(f);
    if (estimate < quiet_seconds) {
      const auto [v, g] = f.run(batch);
      values = v.to_vector<double>();
      grads = g.to_vector<double>();
      return;
    }
    fmt::print(stderr,
               "gp_fourier: {} form: {} sample{}, each an order-{} factorization and its gradient ({:.1e} "
               "flops): about {} on {} thread{}\n",
               f.name, samples, samples == 1 ? "" : "s", f.factor_order, f.flops_per_sample, duration(estimate),
               threads, threads == 1 ? "" : "s");
    // Slices of a few seconds, and of whole multiples of the threads, which they keep busy.
    const std::int64_t per_slice = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(static_cast<double>(samples) * quiet_seconds / estimate) / threads);
    const std::int64_t slice = std::min(samples, per_slice * threads);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t from = 0; from < samples; from += slice) {
      const std::int64_t to = std::min(samples, from + slice);
      const auto [v, g] = f.run(samples_batch(from, to));
      const std::vector<double> vv = v.to_vector<double>(), gv = g.to_vector<double>();
      values.insert(values.end(), vv.begin(), vv.end());
      grads.insert(grads.end(), gv.begin(), gv.end());
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print(
          stderr, "gp_fourier: {} form: {} of {} samples in {}{}\n", f.name, to, samples, duration(spent),
          to < samples
              ? ", about " + duration(spent / static_cast<double>(to) * static_cast<double>(samples - to)) + " left"
              : "");
    }
  };
  auto time_ms = [&](const Form& f) {
    const double estimate = estimated_seconds(f);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f.run(batch);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (estimate >= quiet_seconds)
        fmt::print(stderr, "gp_fourier: timing the {} form: call {} of {} took {}\n", f.name, r + 1, reps,
                   duration(t.back() / 1000));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::vector<double> a, ga, b, gb;
  evaluate(forms[0], a, ga);
  evaluate(forms[1], b, gb);
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]) / std::abs(a[i]));
  fmt::print("{} samples of (log10_A, gamma); nobs = {}, {} Fourier components\n", samples, nobs, 2 * ngp);
  fmt::print("{:>10} {:>10} {:>16} {:>14} {:>14}\n", "log10_A", "gamma", "log likelihood", "d/dlog10_A", "d/dgamma");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, a.size()); ++i)
    fmt::print("{:>10.4f} {:>10.4f} {:>16.6f} {:>14.6f} {:>14.6f}\n", theta[2 * i], theta[2 * i + 1], a[i], ga[2 * i],
               ga[2 * i + 1]);
  const double direct_ms = time_ms(forms[0]), woodbury_ms = time_ms(forms[1]);
  fmt::print(
      "direct and Woodbury forms agree to {:.1e} (relative); value_and_grad of the whole batch: direct {:.1f} ms, "
      "Woodbury {:.1f} ms (median of {})\n",
      diff, direct_ms, woodbury_ms, reps);
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("gp_fourier");
}
