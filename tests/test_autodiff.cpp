#include <cmath>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::require_close;

TEST_CASE("grad, value_and_grad and argnums", "[autodiff]") {
  auto f = [](const Tensor& x, const Tensor& y) { return sum(x * x * y); };
  const Tensor x = Tensor::from_vector({1, 2}, {2}), y = Tensor::from_vector({3, 4}, {2});
  require_close(grad(f)(x, y), {6, 16});
  const auto both = grad(f, {0, 1})(x, y);
  require_close(both[0], {6, 16});
  require_close(both[1], {1, 4});
  require_close(grad(f, {1})(x, y)[0], {1, 4});
  auto [value, g] = value_and_grad(f)(x, y);
  CHECK(value.item() == 19);
  require_close(g, {6, 16});
}

TEST_CASE("cotangents are summed at fan-out", "[autodiff]") {
  // x feeds the output along three paths.
  auto f = [](const Tensor& x) { return sum(x * exp(x) + sin(x)); };
  const Tensor x = Tensor::from_vector({0.3, -0.7}, {2});
  std::vector<double> expected;
  for (double a : x.to_vector<double>()) expected.push_back(std::exp(a) * (1 + a) + std::cos(a));
  require_close(grad(f)(x), expected, 1e-12);
  // The same tensor passed twice, differentiated with respect to both slots.
  const auto g = grad([](const Tensor& a, const Tensor& b) { return sum(a * b); }, {0, 1})(x, x);
  require_close(g[0], x);
  require_close(g[1], x);
}

TEST_CASE("a variable the output does not depend on gets a zero gradient", "[autodiff]") {
  const auto g = grad([](const Tensor& a, const Tensor&) { return sum(a); }, {0, 1})(ones({2}), ones({3}));
  require_close(g[1], {0, 0, 0});
}

TEST_CASE("vjp pulls back a cotangent of any shape", "[autodiff]") {
  const Tensor a = randn({3, 2}, 1), b = randn({2, 4}, 2);
  auto [out, pullback] = vjp([](const Tensor& x, const Tensor& y) { return matmul(x, y); }, a, b);
  CHECK(out.shape() == Shape{3, 4});
  const Tensor ct = randn({3, 4}, 3);
  const auto cts = pullback(ct);
  require_close(cts[0], matmul(ct, b.t()), 1e-12);
  require_close(cts[1], matmul(a.t(), ct), 1e-12);
  // The pullback can be called again with another cotangent.
  require_close(pullback(ct * 2.0)[0], matmul(ct, b.t()) * 2.0, 1e-12);
}

TEST_CASE("stop_gradient treats its input as a constant", "[autodiff]") {
  const Tensor x = Tensor::from_vector({2.0}, {1});
  require_close(grad([](const Tensor& a) { return sum(a * stop_gradient(a)); })(x), {2.0});
  require_close(grad([](const Tensor& a) { return sum(stop_gradient(a * a)); })(x), {0.0});
}

TEST_CASE("second derivatives: grad of grad against closed forms", "[autodiff][grad]") {
  // f(x) = sum(x^3 + sin(x) * x)  =>  f'' = 6x + 2cos(x) - x sin(x), elementwise.
  auto f = [](const Tensor& x) { return sum(x * x * x + sin(x) * x); };
  auto df = [&](const Tensor& x) { return sum(grad(f)(x)); };
  const Tensor x = Tensor::from_vector({0.5, -1.2, 2.0}, {3});
  std::vector<double> expected;
  for (double a : x.to_vector<double>()) expected.push_back(6 * a + 2 * std::cos(a) - a * std::sin(a));
  require_close(grad(df)(x), expected, 1e-12);

  // Hessian-vector product of a quadratic form: grad_x (grad_x (x^T A x) . v) = (A + A^T) v.
  const Tensor A = randn({3, 3}, 4), v = randn({3}, 5);
  auto quad = [&](const Tensor& y) { return matmul(y, matmul(A, y)); };
  auto hv = grad([&](const Tensor& y) { return sum(grad(quad)(y) * v); })(x);
  require_close(hv, matmul(A + A.t(), v), 1e-12);
}

TEST_CASE("third derivative through nested grads", "[autodiff]") {
  auto f = [](const Tensor& x) { return sum(exp(x * 2.0)); };
  auto d1 = [&](const Tensor& x) { return sum(grad(f)(x)); };
  auto d2 = [&](const Tensor& x) { return sum(grad(d1)(x)); };
  const Tensor x = Tensor::from_vector({0.1, 0.4}, {2});
  require_close(grad(d2)(x), {8 * std::exp(0.2), 8 * std::exp(0.8)}, 1e-12);
}

TEST_CASE("second derivative matches finite differences of the first", "[autodiff][grad]") {
  const Tensor w = randn({4, 3}, 6);
  auto loss = [&](const Tensor& x) { return sum(tanh(matmul(w, x * log1p(x * x)))); };
  check_gradients([&](auto& a) { return grad(loss)(a[0]); }, {randn({3}, 7)}, 1e-5, 1e-6);
}

TEST_CASE("results of grad hold no tape when no outer transform watches", "[autodiff]") {
  const Tensor g = grad([](const Tensor& a) { return sum(a * a); })(ones({2}));
  CHECK_FALSE(g.impl().tracked);
  CHECK(g.impl().node == nullptr);
}
