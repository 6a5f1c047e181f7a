// Second derivatives against the gradient, in one run: a Hessian-vector product and a whole Hessian,
// each as a ratio to one value-and-gradient call of the same function, all jitted, on one theta.
//
//   build/tools/bench_hessian [--reps 7] [--json]
//
// Programs:
//   seed  the seed program (examples/seed_cholesky_grad.cpp): mean(cho_solve(cho_factor(F diag(p^2)
//         F^T + I), 1)), F 256 x 128, p [128]: gradient and hvp (a 128 x 128 Hessian is 128 sweeps);
//   co2   -lml of examples/gp_co2 (521 points, 11 hyperparameters): gradient, hvp and the 11 x 11
//         Hessian.
// Times are medians of `reps` calls after a first one; compile_ms is a fresh jitted callable's trace
// and plan (JitCounters). tools/bench/jax_hessian.py is the JAX twin.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vtape/vtape.hpp>

#include "gp_model.hpp"

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Reads the result back, so that a call has ended when it is timed.
void finish(const vt::Tensor& t) { (void)t.to_vector<double>(); }

template <class F>
double median_ms(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// What tracing and planning cost: a fresh callable's compile (no call), as its counters report.
template <class Make, class... Args>
double compile_ms(Make make, const Args&... args) {
  auto f = make();
  f.compile(args...);
  const vt::JitCounters c = f.counters();
  return c.trace_ms + c.plan_ms;
}

void report(const std::string& program, const std::string& what, double ms, double gradient_ms, double compile,
            bool json) {
  if (json)
    fmt::print(
        "{{\"program\": \"{}\", \"what\": \"{}\", \"ms\": {:.4f}, \"per_gradient\": {:.3f}, \"compile_ms\": {:.3f}}}\n",
        program, what, ms, ms / gradient_ms, compile);
  else
    fmt::print("{:5} {:9}: {:9.3f} ms  {:6.2f}x the gradient  compile {:.2f} ms\n", program, what, ms, ms / gradient_ms,
               compile);
}

template <class F>
void measure(const std::string& program, F f, const vt::Tensor& x, bool with_hessian, int reps, bool json) {
  const vt::Tensor v = vt::randn(x.shape(), 3);
  auto make_grad = [&] { return vt::jit(vt::value_and_grad(f)); };
  auto make_hvp = [&] { return vt::jit(vt::hvp(f)); };
  auto make_hessian = [&] { return vt::jit(vt::hessian(f)); };
  auto g = make_grad();
  auto h = make_hvp();
  finish(g(x).first);
  finish(h(x, v));
  const double gradient = median_ms([&] { finish(g(x).first); }, reps);
  const double product = median_ms([&] { finish(h(x, v)); }, reps);
  report(program, "gradient", gradient, gradient, compile_ms(make_grad, x), json);
  report(program, "hvp", product, gradient, compile_ms(make_hvp, x, v), json);
  if (!with_hessian) return;
  auto H = make_hessian();
  finish(H(x));
  const double hessian = median_ms([&] { finish(H(x)); }, reps);
  report(program, "hessian", hessian, gradient, compile_ms(make_hessian, x), json);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else {
      fmt::print(stderr, "usage: bench_hessian [--reps R] [--json]\n");
      return 2;
    }
  }
  {
    const std::int64_t nobs = 256, ngp = 64;
    std::vector<double> basis(static_cast<std::size_t>(nobs * 2 * ngp));
    for (std::int64_t i = 0; i < nobs; ++i)
      for (std::int64_t j = 0; j < ngp; ++j) {
        const double w = 2 * std::numbers::pi * static_cast<double>(j + 1) * static_cast<double>(i) / (nobs - 1.0);
        basis[static_cast<std::size_t>(i * 2 * ngp + 2 * j)] = std::sin(w);
        basis[static_cast<std::size_t>(i * 2 * ngp + 2 * j + 1)] = std::cos(w);
      }
    const vt::Tensor F = vt::Tensor::from_vector(basis, {nobs, 2 * ngp}), ones = vt::ones({nobs}), I = vt::eye(nobs);
    auto seed = [=](const vt::Tensor& p) {
      return vt::mean(vt::cho_solve(vt::cho_factor(vt::matmul(F * vt::square(p), F.t()) + I), ones));
    };
    measure("seed", seed, vt::randn({2 * ngp}, 1), false, reps, json);
  }
  {
    const gp::Series series = gp::read_csv(VTAPE_CO2_DATA);
    const auto n = static_cast<std::int64_t>(series.t.size());
    double mean = 0;
    for (double v : series.y) mean += v / static_cast<double>(n);
    std::vector<double> centred;
    for (double v : series.y) centred.push_back(v - mean);
    const gp::Inputs inputs(series.t, vt::Device{});
    const vt::Tensor y = vt::Tensor::from_vector(centred, {n});
    auto nll = [=](const vt::Tensor& theta) { return vt::neg(gp::log_marginal_likelihood(theta, inputs, y)); };
    measure("co2", nll, vt::Tensor::from_vector(gp::sklearn_initial, {gp::n_theta}), true, reps, json);
  }
  return 0;
}
