// Regression tests for what a review and a fuzzing campaign found (issue 11): transforms nested
// every way give the eager gradient, sizes never overflow, negative shapes and impossible requests
// raise vt::Error, jitted functions compose and recurse, elementwise math is exact and the same at
// every length, and a failing matrix is named by its example.
#include <cfloat>
#include <climits>
#include <cmath>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <thread>

#include <vtape/backends/special_math.hpp>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

// Runs f and returns what it threw: "vt::Error: ..." for vtape's errors, a marker for anything else.
template <class F>
std::string outcome_of(F&& f) {
  try {
    f();
  } catch (const vt::Error& e) {
    return std::string("vt::Error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other exception: ") + e.what();
  }
  return "no error";
}

}  // namespace

// ---------------------------------------------------------------- transforms nested
TEST_CASE("jit inside grad carries the gradient of a captured tracked tensor", "[hostile][jit][autodiff]") {
  const Tensor p = Tensor::scalar(3.0);
  const Tensor g =
      grad([&](const Tensor& x) { return jit([&](const Tensor& q) { return sum(q * x); })(p); })(Tensor::scalar(2.0));
  require_close(g, {3.0});

  // Traced first inside grad, capturing the variable: calls run it op by op, so the gradient flows, never a
  // constant baked at the trace.
  Tensor w = Tensor::from_vector({1.0, 2.0}, {2});
  auto f = jit([&](const Tensor& q) { return sum(q * w); });
  const Tensor q = Tensor::from_vector({5.0, 7.0}, {2});
  const auto through_w = [&](const Tensor& x) {
    w = x;
    return f(q);
  };
  require_close(grad(through_w)(Tensor::from_vector({1.0, 1.0}, {2})), {5.0, 7.0});
  require_close(grad(through_w)(Tensor::from_vector({2.0, 1.0}, {2})), {5.0, 7.0});
  // The same object, whose plan for q's type was traced outside any transform (w a constant then), keeps that plan
  // inside grad as at any later call (jit's rule: a plan has the captures of its trace, as in JAX): the gradient
  // reaches its arguments, and the rebound capture is not seen.
  auto h = jit([&](const Tensor& r) { return sum(r * w); });
  w = Tensor::from_vector({1.0, 2.0}, {2});
  require_close(h(q), {19.0});
  require_close(grad([&](const Tensor& r) { return h(r); })(q), {1.0, 2.0});
  require_close(grad(through_w)(Tensor::from_vector({3.0, 3.0}, {2})), {5.0, 7.0});  // f's plan: op by op still
}

TEST_CASE("every nesting of jit, grad and vmap gives the eager gradient", "[hostile][jit][autodiff][vmap]") {
  const Tensor X = randn({5, 3}, 1);
  const Tensor w0 = randn({3}, 2);
  const Tensor c = randn({3}, 3);
  auto loss = [&](const Tensor& w) {  // eager reference: vmap over examples, captured c
    return sum(vmap([&](const Tensor& a) { return sum(sin(a * w) * c); })(X));
  };
  const Tensor expected = grad(loss)(w0);

  SECTION("jit in grad, the variable as argument") {
    auto inner =
        jit([&](const Tensor& w) { return sum(vmap([&](const Tensor& a) { return sum(sin(a * w) * c); })(X)); });
    require_close(grad([&](const Tensor& w) { return inner(w); })(w0), expected, 1e-14);
  }
  SECTION("jit in grad, the variable captured") {
    require_close(grad([&](const Tensor& w) {
                    return jit([&](const Tensor& xs) {
                      return sum(vmap([&](const Tensor& a) { return sum(sin(a * w) * c); })(xs));
                    })(X);
                  })(w0),
                  expected, 1e-14);
  }
  SECTION("vmap in jit in grad, the variable captured") {
    require_close(grad([&](const Tensor& w) {
                    auto per_example = jit(vmap([&](const Tensor& a) { return sum(sin(a * w) * c); }));
                    return sum(per_example(X));
                  })(w0),
                  expected, 1e-14);
  }
  SECTION("grad in jit") {
    auto g = jit([&](const Tensor& w) { return grad(loss)(w); });
    require_close(g(w0), expected, 1e-14);
    CHECK(g.counters().traces == 1);
  }
  SECTION("grad of jit of grad (second order) against eager") {
    auto hv = [&](const Tensor& w) { return sum(grad(loss)(w) * c); };
    const Tensor eager = grad(hv)(w0);
    auto inner = jit([&](const Tensor& w) { return grad(loss)(w); });
    require_close(grad([&](const Tensor& w) { return sum(inner(w) * c); })(w0), eager, 1e-13);
  }
  SECTION("vjp through a jitted function capturing the primal") {
    auto [out, pullback] =
        vjp([&](const Tensor& w) { return jit([&](const Tensor& xs) { return matmul(xs, sin(w)); })(X); }, w0);
    const Tensor ct = randn({5}, 4);
    const Tensor got = pullback(ct)[0];
    const Tensor want = vjp([&](const Tensor& w) { return matmul(X, sin(w)); }, w0).second(ct)[0];
    require_close(got, want, 1e-14);
  }
}

TEST_CASE("a plan is the same wherever it was first traced", "[hostile][jit][linalg]") {
  // The Cholesky adjoint has a fast form and a differentiable one; which one a trace takes must not
  // depend on a transform open around the first call.
  auto factor_loss = [](const Tensor& a) { return sum(cholesky(a)); };
  const Tensor a = matmul(randn({4, 4}, 5), transpose(randn({4, 4}, 5))) + eye(4) * 4.0;
  auto outside = jit(grad(factor_loss));
  const PlanSummary plain = outside.compile(a);
  auto inside = jit(grad(factor_loss));
  PlanSummary nested;
  (void)grad([&](const Tensor& x) {
    nested = inside.compile(a);
    return sum(x * x);
  })(Tensor::scalar(1.0));
  CHECK(nested.traced_ops == plain.traced_ops);
  CHECK(nested.kernels == plain.kernels);
  require_close(inside(a), outside(a), 1e-14);
}

TEST_CASE("jitted functions compose, and one may call itself", "[hostile][jit]") {
  auto inner = jit([](const Tensor& y) { return sin(y) * 2.0; });
  auto outer = jit([&](const Tensor& x) { return inner(x) + inner(x * 3.0); });
  const Tensor x = randn({4}, 6);
  require_close(outer(x), sin(x) * 2.0 + sin(x * 3.0) * 2.0, 1e-15);
  CHECK(outer.counters().traces == 1);
  // Batched, and under grad.
  const Tensor X = as_batch(randn({3, 4}, 7));
  require_close(unbatch(outer(X)), unbatch(sin(X) * 2.0 + sin(X * 3.0) * 2.0), 1e-15);
  require_close(grad([&](const Tensor& v) { return sum(outer(v)); })(x), cos(x) * 2.0 + cos(x * 3.0) * 6.0, 1e-14);

  // Recursion on a static shape: sum of the halves, down to single elements.
  std::function<Tensor(const Tensor&)> self;
  auto halves = jit([&](const Tensor& v) -> Tensor {
    const std::int64_t n = v.shape(0);
    if (n == 1) return v * 1.0;
    return self(slice(v, 0, 0, n / 2)) + sum(slice(v, 0, n / 2, n));
  });
  self = halves;
  const Tensor v = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  // halves([1..8]) = halves([1..4]) + 26 = (halves([1,2]) + 7) + 26 = (halves([1]) + 2) + 33 = 36.
  require_close(halves(v), {36.0});
  CHECK(halves.counters().traces == 1);
}

namespace {

// Runs f on a thread of its own with a stack of `bytes`, and returns what it threw ("" when nothing).
std::string on_small_stack(std::size_t bytes, const std::function<void()>& f) {
  struct Call {
    const std::function<void()>* f;
    std::string error;
  } call{&f, ""};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  const auto run = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->f)();
    } catch (const std::exception& e) {
      c->error = e.what();
    }
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, run, &call) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return call.error;
}

}  // namespace

TEST_CASE("a chain of 40,000 ops traces, jits, differentiates and is freed on a 2 MB stack",
          "[hostile][jit][autodiff]") {
  // x <- a x + b, n times: x_n = a^n x_0 + b (a^n - 1) / (a - 1), and d x_n / d x_0 = a^n. A jit's plan builder and
  // the freeing of a trace or a tape walk the whole chain: at a stack frame or two per op they would overflow this
  // stack (a thread's of 8 MB at some 100,000 ops).
  const int n = 20000;
  const double a = 1.0000001, b = 0.5;
  const auto chain = [&](const Tensor& x0) {
    Tensor x = x0;
    for (int i = 0; i < n; ++i) x = x * a + b;
    return sum(x);
  };
  const Tensor x0 = Tensor::from_vector({1.0, -2.0, 0.25}, {3});
  double value = 0;
  std::vector<double> gradient, jitted_gradient;
  CHECK(on_small_stack(std::size_t{2} << 20, [&] {
          value = jit(chain)(x0).item();
          gradient = grad(chain)(x0).to_vector<double>();
          jitted_gradient = jit(grad(chain))(x0).to_vector<double>();
        }) == "");
  const double an = std::pow(a, n);
  CHECK(value == Approx(an * (1.0 - 2.0 + 0.25) + 3 * b * (an - 1) / (a - 1)).epsilon(1e-10));
  for (const std::vector<double>& g : {gradient, jitted_gradient}) {
    REQUIRE(g.size() == 3);
    for (double d : g) CHECK(d == Approx(an).epsilon(1e-10));
  }
}

// ---------------------------------------------------------------- sizes
TEST_CASE("size arithmetic never overflows: impossible sizes raise, naming the op", "[hostile][errors]") {
  CHECK_THAT(outcome_of([] { eye(std::int64_t{1} << 31); }),
             Catch::StartsWith("vt::Error: eye") && Catch::Contains("too large"));
  CHECK_THAT(outcome_of([] {
               zeros({std::int64_t{1} << 32, std::int64_t{1} << 32});
             }),
             Catch::StartsWith("vt::Error: zeros") && Catch::Contains("[4294967296, 4294967296]"));
  CHECK_THAT(outcome_of([] { reshape(ones({2}), {INT64_MAX, 2}); }), Catch::StartsWith("vt::Error: reshape"));
  CHECK_THAT(outcome_of([] { full({INT64_MAX / 4, 3}, 1.0); }), Catch::StartsWith("vt::Error: full"));
  CHECK_THAT(outcome_of([] { Tensor::empty({INT64_MAX / 8 + 1}); }), Catch::StartsWith("vt::Error: empty"));
  // broadcast_to and a batch: the output's bytes are checked, not only its elements.
  CHECK_THAT(outcome_of([] { broadcast_to(ones({1}), {std::int64_t{1} << 61}); }),
             Catch::StartsWith("vt::Error: broadcast_to"));
  // A batch of huge examples: B times the per-example size overflows.
  CHECK_THAT(outcome_of([] {
               const Tensor b = as_batch(zeros({std::int64_t{1} << 20, 0}));
               broadcast_to_batch(broadcast_to(zeros({1}), {std::int64_t{1} << 44}), b);
             }),
             Catch::StartsWith("vt::Error"));
}

TEST_CASE("slices with huge stops and steps take the right elements and differentiate", "[hostile][indexing]") {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5}, {5});
  require_close(slice(x, 0, 0, 3, INT64_MAX), {1.0});
  require_close(slice(x, 0, 0, INT64_MAX, INT64_MAX / 2 + 7), {1.0});
  require_close(slice(x, 0, 1, INT64_MAX, 2), {2.0, 4.0});
  require_close(slice(x, 0, INT64_MIN, INT64_MAX), {1, 2, 3, 4, 5});
  CHECK(slice(x, 0, 4, 1).shape() == Shape{0});
  // An axis with a stride above 1: the window's stride times a huge step must not be formed.
  const Tensor m = reshape(arange(0, 10), {5, 2});
  require_close(slice(m, 0, 1, INT64_MAX, INT64_MAX / 2 + 7), {2.0, 3.0});
  require_close(grad([](const Tensor& v) { return sum(slice(v, 0, 1, INT64_MAX, INT64_MAX / 2 + 7) * 3.0); })(x),
                {0, 3, 0, 0, 0});
  require_close(grad([](const Tensor& v) { return sum(slice(v, 0, 0, INT64_MAX, 3)); })(x), {1, 0, 0, 1, 0});
}

TEST_CASE("negative dimensions are refused everywhere", "[hostile][errors]") {
  CHECK_THAT(outcome_of([] { broadcast_to(ones({1}), {-2}); }),
             Catch::StartsWith("vt::Error: broadcast_to") && Catch::Contains("negative"));
  double buf[4] = {1, 2, 3, 4};
  CHECK_THAT(outcome_of([&] {
               Tensor::from_blob(buf, {-2, 2}, DType::f64);
             }),
             Catch::StartsWith("vt::Error: from_blob") && Catch::Contains("[-2, 2]"));
  CHECK_THAT(outcome_of([] { zeros({2, -1}); }), Catch::StartsWith("vt::Error: zeros"));
  CHECK_THAT(outcome_of([] { reshape(ones({2}), {-2, -1}); }), Catch::StartsWith("vt::Error: reshape"));
  CHECK_THAT(outcome_of([] { sum_to(ones({2, 2}), {-2}); }), Catch::StartsWith("vt::Error"));
}

TEST_CASE("creation functions raise vt::Error, never another exception", "[hostile][errors]") {
  CHECK_THAT(outcome_of([] {
               randn({3, -2}, 1);
             }),
             Catch::StartsWith("vt::Error: randn") && Catch::Contains("negative"));
  CHECK_THAT(outcome_of([] { rand({3, -2}, 1); }), Catch::StartsWith("vt::Error: rand"));
  CHECK_THAT(outcome_of([] { randn({INT64_MAX, 2}, 1); }), Catch::StartsWith("vt::Error: randn"));
  CHECK_THAT(outcome_of([] { arange(0, 5, 1e-300); }),
             Catch::StartsWith("vt::Error: arange") && Catch::Contains("too many"));
  CHECK_THAT(outcome_of([] { arange(INFINITY, 1e18, -1); }),
             Catch::StartsWith("vt::Error: arange") && Catch::Contains("finite"));
  CHECK_THAT(outcome_of([] { arange(0, NAN); }), Catch::StartsWith("vt::Error: arange"));
  CHECK_THAT(outcome_of([] { arange(-1e308, 1e308, 1.0); }), Catch::StartsWith("vt::Error: arange"));
  CHECK_THAT(outcome_of([] { linspace(0, 1, INT64_MAX); }), Catch::StartsWith("vt::Error: linspace"));
  CHECK_THAT(outcome_of([] { arange(0, 1e18); }), Catch::StartsWith("vt::Error: arange"));
  // Out of memory is a vt::Error too, naming the bytes asked for (2^62: beyond any address space,
  // so no overcommit setting lets it through).
  CHECK_THAT(outcome_of([] { zeros({std::int64_t{1} << 59}); }), Catch::StartsWith("vt::Error") &&
                                                                     Catch::Contains("out of memory") &&
                                                                     Catch::Contains("4611686018427387904 bytes"));
  // Small and empty requests still work.
  CHECK(arange(0, 1, 0.25).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(5, 0, 1).numel() == 0);
  CHECK(linspace(0, 1, 0).numel() == 0);
  CHECK(randn({0, 3}, 1).shape() == Shape{0, 3});
}

// ---------------------------------------------------------------- elementwise exactness
namespace {

template <class T>
std::int64_t ulp_distance(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
  if (a == b) return std::signbit(a) == std::signbit(b) ? 0 : 1;  // -0 and +0 count as one ulp apart
  using I = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;
  auto ordered = [](T v) {
    I i;
    std::memcpy(&i, &v, sizeof v);
    return i < 0 ? static_cast<std::int64_t>(std::numeric_limits<I>::min()) - i : static_cast<std::int64_t>(i);
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// Special, subnormal, tiny, huge and ordinary values of T, both signs.
template <class T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v{T(0),
                   L::infinity(),
                   L::quiet_NaN(),
                   L::denorm_min(),
                   L::min(),
                   L::min() / 2,
                   L::max(),
                   L::epsilon(),
                   T(1),
                   T(0.5),
                   T(2),
                   T(3),
                   T(1e-5),
                   T(0.1),
                   T(0.7),
                   T(1.5),
                   T(10),
                   T(20.5),
                   T(88.5),
                   T(89),
                   T(100),
                   T(700),
                   T(709.5),
                   T(710),
                   T(745.5),
                   T(1e10),
                   T(1e30),
                   T(3.14159265),
                   T(1e-310),
                   T(1e-40),
                   T(1) - L::epsilon() / 2,
                   T(1) + L::epsilon(),
                   T(-1) + L::epsilon() / 2};
  for (int e = -60; e <= 60; e += 7) v.push_back(std::ldexp(T(1.37), e));
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

template <class T>
void check_unary_exact(const char* name, Tensor (*op)(const Tensor&), T (*reference)(T), std::int64_t most_ulps = 1) {
  const std::vector<T> values = special_values<T>();
  const DType dtype = dtype_of<T>();
  std::vector<double> as_double(values.begin(), values.end());
  const Tensor x = Tensor::from_vector(as_double, {static_cast<std::int64_t>(values.size())}, dtype);
  const std::vector<T> got = op(x).template to_vector<T>();
  INFO(name << " " << name_of(dtype));
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t d = ulp_distance(got[i], reference(values[i]));
    INFO("at " << values[i] << ": " << got[i] << " against the reference's " << reference(values[i]));
    CHECK(d <= most_ulps);
    worst = std::max(worst, d);
  }
  // The same bits whatever the length, the position in the tensor and the layout: every value at
  // every position of tensors of length 1..67, contiguous, strided (a slice) and broadcast.
  for (std::int64_t len = 1; len <= 67; ++len) {
    for (std::size_t i = 0; i < values.size(); i += 3) {
      const Tensor filled = full({len}, static_cast<double>(values[i]), dtype);
      const std::vector<T> row = op(filled).template to_vector<T>();
      for (T r : row) REQUIRE(std::memcmp(&r, &got[i], sizeof r) == 0);
    }
  }
  // Strided: x interleaved with other values, [x0, 7, x1, 7, ...], read every other element.
  const Tensor interleaved = reshape(stack({x, full(x.shape(), 7.0, dtype)}, -1), {-1});
  const Tensor strided = slice(interleaved, 0, 0, interleaved.shape(0), 2);
  const std::vector<T> via_strided = op(strided).template to_vector<T>();
  REQUIRE(via_strided.size() == got.size());
  CHECK(std::memcmp(via_strided.data(), got.data(), got.size() * sizeof(T)) == 0);
  // Broadcast (stride 0): one value read for a whole row.
  for (std::size_t i = 0; i < values.size(); i += 5) {
    const Tensor one = slice(x, 0, static_cast<std::int64_t>(i), static_cast<std::int64_t>(i) + 1);
    const std::vector<T> row = op(broadcast_to(one, {3, 37})).template to_vector<T>();
    for (T r : row) REQUIRE(std::memcmp(&r, &got[i], sizeof r) == 0);
  }
  // vmap(f)(X)[i] == f(X[i]): batched rows of 7 values against the whole vector.
  const std::int64_t rows = static_cast<std::int64_t>(values.size()) / 7;
  const Tensor X = reshape(slice(x, 0, 0, rows * 7), {rows, 7});
  const std::vector<T> mapped = unbatch(vmap(op)(X)).template to_vector<T>();
  CHECK(std::memcmp(mapped.data(), got.data(), mapped.size() * sizeof(T)) == 0);
}

template <class T>
T neg_ref(T v) {
  return -v;
}
template <class T>
T square_ref(T v) {
  return v * v;
}
template <class T>
T abs_ref(T v) {
  return std::fabs(v);
}
template <class T>
T sign_ref(T v) {
  return std::isnan(v) ? v : static_cast<T>((v > 0) - (v < 0));
}
template <class T>
T exp_ref(T v) {
  return std::exp(v);
}
template <class T>
T log_ref(T v) {
  return std::log(v);
}
template <class T>
T log1p_ref(T v) {
  return std::log1p(v);
}
template <class T>
T sqrt_ref(T v) {
  return std::sqrt(v);
}
template <class T>
T sin_ref(T v) {
  return std::sin(v);
}
template <class T>
T cos_ref(T v) {
  return std::cos(v);
}
template <class T>
T tanh_ref(T v) {
  return std::tanh(v);
}
// The special functions: the C library's, and for those it lacks, the scalar functions every
// backend shares (backends/special_math.hpp).
template <class T>
T log10_ref(T v) {
  return std::log10(v);
}
template <class T>
T log2_ref(T v) {
  return std::log2(v);
}
template <class T>
T exp2_ref(T v) {
  return std::exp2(v);
}
inline double exp10_ref_of(double v) { return ::exp10(v); }
inline float exp10_ref_of(float v) { return ::exp10f(v); }
template <class T>
T exp10_ref(T v) {
  return exp10_ref_of(v);
}
template <class T>
T expm1_ref(T v) {
  return std::expm1(v);
}
template <class T>
T erf_ref(T v) {
  return std::erf(v);
}
template <class T>
T erfc_ref(T v) {
  return std::erfc(v);
}
template <class T>
T lgamma_ref(T v) {
  return std::lgamma(v);
}
// These four "references" are the code under test (vt::special::*): their lines check the map
// plumbing only, that each value's bits are equal at every length and layout. Their accuracy is
// checked against scipy's tables and closed forms in test_special.cpp.
template <class T>
T digamma_ref(T v) {
  return vt::special::digamma(v);
}
template <class T>
T trigamma_ref(T v) {
  return vt::special::trigamma(v);
}
template <class T>
T sigmoid_ref(T v) {
  return vt::special::sigmoid(v);
}
template <class T>
T softplus_ref(T v) {
  return vt::special::softplus(v);
}

template <class T>
void check_every_unary() {
  check_unary_exact<T>("neg", neg, neg_ref<T>);
  check_unary_exact<T>("square", square, square_ref<T>);
  check_unary_exact<T>("abs", abs, abs_ref<T>);
  check_unary_exact<T>("sign", sign, sign_ref<T>);
  check_unary_exact<T>("exp", exp, exp_ref<T>);
  check_unary_exact<T>("log", log, log_ref<T>);
  check_unary_exact<T>("log1p", log1p, log1p_ref<T>);
  check_unary_exact<T>("sqrt", sqrt, sqrt_ref<T>);
  check_unary_exact<T>("sin", sin, sin_ref<T>);
  check_unary_exact<T>("cos", cos, cos_ref<T>);
  check_unary_exact<T>("tanh", tanh, tanh_ref<T>);
  check_unary_exact<T>("log10", log10, log10_ref<T>);
  check_unary_exact<T>("log2", log2, log2_ref<T>);
  check_unary_exact<T>("exp2", exp2, exp2_ref<T>);
  check_unary_exact<T>("exp10", exp10, exp10_ref<T>);
  check_unary_exact<T>("expm1", expm1, expm1_ref<T>);
  check_unary_exact<T>("erf", erf, erf_ref<T>);
  check_unary_exact<T>("erfc", erfc, erfc_ref<T>);
  check_unary_exact<T>("lgamma", lgamma, lgamma_ref<T>);
  check_unary_exact<T>("digamma", digamma, digamma_ref<T>);
  check_unary_exact<T>("trigamma", trigamma, trigamma_ref<T>);
  // The CPU computes these two from its own exp and log1p (each within an ulp of the C library's), the scalar
  // formula from the C library's: two roundings apart, so 2 ulps.
  check_unary_exact<T>("sigmoid", sigmoid, sigmoid_ref<T>, 2);
  check_unary_exact<T>("softplus", softplus, softplus_ref<T>, 2);
}

}  // namespace

TEST_CASE("unary ops match the C library on special and subnormal values, bit for bit at every length",
          "[hostile][elementwise]") {
  check_every_unary<double>();
  check_every_unary<float>();
  // The cases that were wrong, spelled out.
  CHECK(sqrt(Tensor::scalar(INFINITY)).item() == INFINITY);
  CHECK(sqrt(Tensor::scalar(INFINITY, DType::f32)).item<float>() == INFINITY);
  CHECK(sqrt(Tensor::scalar(1e-310)).item() == std::sqrt(1e-310));
  CHECK(std::signbit(neg(zeros({9})).to_vector<double>()[8]));
  CHECK(exp(full({9}, -INFINITY)).to_vector<double>()[8] == 0.0);
  CHECK(exp(full({9}, -720.0)).to_vector<double>()[3] == std::exp(-720.0));
  CHECK(log(full({9}, 1e-310)).to_vector<double>()[3] == std::log(1e-310));
}

// exp and log are vtape's own vectorised kernels (backends/cpu/vector_math.hpp), not the C library's: a dense sweep
// of each against the C library, over the whole finite range and where the kernels switch regime (overflow,
// underflow into the subnormals, subnormal inputs, arguments near 1 and near 0), both signs.
namespace {

template <class T>
std::vector<T> exp_log_sweep(bool for_log) {
  using L = std::numeric_limits<T>;
  constexpr bool f64 = sizeof(T) == 8;
  std::mt19937_64 gen(for_log ? 11 : 12);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); };
  const double min_exp2 = f64 ? -1074 : -149, max_exp2 = f64 ? 1023.999 : 127.999;
  const double overflow = std::log(static_cast<double>(L::max()));          // 709.78 or 88.72
  const double underflow = std::log(static_cast<double>(L::denorm_min()));  // -744.44 or -103.28
  const double normal = std::log(static_cast<double>(L::min()));            // -708.40 or -87.34
  std::vector<T> v;
  auto add = [&](double x) { v.push_back(static_cast<T>(x)); };
  for (int i = 0; i < 40000; ++i) {
    const double sign = i % 2 ? -1.0 : 1.0;
    add(sign * std::exp2(uniform(min_exp2, max_exp2)));  // every magnitude, subnormals included
    add(sign * std::exp2(uniform(-60, 12)));             // log-uniform where exp is neither 1 nor saturated
    add(uniform(underflow - 2, overflow + 1));           // exp's whole finite range, uniformly
    add(uniform(overflow - 1, overflow + 0.5));          // exp near overflow
    add(uniform(underflow - 1.5, normal + 1));           // exp into the subnormals and to zero
    add(1 + sign * std::exp2(uniform(-54, -1)));         // log near 1
    add(std::exp2(uniform(-8, 8)));                      // log of ordinary values
  }
  for (T s : {T(1), T(-1)}) {
    for (T x :
         {T(0), L::infinity(), L::denorm_min(), L::min(), L::max(), T(1), std::nextafter(T(1), T(2)),
          std::nextafter(T(1), T(0)), static_cast<T>(overflow), static_cast<T>(underflow), static_cast<T>(normal)})
      v.push_back(s * x);
  }
  v.push_back(L::quiet_NaN());
  return v;
}

template <class T>
void check_exp_log_sweep(const char* name, Tensor (*op)(const Tensor&), T (*reference)(T)) {
  const bool for_log = std::string(name) == "log";
  const std::vector<T> values = exp_log_sweep<T>(for_log);
  const double overflow = std::log(static_cast<double>(std::numeric_limits<T>::max()));
  const double underflow = std::log(static_cast<double>(std::numeric_limits<T>::denorm_min()));
  const DType dtype = dtype_of<T>();
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  const Tensor x = Tensor::from_vector(std::vector<double>(values.begin(), values.end()), {n}, dtype);
  const std::vector<T> got = op(x).template to_vector<T>();
  INFO(name << " " << name_of(dtype) << " over " << n << " values");
  std::int64_t worst = 0, off_by_one = 0;
  T worst_at = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T ref = reference(values[i]);
    const std::int64_t d = ulp_distance(got[i], ref);
    off_by_one += d == 1;
    if (d > worst) worst = d, worst_at = values[i];
    // Special values exact, by the input alone.
    const T v = values[i], inf = std::numeric_limits<T>::infinity();
    std::optional<T> exact;
    if (v != v) exact = v;
    if (for_log && v < 0) exact = std::numeric_limits<T>::quiet_NaN();
    if (for_log && v == 0) exact = -inf;
    if (for_log && v == inf) exact = inf;
    if (for_log && v == 1) exact = T(0);
    if (!for_log && v > overflow + 1e-6) exact = inf;  // +inf included
    if (!for_log && v < underflow - 1) exact = T(0);   // -inf included: below half the least subnormal
    if (!for_log && v == 0) exact = T(1);
    if (exact) {
      INFO("at " << v << ": " << got[i]);
      CHECK(ulp_distance(got[i], *exact) == 0);
    }
  }
  INFO("worst at " << worst_at << "; " << off_by_one << " results one ulp off");
  CHECK(worst <= 1);
  // Most results are the C library's own: a kernel off by a systematic half ulp would still be within one.
  CHECK(off_by_one * 20 < n);
  // The same bits when read through a transposed (strided) view.
  const std::int64_t half = n / 2;
  const Tensor pairs = reshape(slice(x, 0, 0, 2 * half), {half, 2});
  const std::vector<T> by_column = op(transpose(pairs)).template to_vector<T>();
  std::vector<T> by_row(by_column.size());
  for (std::int64_t i = 0; i < 2 * half; ++i)
    by_row[static_cast<std::size_t>(i)] = by_column[static_cast<std::size_t>((i % 2) * half + i / 2)];
  CHECK(std::memcmp(by_row.data(), got.data(), by_row.size() * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("exp and log are within an ulp of the C library over a dense sweep", "[hostile][elementwise]") {
  check_exp_log_sweep<double>("exp", exp, exp_ref<double>);
  check_exp_log_sweep<double>("log", log, log_ref<double>);
  check_exp_log_sweep<float>("exp", exp, exp_ref<float>);
  check_exp_log_sweep<float>("log", log, log_ref<float>);
}

TEST_CASE("log1p is within an ulp of the C library over a dense sweep", "[hostile][elementwise]") {
  // The CPU's log1p is log(1 + u) corrected for the rounding of 1 + u (vector_math.hpp): the sweep covers both
  // sides of zero, u near -1, where 1 + u is exact, and large u, where it rounds.
  std::vector<double> values;
  for (int e = -80; e <= 80; ++e)
    for (double m = 1.0; m < 2.0; m += 1.0 / 64) {
      const double u = std::ldexp(m, e);
      values.push_back(u);
      if (u < 1) values.push_back(-u);
    }
  for (double u = -0.999; u < 3; u += 0.000613) values.push_back(u);
  for (double u :
       std::initializer_list<double>{-1.0, -1.5, 0.0, -0.0, INFINITY, -INFINITY, 1e-310, -1e-310, 1e300, NAN})
    values.push_back(u);
  const auto n = static_cast<std::int64_t>(values.size());
  for (DType dtype : {DType::f64, DType::f32}) {
    const std::vector<double> got = log1p(Tensor::from_vector(values, {n}, dtype)).to_vector<double>();
    std::int64_t worst = 0;
    double worst_at = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::int64_t d = dtype == DType::f64
                                 ? ulp_distance(got[i], std::log1p(values[i]))
                                 : ulp_distance(static_cast<float>(got[i]), std::log1p(static_cast<float>(values[i])));
      if (d > worst) worst = d, worst_at = values[i];
    }
    INFO(name_of(dtype) << ": worst at " << worst_at << " over " << n << " values");
    CHECK(worst <= 1);
  }
  // Special values exactly: the sign of zero kept, the pole and the domain's edge.
  const std::vector<double> special = log1p(Tensor::from_vector({-0.0, -1.0, -2.0, INFINITY}, {4})).to_vector<double>();
  CHECK((special[0] == 0 && std::signbit(special[0])));
  CHECK(special[1] == -INFINITY);
  CHECK(std::isnan(special[2]));
  CHECK(special[3] == INFINITY);
}

TEST_CASE("sqrt is correctly rounded", "[hostile][elementwise]") {
  // IEEE: the result r of sqrt(x) is the double nearest the real root, so neither neighbour of r
  // squares closer to x (checked in long double, exact enough for these magnitudes).
  const Tensor x = rand({4096}, 8) * 1e6;
  const std::vector<double> xs = x.to_vector<double>(), rs = sqrt(x).to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const long double target = xs[i];
    auto miss = [&](double r) { return std::fabs(static_cast<long double>(r) * r - target); };
    const double r = rs[i];
    CHECK(miss(r) <= miss(std::nextafter(r, 0.0)));
    CHECK(miss(r) <= miss(std::nextafter(r, INFINITY)));
  }
}

// ---------------------------------------------------------------- batch index
TEST_CASE("a failing matrix is named by its example when examples hold several", "[hostile][linalg]") {
  std::vector<double> v;
  for (int e = 0; e < 8; ++e)
    for (int m = 0; m < 3; ++m)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) v.push_back(i == j ? (e == 5 && m == 1 && i == 2 ? -1.0 : 2.0) : 0.0);
  const Tensor mats = Tensor::from_vector(v, {8, 3, 4, 4});
  try {
    (void)vmap([](const Tensor& a) { return cholesky(a); })(mats);
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 5);
    CHECK(e.minor == 3);
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("example 5 of the batch of 8") && Catch::Contains("matrix 1 of the batch [3]"));
  }
  auto jitted = jit([](const Tensor& a) { return logdet(a); });
  try {
    (void)jitted(as_batch(mats));
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 5);
    CHECK_THAT(std::string(e.what()), Catch::Contains("example 5 of the batch of 8"));
  }
  // Unbatched, the stack's own index.
  try {
    (void)cholesky(mats);
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 16);
    CHECK_THAT(std::string(e.what()), Catch::Contains("matrix [5, 1] of the batch [8, 3]"));
  }
}

TEST_CASE("a corrupt .npy header raises vt::Error before anything large is allocated", "[hostile][errors]") {
  const std::string path = fmt::format("/tmp/vtape_hostile_{}.npy", static_cast<long>(::getpid()));
  auto write_with_shape = [&](const std::string& shape) {
    save_npy(path, Tensor::from_vector({1, 2, 3}, {3}));
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::size_t at = bytes.find("(3,)");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 4, shape);
    std::ofstream(path, std::ios::binary) << bytes;
  };
  write_with_shape("(99999999999999999999999,)");
  CHECK_THAT(outcome_of([&] { load_npy(path); }),
             Catch::StartsWith("vt::Error: load_npy") && Catch::Contains("out of range"));
  write_with_shape("(1000000000, 100000)");
  CHECK_THAT(outcome_of([&] { load_npy(path); }), Catch::StartsWith("vt::Error: load_npy") && Catch::Contains("fewer"));
  write_with_shape("(4294967296, 4294967296)");
  CHECK_THAT(outcome_of([&] { load_npy(path); }),
             Catch::StartsWith("vt::Error: load_npy") && Catch::Contains("too large"));
  std::remove(path.c_str());
}

TEST_CASE("empty tensors with huge dimensions stay cheap", "[hostile][indexing]") {
  // Found by the fuzzer: tril built a mask row by row over 2^62 rows of nothing.
  const Tensor z = full({std::int64_t{1} << 62, 0}, 1.0);
  CHECK(tril(z, 1).shape() == z.shape());
  CHECK(triu(z).shape() == z.shape());
  CHECK(sum(z).item() == 0.0);
  CHECK(reshape(z, {0, std::int64_t{1} << 62}).shape() == Shape{0, std::int64_t{1} << 62});
  // Batched, and with dimensions whose product alone would overflow: still empty, still cheap.
  const Tensor big = full({std::int64_t{1} << 62, 3, 0}, 1.0);
  CHECK(big.numel() == 0);
  // A per-example shape must fit on its own, whatever B (jit plans memory per example): with
  // B = 0 the tensor is empty, but examples of [2^62, 3] float64 could never exist.
  CHECK_THAT(outcome_of([&] {
               vmap([](const Tensor& a) { return exp(a); })(reshape(big, {0, std::int64_t{1} << 62, 3}));
             }),
             Catch::StartsWith("vt::Error: exp") && Catch::Contains("too large"));
  const Tensor batched = as_batch(full({3, std::int64_t{1} << 62, 0}, 2.0));
  CHECK((batched * 2.0).to_vector<double>().empty());
  CHECK(transpose(big).shape() == Shape{0, 3, std::int64_t{1} << 62});
}

TEST_CASE("a plan whose buffers together overflow a 64-bit size is refused when it is built", "[hostile][jit]") {
  // Each intermediate is 2^62 bytes (allowed alone); two live at once overflow the arena's size.
  auto f = jit([](const Tensor& x) {
    const Tensor a = broadcast_to(x, {std::int64_t{1} << 59});
    const Tensor b = exp(a);
    return sum(sin(a) + b);
  });
  CHECK_THAT(outcome_of([&] { f.compile(ones({1})); }),
             Catch::StartsWith("vt::Error: jit") && Catch::Contains("overflows"));
}

TEST_CASE("a jitted function may read its counters while it traces; asking for its own plan raises", "[hostile][jit]") {
  std::function<JitCounters()> read;
  std::function<PlanSummary(const Tensor&)> compile_self;
  JitCounters seen;
  auto f = jit([&](const Tensor& x) {
    seen = read();
    return x * 2.0;
  });
  read = [&] { return f.counters(); };
  require_close(f(ones({2})), {2.0, 2.0});
  CHECK(seen.calls == 1);
  CHECK(seen.traces == 0);  // the trace in progress is counted when it ends
  CHECK(f.counters().traces == 1);

  auto g = jit([&](const Tensor& x) {
    (void)compile_self(x);
    return x;
  });
  compile_self = [&](const Tensor& x) { return g.compile(x); };
  CHECK_THAT(outcome_of([&] { g(ones({2})); }), Catch::StartsWith("vt::Error: jit") && Catch::Contains("compile"));
  // The failed trace left nothing behind: the next call traces again and raises the same way.
  CHECK_THAT(outcome_of([&] { g(ones({2})); }), Catch::Contains("compile"));
}

TEST_CASE("a plan that captured a tracked tensor on another thread still carries its gradient",
          "[hostile][jit][autodiff]") {
  const Tensor p = Tensor::scalar(3.0);
  const Tensor g = grad([&](const Tensor& x) {
    Tensor result;
    std::thread worker([&] { result = jit([&](const Tensor& q) { return sum(q * x); })(p); });
    worker.join();
    return result;
  })(Tensor::scalar(2.0));
  require_close(g, {3.0});
}

TEST_CASE("empty stacks of huge matrices run no kernel", "[hostile][linalg]") {
  const std::int64_t h = std::int64_t{1} << 32;
  const Tensor none = zeros({0, h, h});
  CHECK(cholesky(none).shape() == none.shape());
  CHECK(logdet(none).shape() == Shape{0});
  CHECK(matmul(zeros({0, h, 1}), zeros({0, 1, h})).shape() == Shape{0, h, h});
  CHECK(triangular_solve(none, zeros({0, h, 2}), true, false).shape() == Shape{0, h, 2});
  const Tensor z = full({0, std::int64_t{1} << 62}, 1.0);
  CHECK_THAT(outcome_of([&] {
               concatenate({z, z, z}, 1);
             }),
             Catch::StartsWith("vt::Error: concatenate") && Catch::Contains("overflows"));
  CHECK(slice(zeros({0, h, 4}), 1, h - 1, h).shape() == Shape{0, 1, 4});
  CHECK(reshape(zeros({0}), {std::int64_t{1} << 62, 4, 0}).shape() == Shape{std::int64_t{1} << 62, 4, 0});
}

TEST_CASE("load_npy reads a stream that cannot seek", "[hostile][npy]") {
  const std::string path = fmt::format("/tmp/vtape_fifo_{}.npy", static_cast<long>(::getpid()));
  const std::string file = path + ".src";
  save_npy(file, Tensor::from_vector({1, 2, 3, 4}, {2, 2}));
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << bytes; });
  const Tensor t = load_npy(path);
  writer.join();
  require_close(t, {1, 2, 3, 4});
  std::remove(path.c_str());
  std::remove(file.c_str());
}
