#include <cmath>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::Fn;
using vt::testing::require_close;

namespace {
const std::vector<Shape> shapes = {{}, {1}, {5}, {3, 4}, {2, 3, 2}};

Tensor positive(const Shape& s, std::uint64_t seed) { return rand(s, seed) + 0.5; }
}  // namespace

TEST_CASE("unary ops compute the C++ library functions", "[elementwise]") {
  const std::vector<double> xs = {0.3, 1.7, 2.5, 0.05};
  const Tensor x = Tensor::from_vector(xs, {4});
  auto expect = [&](double (*f)(double)) {
    std::vector<double> v;
    for (double a : xs) v.push_back(f(a));
    return v;
  };
  require_close(exp(x), expect([](double a) { return std::exp(a); }));
  require_close(log(x), expect([](double a) { return std::log(a); }));
  require_close(log1p(x), expect([](double a) { return std::log1p(a); }));
  require_close(sqrt(x), expect([](double a) { return std::sqrt(a); }));
  require_close(square(x), expect([](double a) { return a * a; }));
  require_close(sin(x), expect([](double a) { return std::sin(a); }));
  require_close(cos(x), expect([](double a) { return std::cos(a); }));
  require_close(tanh(x), expect([](double a) { return std::tanh(a); }));
  require_close(neg(x), expect([](double a) { return -a; }));
  require_close(abs(x - 1.0), {0.7, 0.7, 1.5, 0.95});
  require_close(sign(x - 1.0), {-1, 1, 1, -1});
}

TEST_CASE("unary op gradients match finite differences", "[elementwise][grad]") {
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"neg", [](auto& a) { return neg(a[0]); }},     {"exp", [](auto& a) { return exp(a[0]); }},
      {"log", [](auto& a) { return log(a[0]); }},     {"log1p", [](auto& a) { return log1p(a[0]); }},
      {"sqrt", [](auto& a) { return sqrt(a[0]); }},   {"square", [](auto& a) { return square(a[0]); }},
      {"sin", [](auto& a) { return sin(a[0]); }},     {"cos", [](auto& a) { return cos(a[0]); }},
      {"tanh", [](auto& a) { return tanh(a[0]); }},   {"abs", [](auto& a) { return abs(a[0] - 1.0); }},
  };
  for (const auto& [name, f] : ops)
    for (const Shape& s : shapes) {
      INFO(name << " at shape " << to_string(s));
      check_gradients(f, {positive(s, 1)});
    }
}

TEST_CASE("binary ops broadcast like numpy", "[elementwise]") {
  const Tensor a = arange(0, 6).reshape({2, 3});
  const Tensor b = Tensor::from_vector({10, 20, 30}, {3});
  const Tensor c = Tensor::from_vector({1, 2}, {2, 1});
  require_close(a + b, {10, 21, 32, 13, 24, 35});
  require_close(a * c, {0, 1, 2, 6, 8, 10});
  require_close(a - 1.0, {-1, 0, 1, 2, 3, 4});
  require_close(12.0 / (a + 1.0), {12, 6, 4, 3, 2.4, 2});
  require_close(pow(a, 2.0), {0, 1, 4, 9, 16, 25});
  require_close(maximum(a, full({}, 2.5)), {2.5, 2.5, 2.5, 3, 4, 5});
  require_close(less(a, full({}, 2.0)), {1, 1, 0, 0, 0, 0});
  require_close(greater(a, full({}, 2.0)), {0, 0, 0, 1, 1, 1});
  require_close(equal(a, full({}, 2.0)), {0, 0, 1, 0, 0, 0});
  require_close(where(less(a, full({}, 3.0)), a, b), {0, 1, 2, 10, 20, 30});
  CHECK((b + c).shape() == Shape{2, 3});
}

TEST_CASE("binary op gradients match finite differences, broadcasting included", "[elementwise][grad]") {
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{}, {}}, {{4}, {4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{}, {2, 3}}};
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](auto& a) { return a[0] + a[1]; }},
      {"sub", [](auto& a) { return a[0] - a[1]; }},
      {"mul", [](auto& a) { return a[0] * a[1]; }},
      {"div", [](auto& a) { return a[0] / a[1]; }},
      {"pow", [](auto& a) { return pow(a[0], a[1]); }},
      {"maximum", [](auto& a) { return maximum(a[0], a[1]); }},
      {"where", [](auto& a) { return where(greater(a[0], a[1]), a[0] * 2.0, a[1]); }},
  };
  for (const auto& [name, f] : ops)
    for (const auto& [sa, sb] : pairs) {
      INFO(name << " of " << to_string(sa) << " and " << to_string(sb));
      check_gradients(f, {positive(sa, 2), positive(sb, 3)});
    }
}

TEST_CASE("tensor-scalar forms and their gradients", "[elementwise][grad]") {
  const Tensor x = positive({3, 2}, 4);
  check_gradients([](auto& a) { return (a[0] + 1.5) * 2.0 - 0.5 / a[0]; }, {x});
  check_gradients([](auto& a) { return pow(a[0], 3.5) / 4.0; }, {x});
  check_gradients([](auto& a) { return 3.0 - (1.0 + a[0]) * a[0]; }, {x});
}

TEST_CASE("pow's exponent gradient is 0 at a zero base", "[elementwise][grad]") {
  const auto g = grad([](const Tensor& a, const Tensor& b) { return sum(pow(a, b)); }, {0, 1})(
      Tensor::from_vector({0.0, 2.0}, {2}), Tensor::from_vector({2.0, 3.0}, {2}));
  require_close(g[1], {0.0, 8.0 * std::log(2.0)});
  require_close(g[0], {0.0, 12.0});
}

TEST_CASE("comparisons, sign and where's condition carry no gradient", "[elementwise][grad]") {
  const Tensor x = Tensor::from_vector({-1.0, 2.0}, {2});
  require_close(grad([](const Tensor& a) { return sum(sign(a) + less(a, zeros({}))); })(x), {0, 0});
  require_close(grad([](const Tensor& a) { return sum(where(a, ones({2}), zeros({2}))); })(x), {0, 0});
}

TEST_CASE("astype converts and its gradient converts back", "[elementwise][grad]") {
  const Tensor x = Tensor::from_vector({1.25, -3.5}, {2}, DType::f32);
  const Tensor g = grad([](const Tensor& a) { return sum(square(a.astype(DType::f64))); })(x);
  CHECK(g.dtype() == DType::f32);
  require_close(g, {2.5, -7.0});
}
