// The elementwise special functions and reductions: log10, log2, exp2, exp10, expm1,
// erf, erfc, lgamma, digamma, trigamma, sigmoid, softplus, the trigonometric and hyperbolic
// functions and their inverses, floor, ceil, arctan2, pow with a scalar base, minimum, clip,
// logsumexp and cumsum. Values against the C library, long-double formulas, closed forms and
// scipy's tables; gradients against finite differences and closed forms; batched and under jit.
// (Bit-exactness on special values at every length and layout: test_hostile.cpp.)
#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <vtape/backends/special_math.hpp>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::Fn;
using vt::testing::require_close;

namespace {

using UnaryOp = Tensor (*)(const Tensor&);

const std::vector<double> grid = {-30.5, -7.25, -2.0, -1.0, -0.3, -1e-5, 0.0,  1e-7,
                                  0.2,   0.5,   1.0,  1.5,  3.0,  9.75,  25.0, 300.0};

std::vector<double> mapped(const std::vector<double>& xs, double (*f)(double)) {
  std::vector<double> v;
  for (double x : xs) v.push_back(f(x));
  return v;
}

// |got - want| <= tol max(1, |want|), with NaN only for NaN and infinities equal.
void require_matches(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& xs,
                     double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("at x = " << xs[i] << ": " << got[i] << " against " << want[i]);
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
    } else {
      CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
    }
  }
}

// Long-double references for sigmoid and softplus, by the textbook formulas (long double's range
// reaches exp(11356), so they overflow only beyond every double input that matters here).
long double sigmoid_ld(long double x) { return 1.0L / (1.0L + std::exp(-x)); }
long double softplus_ld(long double x) { return x > 40 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

struct Row {
  double x, psi, psi1;
};

std::vector<Row> scipy_polygamma() {
  std::ifstream in(VTAPE_TEST_DATA "/special/polygamma.txt");
  REQUIRE(in);
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    Row r;
    s >> r.x >> r.psi >> r.psi1;
    REQUIRE(s);
    rows.push_back(r);
  }
  REQUIRE(rows.size() >= 250);
  return rows;
}

Tensor vec(const std::vector<double>& v, DType dtype = DType::f64) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, dtype);
}

}  // namespace

TEST_CASE("the new unary ops compute the C library's functions", "[elementwise][special]") {
  const Tensor x = vec(grid);
  const double tol = 0;  // the same function per element: equal
  std::vector<double> positive;
  for (double v : grid) positive.push_back(std::abs(v) + 0.1);
  const Tensor p = vec(positive);
  require_matches(log10(p).to_vector<double>(), mapped(positive, [](double v) { return std::log10(v); }), positive,
                  tol);
  require_matches(log2(p).to_vector<double>(), mapped(positive, [](double v) { return std::log2(v); }), positive, tol);
  require_matches(exp2(x).to_vector<double>(), mapped(grid, [](double v) { return std::exp2(v); }), grid, tol);
  require_matches(exp10(x).to_vector<double>(), mapped(grid, [](double v) { return ::exp10(v); }), grid, tol);
  require_matches(expm1(x).to_vector<double>(), mapped(grid, [](double v) { return std::expm1(v); }), grid, tol);
  require_matches(erf(x).to_vector<double>(), mapped(grid, [](double v) { return std::erf(v); }), grid, tol);
  require_matches(erfc(x).to_vector<double>(), mapped(grid, [](double v) { return std::erfc(v); }), grid, tol);
  require_matches(lgamma(x).to_vector<double>(), mapped(grid, [](double v) { return std::lgamma(v); }), grid, tol);
  // Their own values where the closed forms are known.
  require_close(log10(vec({1000, 1e-5})), {3, -5}, 1e-15);
  require_close(exp10(vec({3, -2})), {1000, 0.01}, 1e-15);
  require_close(exp2(vec({10, -3})), {1024, 0.125}, 0);
  require_close(lgamma(vec({5, 0.5})), {std::log(24.0), 0.5 * std::log(M_PI)}, 1e-15);
  CHECK(expm1(vec({1e-300})).item() == 1e-300);  // exp(x) - 1 would be 0
  CHECK(erfc(vec({20})).item() > 0);             // 1 - erf(20) would be 0
  CHECK(lgamma(vec({0.0, -3.0})).to_vector<double>() == std::vector<double>{INFINITY, INFINITY});
  // float32 follows the float functions.
  const std::vector<float> got = erf(vec(grid, DType::f32)).to_vector<float>();
  for (std::size_t i = 0; i < grid.size(); ++i) CHECK(got[i] == std::erf(static_cast<float>(grid[i])));
}

TEST_CASE("sigmoid and softplus match long-double formulas and never overflow", "[elementwise][special]") {
  const long double tiny = std::numeric_limits<double>::denorm_min();
  std::vector<double> xs = grid;
  for (double v : {-1e300, -800.0, -745.0, -40.0, -36.9, 36.9, 40.0, 709.0, 800.0, 1e300}) xs.push_back(v);
  const std::vector<double> s = sigmoid(vec(xs)).to_vector<double>();
  const std::vector<double> sp = softplus(vec(xs)).to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i] << ": sigmoid " << s[i] << ", softplus " << sp[i]);
    const long double want_s = sigmoid_ld(xs[i]), want_sp = softplus_ld(xs[i]);
    // Relative, but absolute in the subnormal range (x < -708), where 1 ulp is the smallest double.
    CHECK(std::abs(s[i] - want_s) <= 4e-16L * want_s + tiny);
    CHECK(std::abs(sp[i] - want_sp) <= 4e-16L * want_sp + tiny);
  }
  // Large x: softplus(x) = x exactly, sigmoid 1; very negative x: softplus(x) = exp(x) = sigmoid(x).
  CHECK(softplus(vec({800})).item() == 800);
  CHECK(softplus(vec({1e300})).item() == 1e300);
  CHECK(sigmoid(vec({800})).item() == 1);
  CHECK(softplus(vec({-700})).item() == Approx(std::exp(-700.0)).epsilon(1e-15));
  CHECK(sigmoid(vec({-700})).item() == Approx(std::exp(-700.0)).epsilon(1e-15));
  CHECK(softplus(vec({-800})).item() == 0);
  // Infinities and NaN.
  CHECK(sigmoid(vec({INFINITY, -INFINITY})).to_vector<double>() == std::vector<double>{1, 0});
  CHECK(softplus(vec({INFINITY, -INFINITY})).to_vector<double>() == std::vector<double>{INFINITY, 0});
  CHECK(std::isnan(sigmoid(vec({NAN})).item()));
  CHECK(std::isnan(softplus(vec({NAN})).item()));
  // float32: no overflow either.
  const std::vector<float> f = softplus(vec({100, -80, 1e30}, DType::f32)).to_vector<float>();
  CHECK(f[0] == 100.0f);
  CHECK(f[1] == Approx(std::exp(-80.0)).epsilon(1e-6));
  CHECK(f[2] == 1e30f);
  CHECK(sigmoid(vec({-80}, DType::f32)).item<float>() == Approx(std::exp(-80.0)).epsilon(1e-6));
  // Gradients sigmoid(x) sigmoid(-x) (= y (1 - y), without the cancellation in 1 - y for large x)
  // and sigmoid(x), against the long-double formulas, and 0 (not NaN) far out.
  const std::vector<double> gx = {-800, -30, -1, 0, 0.5, 2, 30, 800};
  const std::vector<double> gs = grad([](const Tensor& t) { return sum(sigmoid(t)); })(vec(gx)).to_vector<double>();
  const std::vector<double> gsp = grad([](const Tensor& t) { return sum(softplus(t)); })(vec(gx)).to_vector<double>();
  for (std::size_t i = 0; i < gx.size(); ++i) {
    INFO("x = " << gx[i]);
    const long double y = sigmoid_ld(gx[i]);
    const long double dy = y * sigmoid_ld(-gx[i]);
    CHECK(std::abs(gs[i] - dy) <= 1e-15L * dy + tiny);
    CHECK(std::abs(gsp[i] - y) <= 4e-16L * y + tiny);
  }
}

TEST_CASE("digamma and trigamma match closed forms, the recurrence and scipy", "[elementwise][special]") {
  const double gamma = 0.57721566490153286061, pi = M_PI;
  // psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2, psi(n) = H_{n-1} - gamma.
  std::vector<double> xs = {1, 0.5}, want = {-gamma, -gamma - 2 * std::log(2.0)};
  double harmonic = 0;
  for (int n = 2; n <= 30; ++n) {
    harmonic += 1.0 / (n - 1);
    xs.push_back(n);
    want.push_back(harmonic - gamma);
  }
  require_close(digamma(vec(xs)), want, 1e-15);
  // psi'(1) = pi^2/6, psi'(1/2) = pi^2/2, psi'(-1/2) = pi^2/2 + 4.
  require_close(trigamma(vec({1, 0.5, -0.5})), {pi * pi / 6, pi * pi / 2, pi * pi / 2 + 4}, 1e-15);
  // The recurrences psi(x + 1) = psi(x) + 1/x and psi'(x) = psi'(x + 1) + 1/x^2, across the
  // switch to the asymptotic series at 10 and through the reflection for x < 0.
  const Tensor x = vec({-7.3, -0.61, 0.013, 0.7, 2.2, 8.5, 9.3, 9.99, 10.5, 123.4});
  require_close(digamma(x + 1.0), digamma(x) + 1.0 / x, 1e-14);
  require_close(trigamma(x), trigamma(x + 1.0) + 1.0 / square(x), 1e-14);  // a sum: no cancellation
  // scipy's psi and polygamma(1, x) (tools/reference/make_special_reference.py).
  const std::vector<Row> rows = scipy_polygamma();
  std::vector<double> rx, rpsi, rpsi1;
  for (const Row& r : rows) {
    rx.push_back(r.x);
    rpsi.push_back(r.psi);
    rpsi1.push_back(r.psi1);
  }
  require_matches(digamma(vec(rx)).to_vector<double>(), rpsi, rx, 2e-14);
  require_matches(trigamma(vec(rx)).to_vector<double>(), rpsi1, rx, 2e-14);
  // float32 computes in float: within a few float ulps of scipy away from the poles.
  const std::vector<float> f = digamma(vec(rx, DType::f32)).to_vector<float>();
  for (std::size_t i = 0; i < rx.size(); ++i) {
    const double xf = static_cast<float>(rx[i]);
    if (xf <= 0 && std::abs(xf - std::round(xf)) < 0.05) continue;  // rounding x to float moves it near a pole
    INFO("x = " << xf);
    CHECK(std::abs(f[i] - vt::special::digamma(xf)) <= 1e-5 * std::max(1.0, std::abs(vt::special::digamma(xf))));
  }
  // Poles and infinities, as scipy: psi(+-0) = -+inf, psi(-n) = NaN, psi'(-n) = +inf.
  const std::vector<double> d = digamma(vec({0.0, -0.0, -1.0, -5.0, INFINITY, -INFINITY, NAN})).to_vector<double>();
  CHECK(d[0] == -INFINITY);
  CHECK(d[1] == INFINITY);
  CHECK(std::isnan(d[2]));
  CHECK(std::isnan(d[3]));
  CHECK(d[4] == INFINITY);
  CHECK(std::isnan(d[5]));
  CHECK(std::isnan(d[6]));
  const std::vector<double> t = trigamma(vec({0.0, -3.0, INFINITY, -INFINITY})).to_vector<double>();
  CHECK(t[0] == INFINITY);
  CHECK(t[1] == INFINITY);
  CHECK(t[2] == 0);
  CHECK(std::isnan(t[3]));
}

TEST_CASE("gradients of the new unary ops match finite differences and closed forms", "[elementwise][special][grad]") {
  // Inputs inside every op's domain; the odd ones get negative values too.
  const Tensor pos = rand({3, 4}, 5) * 3.0 + 0.2;
  const Tensor gen = randn({3, 4}, 6) * 2.0;
  const Tensor small = randn({3, 4}, 6) * 0.7;  // exp10 of larger values swamps the others' differences
  const std::vector<std::tuple<const char*, UnaryOp, const Tensor*>> ops = {
      {"log10", log10, &pos},     {"log2", log2, &pos},       {"exp2", exp2, &small},
      {"exp10", exp10, &small},   {"expm1", expm1, &gen},     {"erf", erf, &gen},
      {"erfc", erfc, &gen},       {"lgamma", lgamma, &pos},   {"lgamma < 0", lgamma, nullptr},
      {"digamma", digamma, &pos}, {"sigmoid", sigmoid, &gen}, {"softplus", softplus, &gen},
  };
  const Tensor negative_non_integer = -rand({3, 4}, 7) * 0.8 - 1.1;  // in (-1.9, -1.1)
  for (const auto& [name, op, input] : ops) {
    INFO(name);
    const UnaryOp f = op;
    check_gradients([f](const std::vector<Tensor>& a) { return f(a[0]); }, {input ? *input : negative_non_integer},
                    1e-6, 1e-7);
  }
  // digamma's gradient (trigamma) differentiated through lgamma twice; trigamma's own gradient
  // raises.
  check_gradients(
      [](const std::vector<Tensor>& a) { return grad([](const Tensor& t) { return sum(lgamma(t)); })(a[0]); }, {pos},
      1e-6, 1e-7);
  const Tensor d2 =
      grad([](const Tensor& t) { return sum(grad([](const Tensor& u) { return sum(lgamma(u)); })(t)); })(pos);
  require_close(d2, trigamma(pos), 1e-15);
  CHECK_THAT(error_of([&] { (void)grad([](const Tensor& t) { return sum(trigamma(t)); })(pos); }),
             Catch::Contains("trigamma") && Catch::Contains("not implemented"));
  // Closed forms at a few points.
  const Tensor x = vec({-1.5, 0.25, 2.0});
  auto d = [&](UnaryOp op) { return grad([op](const Tensor& t) { return sum(op(t)); })(x).to_vector<double>(); };
  const std::vector<double> e = d(erf), ec = d(erfc);
  for (std::size_t i = 0; i < 3; ++i) {
    const double v = x.to_vector<double>()[i];
    CHECK(e[i] == Approx(2 / std::sqrt(M_PI) * std::exp(-v * v)).epsilon(1e-15));
    CHECK(ec[i] == Approx(-2 / std::sqrt(M_PI) * std::exp(-v * v)).epsilon(1e-15));
  }
  require_close(grad([](const Tensor& t) { return sum(log10(t)); })(vec({2, 10})),
                {1 / (2 * M_LN10), 1 / (10 * M_LN10)}, 1e-15);
  require_close(grad([](const Tensor& t) { return sum(exp10(t)); })(vec({2})), {100 * M_LN10}, 1e-15);
  require_close(grad([](const Tensor& t) { return sum(lgamma(t)); })(vec({1})), {-0.57721566490153286061}, 1e-15);
}

TEST_CASE("pow with a scalar base: values, gradient a^b log a, and 0 at a zero base", "[elementwise][special][grad]") {
  const Tensor b = vec({-2, -0.5, 0, 1.5, 3});
  std::vector<double> want;
  for (double v : b.to_vector<double>()) want.push_back(std::pow(2.5, v));
  require_close(pow(2.5, b), want, 1e-15);  // pow(a, b) = exp(b log a) off the fast paths: a few ulps
  check_gradients([](const std::vector<Tensor>& a) { return pow(2.5, a[0]); }, {b});
  const std::vector<double> g = grad([](const Tensor& t) { return sum(pow(2.5, t)); })(b).to_vector<double>();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(g[i] == Approx(want[i] * std::log(2.5)).epsilon(1e-15));
  // 0^b: 0 for b > 0, 1 at b = 0; the gradient 0 (not NaN) where the function is finite.
  const Tensor bp = vec({0.5, 2, 0});
  require_close(pow(0.0, bp), {0, 0, 1}, 0);
  CHECK(grad([](const Tensor& t) { return sum(pow(0.0, t)); })(bp).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(pow(2.0, vec({3}, DType::f32)).dtype() == DType::f32);
}

TEST_CASE("minimum: values, NaN, and ties splitting the gradient", "[elementwise][special][grad]") {
  const Tensor a = vec({1, 5, 3, NAN, 2}), b = vec({2, 4, 3, 1, NAN});
  const std::vector<double> m = minimum(a, b).to_vector<double>();
  CHECK(m[0] == 1);
  CHECK(m[1] == 4);
  CHECK(m[2] == 3);
  CHECK(std::isnan(m[3]));
  CHECK(std::isnan(m[4]));
  const Tensor x = vec({1, 5, 3}), y = vec({2, 4, 3});
  const auto g = grad([](const Tensor& p, const Tensor& q) { return sum(minimum(p, q)); }, {0, 1})(x, y);
  CHECK(g[0].to_vector<double>() == std::vector<double>{1, 0, 0.5});
  CHECK(g[1].to_vector<double>() == std::vector<double>{0, 1, 0.5});
  check_gradients([](const std::vector<Tensor>& v) { return minimum(v[0], v[1]); }, {randn({3, 4}, 1), randn({4}, 2)});
  require_close(minimum(arange(0, 6).reshape({2, 3}), full({}, 2.5)), {0, 1, 2, 2.5, 2.5, 2.5}, 0);
}

TEST_CASE("clip: values, gradient 1 on [lo, hi] bounds included, NaN kept, bad bounds refused",
          "[elementwise][special][grad]") {
  const Tensor x = vec({-3, -1, -0.5, 0, 0.7, 1, 2, NAN});
  const std::vector<double> y = clip(x, -1, 1).to_vector<double>();
  CHECK(std::vector<double>(y.begin(), y.end() - 1) == std::vector<double>{-1, -1, -0.5, 0, 0.7, 1, 1});
  CHECK(std::isnan(y.back()));
  const Tensor fin = vec({-3, -1, -0.5, 0, 0.7, 1, 2});
  CHECK(grad([](const Tensor& t) { return sum(clip(t, -1, 1)); })(fin).to_vector<double>() ==
        std::vector<double>{0, 1, 1, 1, 1, 1, 0});
  // lo == hi: the constant, gradient 1 only at the bound itself.
  CHECK(clip(fin, 0.7, 0.7).to_vector<double>() == std::vector<double>(7, 0.7));
  CHECK(grad([](const Tensor& t) { return sum(clip(t, 0, 0)); })(fin).to_vector<double>() ==
        std::vector<double>{0, 0, 0, 1, 0, 0, 0});
  // Infinite bounds.
  CHECK(clip(fin, 0, INFINITY).to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0.7, 1, 2});
  check_gradients([](const std::vector<Tensor>& a) { return clip(a[0], -0.5, 0.8); }, {randn({4, 5}, 3)});
  CHECK_THAT(error_of([&] { (void)clip(x, 2, 1); }),
             Catch::Contains("clip") && Catch::Contains("lower bound 2") && Catch::Contains("upper bound 1"));
  CHECK_THAT(error_of([&] { (void)clip(x, NAN, 1); }), Catch::Contains("clip") && Catch::Contains("NaN"));
  CHECK(clip(vec({5}, DType::f32), 0, 1).dtype() == DType::f32);
}

TEST_CASE("logsumexp is stable, handles infinities and NaN, and its gradient is softmax", "[reduce][special][grad]") {
  const Tensor x = randn({3, 5}, 4) * 3.0;
  const std::vector<double> v = x.to_vector<double>();
  // Against a long-double sum over each row, over each column and over everything.
  auto lse = [&](auto in_group) {
    std::vector<double> out;
    for (int g = 0; g < 5; ++g) {
      long double s = 0;
      bool any = false;
      for (int i = 0; i < 15; ++i)
        if (in_group(g, i)) {
          s += std::exp(static_cast<long double>(v[static_cast<std::size_t>(i)]));
          any = true;
        }
      if (any) out.push_back(static_cast<double>(std::log(s)));
    }
    return out;
  };
  require_close(logsumexp(x, {1}), lse([](int g, int i) { return i / 5 == g; }), 1e-15);
  require_close(logsumexp(x, {0}), lse([](int g, int i) { return i % 5 == g; }), 1e-15);
  require_close(logsumexp(x, {-2}, true), lse([](int g, int i) { return i % 5 == g; }), 1e-15);
  CHECK(logsumexp(x, {-2}, true).shape() == Shape{1, 5});
  CHECK(logsumexp(x).shape() == Shape{});
  CHECK(logsumexp(x).item() == Approx(lse([](int g, int) { return g == 0; })[0]).epsilon(1e-15));
  // Huge and tiny values: exp would overflow or underflow without the shift.
  require_close(logsumexp(vec({1000, 1000})), {1000 + std::log(2.0)}, 1e-15);
  require_close(logsumexp(vec({-1000, -1000, -1000})), {-1000 + std::log(3.0)}, 1e-15);
  // Infinities, NaN and empty reductions.
  CHECK(logsumexp(vec({-INFINITY, -INFINITY})).item() == -INFINITY);
  CHECK(logsumexp(vec({-INFINITY, 2.0})).item() == 2.0);
  CHECK(logsumexp(vec({INFINITY, 2.0})).item() == INFINITY);
  CHECK(logsumexp(vec({INFINITY, -INFINITY})).item() == INFINITY);
  CHECK(std::isnan(logsumexp(vec({NAN, 2.0})).item()));
  CHECK(std::isnan(logsumexp(vec({NAN, INFINITY})).item()));
  CHECK(logsumexp(zeros({0})).item() == -INFINITY);
  CHECK(logsumexp(zeros({2, 0}), {1}).to_vector<double>() == std::vector<double>{-INFINITY, -INFINITY});
  CHECK(logsumexp(zeros({0, 3}), {1}).shape() == Shape{0});
  const std::vector<double> rows =
      logsumexp(Tensor::from_vector({-INFINITY, -INFINITY, 1, 2}, {2, 2}), {1}).to_vector<double>();
  CHECK(rows[0] == -INFINITY);
  CHECK(rows[1] == Approx(2 + std::log1p(std::exp(-1.0))).epsilon(1e-15));
  CHECK_THAT(error_of([&] { (void)logsumexp(x, {2}); }), Catch::Contains("logsumexp"));
  // The gradient is softmax along the axes (closed form), also with -inf entries.
  const Tensor g = grad([](const Tensor& t) { return sum(logsumexp(t, {1})); })(x);
  require_close(g, exp(x - logsumexp(x, {1}, true)), 1e-15);
  const Tensor masked = vec({-INFINITY, 0, std::log(3.0)});
  require_close(grad([](const Tensor& t) { return logsumexp(t); })(masked), {0, 0.25, 0.75}, 1e-15);
  check_gradients([](const std::vector<Tensor>& a) { return logsumexp(a[0], {1}); }, {x});
  check_gradients([](const std::vector<Tensor>& a) { return logsumexp(a[0], {0, 2}, true); }, {randn({2, 3, 4}, 8)});
  // Its gradient is differentiable too (softmax's Jacobian).
  check_gradients(
      [](const std::vector<Tensor>& a) {
        return grad([](const Tensor& t) { return sum(logsumexp(t, {1}) * 1.5); })(a[0]);
      },
      {x});
  // float32.
  CHECK(logsumexp(vec({100, 100}, DType::f32)).item<float>() == Approx(100 + std::log(2.0)).epsilon(1e-6));
}

TEST_CASE("cumsum: running sums along any axis, strided inputs, and the reversed adjoint", "[reduce][special][grad]") {
  const Tensor x = randn({2, 3, 4}, 9);
  const std::vector<double> v = x.to_vector<double>();
  for (std::int64_t axis : {0, 1, 2, -1, -3}) {
    INFO("axis " << axis);
    const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
    const std::int64_t stride = a == 0 ? 12 : a == 1 ? 4 : 1, n = x.shape(static_cast<std::size_t>(a));
    std::vector<double> want(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::int64_t k = (static_cast<std::int64_t>(i) / stride) % n;  // position along the axis
      double s = 0;
      for (std::int64_t j = 0; j <= k; ++j) s += v[i - static_cast<std::size_t>((k - j) * stride)];
      want[i] = s;
    }
    require_close(cumsum(x, axis), want, 1e-15);
    check_gradients([axis](const std::vector<Tensor>& in) { return cumsum(in[0], axis); }, {x});
  }
  // A transposed (strided) input gives the transposed result of the contiguous one.
  require_close(cumsum(transpose(x, {2, 0, 1}), 0), transpose(cumsum(x, 2), {2, 0, 1}), 0);
  // The adjoint: d/dx sum(w * cumsum(x)) = w's sums from the end back.
  const Tensor w = vec({1, 2, 3, 4});
  const Tensor g = grad([&](const Tensor& t) { return sum(w * cumsum(t, 0)); })(vec({5, 6, 7, 8}));
  CHECK(g.to_vector<double>() == std::vector<double>{10, 9, 7, 4});
  // Second order: the adjoint is itself differentiable (cumsum of the reversed cumsum).
  check_gradients(
      [](const std::vector<Tensor>& a) {
        return grad([](const Tensor& t) { return sum(square(cumsum(t, 1))); })(a[0]);
      },
      {randn({3, 5}, 10)});
  // Float32 sums in double, then rounds: exact here where a float running sum is not.
  const std::vector<float> f =
      cumsum(Tensor::from_vector({1e8, 1, 1, 1, 1, -1e8}, {6}, DType::f32), 0).to_vector<float>();
  CHECK(f.back() == 4.0f);
  // Size 0 and 1 axes, and errors.
  CHECK(cumsum(zeros({0, 3}), 0).shape() == Shape{0, 3});
  require_close(cumsum(vec({3}), -1), {3}, 0);
  CHECK_THAT(error_of([&] { (void)cumsum(x, 3); }), Catch::Contains("cumsum"));
  CHECK_THAT(error_of([&] { (void)cumsum(Tensor::scalar(1.0), 0); }), Catch::Contains("cumsum"));
}

TEST_CASE("the new ops batch: vmap(f)(X)[i] == f(X[i]), and as_batch", "[special][vmap]") {
  const Tensor X = rand({4, 3, 5}, 11) * 2.0 + 0.1;  // positive: every op's domain
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    bool differentiable = true;
    bool per_example = true;  // false: over all axes, which outside vmap includes the batch
  };
  const std::vector<Case> fs = {
      {"unary", [](const Tensor& t) { return log10(t) + log2(t) + exp2(t) + exp10(t) + expm1(t) + erf(t) + erfc(t); }},
      {"gamma", [](const Tensor& t) { return lgamma(t) + digamma(t) + sigmoid(t) + softplus(t); }},
      {"trigamma", [](const Tensor& t) { return trigamma(t); }, false},
      {"binary", [](const Tensor& t) { return pow(1.7, t) + minimum(t, t * 0.5 + 0.3) + clip(t, 0.5, 1.5); }},
      {"logsumexp", [](const Tensor& t) { return logsumexp(t, {1}); }},
      {"logsumexp all", [](const Tensor& t) { return logsumexp(t); }, true, false},
      {"cumsum", [](const Tensor& t) { return cumsum(t, 1) + cumsum(t, -2); }},
  };
  for (const auto& [name, f, differentiable, per_example] : fs) {
    INFO(name);
    const Tensor out = unbatch(vmap(f)(X));
    const Tensor via_batch = per_example ? unbatch(f(as_batch(X))) : out;
    for (std::int64_t i = 0; i < 4; ++i) {
      const Tensor xi = reshape(slice(X, 0, i, i + 1), {3, 5});
      const Tensor want = f(xi);
      require_close(reshape(slice(out, 0, i, i + 1), want.shape()), want, 1e-15);
      require_close(reshape(slice(via_batch, 0, i, i + 1), want.shape()), want, 1e-15);
    }
    if (!differentiable) continue;
    // Per-example gradients.
    const Tensor g = unbatch(vmap(grad([&f](const Tensor& t) { return sum(f(t)); }))(X));
    const Tensor g0 = grad([&f](const Tensor& t) { return sum(f(t)); })(reshape(slice(X, 0, 2, 3), {3, 5}));
    require_close(reshape(slice(g, 0, 2, 3), {3, 5}), g0, 1e-14);
  }
  // Outside vmap, logsumexp over all axes of a batched tensor includes the batch, as sum does.
  CHECK(logsumexp(as_batch(X)).item() == Approx(logsumexp(X).item()).epsilon(1e-15));
}

TEST_CASE("the new ops under jit equal eager, values and gradients, at several batch sizes", "[special][jit]") {
  auto model = [](const Tensor& t) {
    const Tensor h = cumsum(softplus(t), 0) + sigmoid(t) * erf(t) + clip(t, -0.5, 0.5) + minimum(t, expm1(t));
    return logsumexp(h) + sum(lgamma(exp2(t) + 0.5)) + sum(digamma(pow(2.0, t) + 1.0)) +
           sum(log10(exp10(t * 0.1) + erfc(t)));
  };
  auto loss = [&](const Tensor& P) { return mean(vmap(model)(P)); };
  auto step = jit(value_and_grad(loss));
  for (std::int64_t b : {1, 3, 8}) {
    const Tensor P = as_batch(randn({b, 6}, 20 + static_cast<std::uint64_t>(b)));
    const auto [v, g] = step(P);
    const auto [ve, ge] = value_and_grad(loss)(P);
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-14));
    require_close(unbatch(g), unbatch(ge), 1e-14);
  }
  check_gradients([&](const std::vector<Tensor>& a) { return model(a[0]); }, {randn({6}, 30)}, 1e-6, 1e-7);
  // trigamma has no gradient: its values only.
  auto polygamma = jit([](const Tensor& t) { return trigamma(t) + digamma(t); });
  const Tensor x = as_batch(rand({5, 3}, 31) + 0.5);
  require_close(unbatch(polygamma(x)), unbatch(trigamma(x) + digamma(x)), 0);
}

TEST_CASE("trigonometric and hyperbolic ops and their inverses: the C library's values, closed-form gradients",
          "[elementwise][special][grad]") {
  using Scalar = double (*)(double);
  const std::vector<double> unit = {-0.999, -0.75, -0.3, -0.0, 0.0, 1e-9, 0.4, 0.9, 0.999};
  const std::vector<double> wide = {-9.5, -2.0, -1.0, -1e-8, 0.0, 0.3, 1.0, 4.0, 20.0};
  const std::vector<double> above_one = {1.0, 1.0 + 1e-9, 1.5, 3.0, 1e6};
  struct Case {
    const char* name;
    UnaryOp op;
    Scalar reference;
    const std::vector<double>* xs;
  };
  const std::vector<Case> cases = {
      {"tan", tan, [](double v) { return std::tan(v); }, &unit},
      {"arcsin", arcsin, [](double v) { return std::asin(v); }, &unit},
      {"arccos", arccos, [](double v) { return std::acos(v); }, &unit},
      {"arctan", arctan, [](double v) { return std::atan(v); }, &wide},
      {"sinh", sinh, [](double v) { return std::sinh(v); }, &wide},
      {"cosh", cosh, [](double v) { return std::cosh(v); }, &wide},
      {"arcsinh", arcsinh, [](double v) { return std::asinh(v); }, &wide},
      {"arccosh", arccosh, [](double v) { return std::acosh(v); }, &above_one},
      {"arctanh", arctanh, [](double v) { return std::atanh(v); }, &unit},
      {"floor", floor, [](double v) { return std::floor(v); }, &wide},
      {"ceil", ceil, [](double v) { return std::ceil(v); }, &wide},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    require_matches(c.op(vec(*c.xs)).to_vector<double>(), mapped(*c.xs, c.reference), *c.xs, 0);
    // Outside the domain: NaN, as the C library.
    if (c.xs == &unit && std::string(c.name) != "tan") CHECK(std::isnan(c.op(vec({1.5})).item()));
  }
  // Gradients against central differences inside each domain, and closed forms where they blow up.
  const Tensor inside = rand({3, 4}, 11) * 1.8 - 0.9, any = randn({3, 4}, 12) * 2.0,
               beyond = rand({3, 4}, 13) * 3.0 + 1.1;
  const std::vector<std::pair<UnaryOp, const Tensor*>> differentiable = {
      {tan, &inside}, {arcsin, &inside}, {arccos, &inside},  {arctan, &any},     {sinh, &any},
      {cosh, &any},   {arcsinh, &any},   {arccosh, &beyond}, {arctanh, &inside},
  };
  for (const auto& [op, x] : differentiable)
    check_gradients([f = op](const std::vector<Tensor>& a) { return f(a[0]); }, {*x}, 1e-6, 1e-7);
  auto d = [](UnaryOp op, double v) { return grad([op](const Tensor& t) { return sum(op(t)); })(vec({v})).item(); };
  const double near = 1 - 1e-12;  // (1 - x)(1 + x) keeps its digits where 1 - x^2 would lose them
  CHECK(d(arctanh, near) == Approx(1 / ((1 - near) * (1 + near))).epsilon(1e-12));
  CHECK(d(arcsin, near) == Approx(1 / std::sqrt((1 - near) * (1 + near))).epsilon(1e-12));
  CHECK(std::isinf(d(arcsin, 1.0)));
  CHECK(d(floor, 2.5) == 0.0);
  // arctan2: the C library's quadrants and signed zeros, gradient (x, -y) / (x^2 + y^2), integers in float64.
  const std::vector<double> ys = {1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, -0.0},
                            xs = {2.0, -2.0, 2.0, -2.0, 1.0, 1.0, -1.0, -1.0};
  const std::vector<double> angles = arctan2(vec(ys), vec(xs)).to_vector<double>();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    INFO("atan2(" << ys[i] << ", " << xs[i] << ")");
    CHECK(std::bit_cast<std::uint64_t>(angles[i]) == std::bit_cast<std::uint64_t>(std::atan2(ys[i], xs[i])));
  }
  check_gradients([](const std::vector<Tensor>& a) { return arctan2(a[0], a[1]); },
                  {randn({2, 3}, 14), randn({2, 3}, 15) + 0.5}, 1e-6, 1e-7);
  CHECK(arctan2(Tensor::from_ints({1}, {1}), Tensor::from_ints({1}, {1})).dtype() == DType::f64);
  CHECK(arctan2(Tensor::from_ints({1}, {1}), Tensor::from_ints({1}, {1})).item() == Approx(M_PI / 4).epsilon(1e-15));
}
