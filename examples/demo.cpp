// A first look at vtape: a small Gaussian negative log-likelihood, its value and its gradient.
#include <fmt/core.h>

#include <vtape/vtape.hpp>

#include "example_cli.hpp"

int main(int argc, char** argv) try {
  CLI::App app{"A first look at vtape: a small Gaussian negative log-likelihood, its value and its gradient. Takes no "
               "arguments.",
               "demo"};
  cli::configure(app);
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;

  const vt::Tensor x = vt::linspace(-1.0, 1.0, 5);
  const vt::Tensor y = vt::Tensor::from_vector({-1.9, -1.1, 0.1, 0.9, 2.1}, {5});

  // Least squares with a learned noise scale: theta = [slope, log sigma].
  auto nll = [&](const vt::Tensor& theta) {
    const vt::Tensor slope = vt::slice(theta, 0, 0, 1);
    const vt::Tensor log_sigma = vt::slice(theta, 0, 1, 2);
    const vt::Tensor r = (y - slope * x) / vt::exp(log_sigma);
    return vt::sum(0.5 * vt::square(r) + log_sigma);
  };

  const vt::Tensor theta = vt::Tensor::from_vector({1.5, 0.0}, {2});
  auto [value, gradient] = vt::value_and_grad(nll)(theta);
  fmt::print("theta    = {}\n", theta);
  fmt::print("nll      = {:.6f}\n", value.item());
  fmt::print("gradient = {}\n", gradient);
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("demo");
}
