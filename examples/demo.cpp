// A first look at vtape, the README's short tour as a program: a small Gaussian negative
// log-likelihood with its value and gradient, then a Gaussian-process log marginal likelihood
// evaluated at several starts at once with jit(vmap(value_and_grad(f))). CI runs it, so the tour
// stays in step with the library.
#include <fmt/core.h>

#include <cmath>
#include <numbers>
#include <vtape/vtape.hpp>

#include "example_cli.hpp"

int main(int argc, char** argv) try {
  CLI::App app{
      "A first look at vtape (the README's tour): a Gaussian negative log-likelihood with its value and "
      "gradient, then a Gaussian-process likelihood at 8 starts at once. Takes no arguments.",
      "demo"};
  cli::configure(app);
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;

  {
    vt::Tensor x = vt::linspace(-1, 1, 5);  // float64 unless a dtype is given
    vt::Tensor y = vt::Tensor::from_vector({-1.9, -1.1, 0.1, 0.9, 2.1}, {5});

    auto nll = [&](const vt::Tensor& theta) {  // theta = [slope, log sigma]
      vt::Tensor r = (y - vt::slice(theta, 0, 0, 1) * x) / vt::exp(vt::slice(theta, 0, 1, 2));
      return vt::sum(0.5 * vt::square(r) + vt::slice(theta, 0, 1, 2));
    };
    auto [value, gradient] = vt::value_and_grad(nll)(vt::Tensor::from_vector({1.5, 0.0}, {2}));
    fmt::print("nll      = {}\ngradient = {}\n", value, gradient);  // tensors print as numpy prints them
    fmt::print("nll      = {:.6f}\n", value.item());                // or read them: item, at, to_vector
  }

  // Data for the GP: n points on [0, 1], their squared distances, noisy observations.
  const int count = 50;
  const double n = count;
  const vt::Tensor t = vt::linspace(0, 1, count);
  const vt::Tensor d2 = vt::square(vt::reshape(t, {count, 1}) - vt::reshape(t, {1, count}));
  const vt::Tensor y = vt::sin(t * 6.0) + vt::randn({count}, 7) * 0.1;
  const vt::Tensor eye_n = vt::eye(count);

  // A Gaussian-process log marginal likelihood, log N(y | 0, K(theta)), through one Cholesky factor.
  auto lml = [&](const vt::Tensor& theta) {  // theta = [log amplitude, log length, log noise]
    auto p = [&](int i) { return vt::exp(vt::slice(theta, 0, i, i + 1)); };
    vt::Tensor K = p(0) * vt::exp(d2 * -0.5 / vt::square(p(1))) + eye_n * p(2);
    vt::CholeskyFactor f = vt::cho_factor(K);
    return -0.5 * (vt::sum(y * vt::cho_solve(f, y)) + vt::logdet(f)) - 0.5 * n * std::log(2 * std::numbers::pi);
  };

  // Many starts at once: vmap maps the per-start value and gradient over a batch, jit plans it
  // once for every batch size.
  auto step = vt::jit(vt::vmap(vt::value_and_grad(lml)));
  vt::Tensor thetas = vt::randn({8, 3}, /*seed=*/1);         // 8 starts, one per row
  auto [values, grads] = step(vt::as_batch(thetas));         // 8 values; 8 gradients of shape [3]
  std::vector<double> lmls = values.to_vector<double>();     // batch first: lmls[k] is start k's
  auto [v3, g3] = step(vt::as_batch(vt::randn({3, 3}, 2)));  // another batch size: the same plan
  fmt::print("log marginal likelihood at 8 starts = {}\n", values);
  fmt::print("gradients = {}\n", vt::unbatch(grads));
  fmt::print("start 0: {:.6f}; traces for batch sizes 8 and 3: {}\n", lmls[0], step.counters().traces);

  // Second derivatives: the Hessian of the log marginal likelihood (3 x 3) at start 0, and the
  // curvature along the gradient there, g^T H g, from a Hessian-vector product (no Hessian formed).
  // (At an optimum, sqrt(diag(-H^-1)) are the Laplace approximation's error bars: gp_co2 --errors.)
  vt::Tensor theta0 = vt::reshape(vt::slice(thetas, 0, 0, 1), {3});
  vt::Tensor H = vt::hessian(lml)(theta0);
  vt::Tensor g0 = vt::grad(lml)(theta0);
  vt::Tensor curvature = vt::sum(g0 * vt::hvp(lml)(theta0, g0));
  fmt::print("hessian = {}\ncurvature along the gradient = {:.6f}\n", H, curvature.item());

  // A loop: an AR(1) filter with a learned coefficient, written with scan (one op; its body is
  // traced once, not unrolled), and its gradient, which runs the body's pullback backwards.
  vt::Tensor series = vt::randn({50}, 3);
  auto ar1 = [&](const vt::Tensor& phi) {
    auto step = [&](const vt::Tensor& prev, const vt::Tensor& x) {  // carry: the previous value
      return std::pair{x, vt::square(x - phi * prev)};              // {next carry, this step's y}
    };
    auto [last, errors] = vt::scan(step, vt::zeros({}), series);  // errors: [50]
    return vt::sum(errors);
  };
  fmt::print("scan: ar1 loss {:.6f}, d loss / d phi {:.6f}\n", ar1(vt::Tensor::scalar(0.5)).item(),
             vt::grad(ar1)(vt::Tensor::scalar(0.5)).item());
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("demo");
}
