#include <cmath>
#include <cstring>
#include <limits>

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
      {"neg", [](auto& a) { return neg(a[0]); }},   {"exp", [](auto& a) { return exp(a[0]); }},
      {"log", [](auto& a) { return log(a[0]); }},   {"log1p", [](auto& a) { return log1p(a[0]); }},
      {"sqrt", [](auto& a) { return sqrt(a[0]); }}, {"square", [](auto& a) { return square(a[0]); }},
      {"sin", [](auto& a) { return sin(a[0]); }},   {"cos", [](auto& a) { return cos(a[0]); }},
      {"tanh", [](auto& a) { return tanh(a[0]); }}, {"abs", [](auto& a) { return abs(a[0] - 1.0); }},
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

TEST_CASE("a broadcast or slice with a short innermost axis computes each element as the long layout does",
          "[elementwise]") {
  // [n, 3] from [n, 1] and [3] runs along n (backends/cpu/strided.hpp): the values are those of the [3, n] layout,
  // transposed, bit for bit, in every dtype; copies of a narrow column block likewise.
  const std::int64_t n = 1000;
  for (const DType dtype : {DType::f64, DType::f32, DType::i64, DType::i32}) {
    INFO(name_of(dtype));
    const Tensor x = (randn({n, 1}, 31) * 100.0).astype(dtype), mu = (randn({3}, 32) * 100.0).astype(dtype);
    const Tensor narrow = x - mu;
    const Tensor wide = transpose(reshape(mu, {3, 1}) - reshape(x, {1, n}));  // the same subtractions, swapped
    const Tensor negated = neg(wide);
    REQUIRE(narrow.shape() == Shape{n, 3});
    CHECK(narrow.astype(DType::f64).to_vector<double>() == negated.astype(DType::f64).to_vector<double>());
    const Tensor block = randn({n, 6}, 33).astype(dtype);
    const std::vector<double> all = block.astype(DType::f64).to_vector<double>();
    const std::vector<double> cols = slice(block, 1, 1, 3).astype(DType::f64).to_vector<double>();
    for (std::int64_t i = 0; i < n; i += 97)
      for (std::int64_t j = 0; j < 2; ++j)
        CHECK(cols[static_cast<std::size_t>(i * 2 + j)] == all[static_cast<std::size_t>(i * 6 + 1 + j)]);
  }
}

TEST_CASE("binary op gradients match finite differences, broadcasting included", "[elementwise][grad]") {
  const std::vector<std::pair<Shape, Shape>> pairs = {{{}, {}},         {{4}, {4}},          {{3, 4}, {4}},
                                                      {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{}, {2, 3}}};
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

namespace {
// std::pow's value, or pow's from the library, within the documented accuracy: special values
// (NaN, infinities, zeros, their signs) exactly, finite ones within (|b log a| + 4) ulps.
template <class T>
void check_pow_against_std(const std::vector<T>& as, T b, DType dtype, bool varying) {
  std::vector<double> av(as.begin(), as.end());
  const auto n = static_cast<std::int64_t>(as.size());
  const Tensor a = Tensor::from_vector(av, {n}, dtype);
  // One exponent broadcast (stride 0), or the same value stored per element (the varying path).
  const Tensor e = varying ? Tensor::from_vector(std::vector<double>(as.size(), static_cast<double>(b)), {n}, dtype)
                           : Tensor::scalar(static_cast<double>(b), dtype);
  const std::vector<T> got = pow(a, e).template to_vector<T>();
  for (std::size_t i = 0; i < as.size(); ++i) {
    const T want = std::pow(as[i], b);
    INFO("pow(" << as[i] << ", " << b << "): " << got[i] << ", std::pow " << want);
    if (std::isnan(want)) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want) || want == 0) {
      CHECK(got[i] == want);
      CHECK(std::signbit(got[i]) == std::signbit(want));
    } else if (got[i] != want) {
      const double ulps = std::fabs(static_cast<double>(b) * std::log(std::fabs(static_cast<double>(as[i])))) + 4;
      CHECK(std::fabs(static_cast<double>(got[i]) - want) <=
            ulps * std::numeric_limits<T>::epsilon() * std::fabs(want));
    }
  }
}

template <class T>
void check_pow_exponents(DType dtype) {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T tiny = std::numeric_limits<T>::denorm_min() * 7, small = std::numeric_limits<T>::min();
  std::vector<T> as = {0,
                       -T(0),
                       1,
                       -1,
                       2,
                       -2,
                       T(0.5),
                       T(-0.5),
                       T(3.7),
                       T(-3.7),
                       inf,
                       -inf,
                       nan,
                       tiny,
                       -tiny,
                       small,
                       std::numeric_limits<T>::max(),
                       T(1e-20),
                       T(1e20),
                       T(1.0000001),
                       T(0.9999999)};
  for (int i = 0; i < 80; ++i) as.push_back(static_cast<T>(std::exp(0.37 * i - 15.0)));  // a row longer than a chunk
  for (T b : {T(0),   -T(0),   T(1),   T(2),    T(3),        T(-1),  T(-2),   T(-3),   T(8), T(-8), T(9), T(-9),
              T(0.5), T(-0.5), T(2.5), T(-1.7), T(1) / T(3), T(100), T(-100), T(1e-8), inf,  -inf,  nan})
    for (bool varying : {false, true}) check_pow_against_std<T>(as, b, dtype, varying);
}
}  // namespace

TEST_CASE("pow with one exponent for the whole tensor: fast paths agree with std::pow, special values exactly",
          "[elementwise]") {
  check_pow_exponents<double>(DType::f64);
  check_pow_exponents<float>(DType::f32);
}

TEST_CASE("pow's value of an element does not depend on the tensor's length or layout", "[elementwise]") {
  const Tensor x = rand({131}, 7) * 5.0 + 0.01;
  const Tensor b = Tensor::scalar(-2.89);
  const std::vector<double> whole = pow(x, b).to_vector<double>();
  for (std::int64_t len : {1, 2, 3, 7, 63, 64, 65, 130}) {
    const std::vector<double> part = pow(slice(x, 0, 131 - len, 131), b).to_vector<double>();
    for (std::int64_t i = 0; i < len; ++i)
      REQUIRE(part[static_cast<std::size_t>(i)] == whole[static_cast<std::size_t>(131 - len + i)]);
  }
  // An exponent per row (broadcast along the row) takes the same path as one scalar exponent.
  const Tensor m = x.reshape({1, 131}) * ones({3, 1});
  const Tensor rows = Tensor::from_vector({-2.89, 2.0, 0.5}, {3, 1});
  const std::vector<double> by_row = pow(m, rows).to_vector<double>();
  for (std::size_t r = 0; r < 3; ++r) {
    const std::vector<double> one = pow(x, Tensor::scalar(rows.to_vector<double>()[r])).to_vector<double>();
    for (std::size_t i = 0; i < 131; ++i) REQUIRE(by_row[r * 131 + i] == one[i]);
  }
  // Exponents that vary along the row take each element's path: the same bits as one exponent, so
  // vmap(f)(X)[i] equals f(X[i]) when the exponent is per example.
  const Tensor e = Tensor::from_vector({-2.89, 2.0, 0.5, -0.5, 1.0, 0.0, -3.0, 7.25}, {8});
  const Tensor xs = slice(x, 0, 0, 8);
  const std::vector<double> ev = e.to_vector<double>(), got = pow(xs, e).to_vector<double>();
  const std::vector<double> mapped =
      vmap([](const Tensor& p, const Tensor& q) { return pow(p, q); })(xs, e).to_vector<double>();
  for (std::size_t i = 0; i < 8; ++i) {
    const double one =
        pow(slice(xs, 0, static_cast<std::int64_t>(i), static_cast<std::int64_t>(i) + 1), Tensor::scalar(ev[i]))
            .to_vector<double>()[0];
    REQUIRE(got[i] == one);
    REQUIRE(mapped[i] == one);
  }
}

TEST_CASE("pow's gradient at a zero base, from the output", "[elementwise][grad]") {
  const Tensor zero = Tensor::from_vector({0.0}, {1});
  auto da = [&](double b) {
    return grad([b](const Tensor& a) { return sum(pow(a, Tensor::scalar(b))); })(zero).to_vector<double>()[0];
  };
  CHECK(da(2) == 0);  // 2 * 0^1, not 0 * (0 / 0)
  CHECK(da(3.5) == 0);
  CHECK(da(1) == 1);
  CHECK(da(0) == 0);
  CHECK(std::isinf(da(0.5)));
  // Away from zero the gradient b a^(b-1) (pow_base_grad) matches the C library's closely.
  const Tensor a = Tensor::from_vector({0.3, 1.7, 4.0, 2.0}, {4}), b = Tensor::from_vector({2.0, -1.5, 0.5, 3.0}, {4});
  const std::vector<Tensor> g = grad([](const Tensor& x, const Tensor& y) { return sum(pow(x, y)); }, {0, 1})(a, b);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> ga, gb;
  for (std::size_t i = 0; i < 4; ++i) {
    ga.push_back(bv[i] * std::pow(av[i], bv[i] - 1));
    gb.push_back(std::pow(av[i], bv[i]) * std::log(av[i]));
  }
  require_close(g[0], ga, 1e-14);
  require_close(g[1], gb, 1e-14);
}

TEST_CASE("pow's second derivatives match finite differences of its gradient", "[elementwise][grad]") {
  const Tensor a = positive({3, 4}, 11), b = positive({4}, 12) * 2.0 - 1.0;
  check_gradients(
      [](auto& x) {
        return grad([](const Tensor& p, const Tensor& q) { return sum(pow(p, q)); }, {0, 1})(x[0], x[1])[0];
      },
      {a, b});
  check_gradients(
      [](auto& x) {
        return grad([](const Tensor& p, const Tensor& q) { return sum(pow(p, q)); }, {0, 1})(x[0], x[1])[1];
      },
      {a, b});
  // A scalar exponent (the fast path) and a base with a zero: the second derivative of a^3 at 0 is 0.
  const Tensor z = Tensor::from_vector({0.0, 0.7, 1.3}, {3});
  const Tensor h =
      grad([](const Tensor& p) { return sum(grad([](const Tensor& q) { return sum(pow(q, 3.0)); })(p)); })(z);
  require_close(h, {0.0, 6 * 0.7, 6 * 1.3}, 1e-14);
}

TEST_CASE("pow's base gradient: b a^(b-1) in one pass, the same bits for one exponent or one per element",
          "[elementwise][grad]") {
  const Tensor a = Tensor::from_vector({0.0, 0.3, 1.0, 2.5, 7.0, 1e-300, 1e300, 3.0}, {8});
  for (double b : {-1.5, -1.0, 0.0, 0.5, 1.0, 2.0, 3.7}) {
    INFO("b = " << b);
    const Tensor one = Tensor::scalar(b), each = full({8}, b);
    const std::vector<double> g_one = grad([&](const Tensor& x) { return sum(pow(x, one)); })(a).to_vector<double>();
    const std::vector<double> g_each = grad([&](const Tensor& x) { return sum(pow(x, each)); })(a).to_vector<double>();
    CHECK(std::memcmp(g_one.data(), g_each.data(), g_one.size() * sizeof(double)) == 0);
    const std::vector<double> av = a.to_vector<double>();
    for (std::size_t i = 0; i < av.size(); ++i) {
      const double want = b == 0 ? 0.0 : b * std::pow(av[i], b - 1);
      INFO("a = " << av[i] << ": " << g_one[i] << " against " << want);
      if (std::isinf(want) || want == 0) CHECK(g_one[i] == want);
      else CHECK(std::fabs(g_one[i] - want) <= 1e-14 * std::fabs(want));
    }
  }
  // The second derivative at a zero base is b (b - 1) 0^(b - 2): 2 for a^2, 0 for a^3.
  const Tensor zero = zeros({1});
  for (double b : {2.0, 3.0}) {
    const Tensor h = grad([b](const Tensor& p) {
      return sum(grad([b](const Tensor& q) { return sum(pow(q, Tensor::scalar(b))); })(p));
    })(zero);
    CHECK(h.to_vector<double>()[0] == b * (b - 1) * std::pow(0.0, b - 2));
  }
}

TEST_CASE("pow's gradient where a^b overflows or underflows is b a^(b-1)", "[elementwise]") {
  const double inf = std::numeric_limits<double>::infinity();
  auto dpow = [](double a, double b, DType dtype) {
    return grad([&](const Tensor& x) { return sum(pow(x, full({}, b, dtype))); })(full({1}, a, dtype))
        .to_vector<double>()[0];
  };
  CHECK(dpow(1e200, 2.0, DType::f64) == Approx(2e200));  // a^b = inf
  CHECK(dpow(inf, 2.0, DType::f64) == inf);              // inf / inf would be NaN
  CHECK(dpow(-inf, 3.0, DType::f64) == inf);
  CHECK(dpow(inf, 0.5, DType::f64) == 0.0);
  CHECK(dpow(1e20, 2.0, DType::f32) == Approx(2e20).epsilon(1e-6));                      // float32 overflow
  CHECK(dpow(1e-20, 2.5, DType::f32) == Approx(2.5e-30).epsilon(1e-5));                  // underflow to 0
  CHECK(dpow(3.0, 2.5, DType::f64) == Approx(2.5 * std::pow(3.0, 1.5)).epsilon(1e-14));  // the fast form
}

// The CPU kernels hold up to 8 merged axes in place (backends/merged_axes.hpp) and move longer lists to the heap: the
// copy that transposes 2^10 elements on all 10 axes merges none of them. Element f of the transposed tensor is x's
// element at f's 10 bits reversed.
TEST_CASE("maps walk views whose axes do not merge, up to more than are held in place", "[elementwise]") {
  for (int rank : {8, 9, 10}) {
    INFO("rank " << rank);
    const Shape shape(static_cast<std::size_t>(rank), 2);
    const std::int64_t count = std::int64_t{1} << rank;
    const Tensor x = arange(0, static_cast<double>(count)).reshape(shape);
    const Tensor t = transpose(x);
    const Tensor y = t * 2.0 + t;
    std::vector<double> expected;
    for (std::int64_t f = 0; f < count; ++f) {
      std::int64_t reversed = 0;
      for (int b = 0; b < rank; ++b) reversed |= ((f >> b) & 1) << (rank - 1 - b);
      expected.push_back(3.0 * static_cast<double>(reversed));
    }
    require_close(y, expected, 0);
    require_close(
        exp(t * 1e-3),
        [&] {
          std::vector<double> e;
          for (double v : expected) e.push_back(std::exp(v / 3.0 * 1e-3));
          return e;
        }(),
        1e-15);
  }
}
