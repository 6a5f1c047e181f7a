// Decompositions: qr (reduced QR) and eigh (symmetric eigendecomposition): values by their defining
// properties and against numpy, gradients against finite differences and numpy's forward-mode
// derivatives, batching, jit, errors.
#include <vtape/core/eigen.hpp>
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "gradcheck.hpp"
#include "threads.hpp"

using namespace vt;
using vt::testing::check_directional;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::Fn;
using vt::testing::on_threads;
using vt::testing::require_close;

namespace {

Tensor load(const std::string& name) { return load_npy(std::string(VTAPE_TEST_DATA) + "/qr_eigh/" + name + ".npy"); }

double max_abs(const Tensor& x) { return max(abs(x)).item(); }

Tensor flat(const Tensor& x) { return reshape(x, {-1}); }

// A symmetric input parametrised by a free matrix, so finite differences see symmetric changes.
Tensor sym(const Tensor& s) { return (s + s.t()) * 0.5; }

// Random matrices [batch..., m, n].
Tensor matrices(Shape batch, std::int64_t m, std::int64_t n, std::uint64_t seed) {
  batch.push_back(m);
  batch.push_back(n);
  return randn(batch, seed);
}

// Q and R as one tensor, so that one check covers both cotangents.
Tensor both(const QR& f) { return concatenate({flat(f.q), flat(f.r)}); }

// Gauge-invariant functions of eigh: the eigenvalues, V diag(c) V^T and V o V (each eigenvector's
// sign drops out; with distinct eigenvalues nothing else is free).
Tensor invariants(const Eigh& e, const Tensor& c) {
  const Tensor v = e.eigenvectors;
  return concatenate({flat(e.eigenvalues), flat(matmul(v * c, v.t())), flat(v * v)});
}

// Q diag(w) Q^T for a fixed random orthogonal Q.
Tensor with_spectrum(const std::vector<double>& w, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(w.size());
  const Tensor q = qr(randn({n, n}, seed)).q;
  const Tensor a = matmul(q * Tensor::from_vector(w, {n}), q.t());
  return sym(a);
}

// splitmix64 of (seed, i, j): tools/reference/make_qr_eigh_reference.py builds the same matrices
// from it, exactly, and stores only their eigenvalues (numpy's, LAPACK syevd).
std::uint64_t hashed(std::uint64_t seed, std::uint64_t i, std::uint64_t j) {
  std::uint64_t z = (seed << 40) + (i << 20) + j + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 512 x 512, symmetric, entries k / 2^23 for 24-bit integers k (exact in float32).
Tensor lapack_random() {
  const std::int64_t n = 512;
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto k = static_cast<std::int64_t>(hashed(1, std::max(i, j), std::min(i, j)) >> 40);
      a[static_cast<std::size_t>(i * n + j)] = std::ldexp(static_cast<double>(k - (std::int64_t{1} << 23)), -23);
    }
  return Tensor::from_vector(a, {n, n});
}

// B B^T, B 300 x 150 of integers in [-8, 8): rank 150, every entry exact in float32.
Tensor lapack_rank_deficient() {
  const std::int64_t n = 300, r = 150;
  std::vector<double> b(static_cast<std::size_t>(n * r)), a(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < r; ++k) b[static_cast<std::size_t>(i * r + k)] = double(hashed(2, i, k) >> 60) - 8;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t k = 0; k < r; ++k)
        a[static_cast<std::size_t>(i * n + j)] +=
            b[static_cast<std::size_t>(i * r + k)] * b[static_cast<std::size_t>(j * r + k)];
  return Tensor::from_vector(a, {n, n});
}

// Ten Wilkinson W21+ matrices (diagonal |10 - i|, off-diagonal 1) glued by 2^-40: eigenvalues in
// clusters of up to ten, tight to ~1e-13. Rows and columns permuted, so the reduction has work to do.
Tensor lapack_glued() {
  const std::int64_t m = 21, copies = 10, n = m * copies;
  std::vector<double> t(static_cast<std::size_t>(n * n), 0.0);
  const auto at = [&](std::int64_t i, std::int64_t j) -> double& { return t[static_cast<std::size_t>(i * n + j)]; };
  for (std::int64_t c = 0; c < copies; ++c) {
    for (std::int64_t i = 0; i < m; ++i) {
      at(c * m + i, c * m + i) = static_cast<double>(std::abs(m / 2 - i));
      if (i + 1 < m) at(c * m + i, c * m + i + 1) = at(c * m + i + 1, c * m + i) = 1.0;
    }
    if (c + 1 < copies) at(c * m + m - 1, c * m + m) = at(c * m + m, c * m + m - 1) = std::ldexp(1.0, -40);
  }
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  std::sort(p.begin(), p.end(), [](std::int64_t i, std::int64_t j) { return hashed(3, i, 0) < hashed(3, j, 0); });
  std::vector<double> a(t.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[static_cast<std::size_t>(i * n + j)] = at(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  return Tensor::from_vector(a, {n, n});
}

double eps_of(DType dtype) {
  return dtype == DType::f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
}

double frobenius(const Tensor& x) { return std::sqrt(sum(square(x.astype(DType::f64))).item()); }

// eigh's errors in units of its dtype's eps, computed in float64: the residual
// ||A V - V diag(w)||_F / ||A||_2 and the loss of orthogonality ||V^T V - I||_F.
struct Accuracy {
  double residual, orthogonality;
};
Accuracy accuracy(const Tensor& a, const Eigh& e) {
  const std::int64_t n = a.shape().back();
  const double eps = eps_of(a.dtype());
  const Tensor a64 = a.astype(DType::f64), v = e.eigenvectors.astype(DType::f64);
  const Tensor w = reshape(e.eigenvalues.astype(DType::f64), {1, n});
  const double norm = std::max(max_abs(w), std::numeric_limits<double>::min());  // ||A||_2
  return {frobenius(matmul(a64, v) - v * w) / (norm * eps), frobenius(matmul(v.t(), v) - eye(n)) / eps};
}

// Bounds in units of eps: float64 n + 8 for the residual and 2 n + 8 for the orthogonality,
// 1.4-2x the largest the kernel reached on 40 seeds of each kind below (LAPACK's syev, the same
// method, reaches the same; the Eigen solver it replaced exceeds the residual's on random
// matrices from n = 128 on). float32 is computed in double and rounded once: sqrt(n) and
// 1.5 sqrt(n), what the rounding of V allows (the Eigen solver exceeds them from n = 3 on).
void check_accuracy(const Tensor& a, const Eigh& e) {
  const Accuracy got = accuracy(a, e);
  const auto n = static_cast<double>(a.shape().back());
  const bool f64 = a.dtype() == DType::f64;
  CHECK(got.residual <= (f64 ? n + 8 : std::sqrt(n)));
  CHECK(got.orthogonality <= (f64 ? 2 * n + 8 : 1.5 * std::sqrt(n)));
}

const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1, 1}, {1, 4},   {4, 1},   {3, 3},  {6, 4},
                                                                   {4, 6}, {40, 17}, {17, 40}, {70, 70}};

}  // namespace

// ---------------------------------------------------------------- qr

TEST_CASE("qr: A = QR, Q^T Q = I, R upper triangular, batched and unbatched", "[qr]") {
  for (const auto& [m, n] : shapes)
    for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2}}) {
      INFO("m = " << m << ", n = " << n << ", batch " << to_string(batch));
      const Tensor a = matrices(batch, m, n, static_cast<std::uint64_t>(m * 100 + n));
      const QR f = qr(a);
      const std::int64_t k = std::min(m, n);
      Shape qs = batch, rs = batch;
      qs.insert(qs.end(), {m, k});
      rs.insert(rs.end(), {k, n});
      CHECK(f.q.shape() == qs);
      CHECK(f.r.shape() == rs);
      CHECK(max_abs(tril(f.r, -1)) == 0.0);
      CHECK(max_abs(matmul(f.q, f.r) - a) <= 1e-13 * std::max(1.0, max_abs(a)) * static_cast<double>(m));
      CHECK(max_abs(matmul(f.q.t(), f.q) - eye(k)) <= 1e-14 * static_cast<double>(m));
    }
}

TEST_CASE("qr agrees with numpy (LAPACK's signs), tall, square and wide", "[qr]") {
  for (const char* name : {"tall", "square", "wide"}) {
    INFO(name);
    const QR f = qr(load(std::string("qr_") + name + "_a"));
    require_close(f.q, load(std::string("qr_") + name + "_q"), 1e-13);
    require_close(f.r, load(std::string("qr_") + name + "_r"), 1e-13);
  }
  // A column already in triangular form is not reflected: R keeps its entry's sign.
  const QR f = qr(Tensor::from_vector({-2, 1, 0, 3}, {2, 2}));
  require_close(f.r, {-2, 1, 0, 3}, 1e-15);
  require_close(f.q, {1, 0, 0, 1}, 1e-15);
}

TEST_CASE("qr gradients of Q and R match finite differences and numpy's forward mode", "[qr][grad]") {
  const Fn f = [](auto& a) { return both(qr(a[0])); };
  for (const auto& [m, n] : shapes) {
    INFO("m = " << m << ", n = " << n);
    const Tensor a = matrices({}, m, n, static_cast<std::uint64_t>(7 * m + n));
    if (m * n <= 36) check_gradients(f, {a}, 1e-6, 1e-8);
    check_directional(f, {a}, 0, 1e-6);
    check_directional(f, {matrices({2}, m, n, static_cast<std::uint64_t>(9 * m + n))}, 0, 1e-6);  // batched
  }
  for (const char* name : {"tall", "square", "wide"}) {
    INFO(name);
    const std::string p = std::string("qr_") + name + "_";
    const Tensor wq = load(p + "wq"), wr = load(p + "wr");
    const Tensor g = grad([&](const Tensor& a) {
      const QR f = qr(a);
      return sum(wq * f.q) + sum(wr * f.r);
    })(load(p + "a"));
    require_close(g, load(p + "grad"), 1e-10);
  }
}

TEST_CASE("qr: gradients of Q alone, R alone, and second derivatives", "[qr][grad]") {
  const Tensor a = matrices({}, 5, 3, 31), w = matrices({}, 5, 3, 32);
  check_gradients([](auto& x) { return qr(x[0]).q; }, {a}, 1e-6, 1e-8);
  check_gradients([](auto& x) { return qr(x[0]).r; }, {a}, 1e-6, 1e-8);
  for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 3}, {3, 5}}) {
    INFO("m = " << m << ", n = " << n);
    const Tensor wq = matrices({}, m, std::min(m, n), 33), wr = matrices({}, std::min(m, n), n, 34);
    auto loss = [=](const Tensor& x) {
      const QR f = qr(x);
      return sum(wq * f.q) + sum(square(f.r) * wr);
    };
    check_gradients([&](auto& x) { return grad(loss)(x[0]); }, {matrices({}, m, n, 35)}, 1e-5, 1e-7);
  }
}

TEST_CASE("qr under vmap, as_batch and jit: one trace for every batch size", "[qr][vmap][jit]") {
  const Tensor w = randn({6, 4}, 40);
  auto loss = [&](const Tensor& a) {
    const QR f = qr(a);
    return sum(w * f.q) + sum(f.r * f.r * 0.5);
  };
  auto step = jit(vmap(value_and_grad(loss)));
  for (std::int64_t b : {1, 3, 8}) {
    INFO("B = " << b);
    const Tensor x = randn({b, 6, 4}, 41 + static_cast<std::uint64_t>(b));
    const auto [values, grads] = step(as_batch(x));
    const Tensor q = unbatch(vmap([](const Tensor& a) { return qr(a).q; })(x));
    const Tensor r = unbatch(qr(as_batch(x)).r);
    for (std::int64_t i = 0; i < b; ++i) {
      const Tensor xi = reshape(slice(x, 0, i, i + 1), {6, 4});
      const auto [v, g] = value_and_grad(loss)(xi);
      CHECK(values.to_vector<double>()[static_cast<std::size_t>(i)] == Approx(v.item()).epsilon(1e-12));
      require_close(reshape(slice(unbatch(grads), 0, i, i + 1), {6, 4}), g, 1e-12);
      require_close(reshape(slice(q, 0, i, i + 1), {6, 4}), qr(xi).q, 1e-14);
      require_close(reshape(slice(r, 0, i, i + 1), {4, 4}), qr(xi).r, 1e-14);
    }
  }
  CHECK(step.counters().traces == 1);
  CHECK(step.counters().cache_hits == 2);
}

TEST_CASE("qr in float32", "[qr]") {
  const Tensor a = matrices({2}, 7, 5, 50);
  const QR f = qr(a.astype(DType::f32)), d = qr(a);
  CHECK(f.q.dtype() == DType::f32);
  require_close(f.q, d.q, 1e-5);
  require_close(f.r, d.r, 1e-5);
}

TEST_CASE("qr errors name the op, the shape and the failing matrix", "[qr][errors]") {
  CHECK_THAT(error_of([] { qr(ones({3})); }), Catch::Contains("qr") && Catch::Contains("[3]"));
  std::vector<double> v = matrices({3}, 4, 3, 60).to_vector<double>();
  v[12 + 5] = std::numeric_limits<double>::quiet_NaN();  // matrix 1
  const Tensor bad = Tensor::from_vector(v, {3, 4, 3});
  CHECK_THAT(error_of([&] { qr(bad); }),
             Catch::Contains("qr: matrix 1 of the batch [3] (4 x 3)") && Catch::Contains("non-finite"));
  CHECK_THAT(error_of([&] { vmap([](const Tensor& a) { return qr(a).q; })(bad); }),
             Catch::Contains("qr: example 1 of the batch of 3 (4 x 3)"));
  auto jitted = jit([](const Tensor& a) { return qr(a).r; });
  CHECK_THAT(error_of([&] { jitted(as_batch(bad)); }), Catch::Contains("example 1 of the batch of 3"));
  v[12 + 5] = std::numeric_limits<double>::infinity();
  CHECK_THAT(error_of([&] {
               qr(reshape(Tensor::from_vector(v, {3, 4, 3}), {3, 1, 4, 3}));
             }),
             Catch::Contains("matrix [1, 0] of the batch [3, 1]"));
}

// ---------------------------------------------------------------- eigh

TEST_CASE("eigh: A V = V diag(w), V^T V = I, ascending w, batched and unbatched", "[eigh]") {
  for (std::int64_t n : {1, 2, 5, 31, 32, 33, 70})
    for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2}}) {
      INFO("n = " << n << ", batch " << to_string(batch));
      const Tensor a = sym(matrices(batch, n, n, static_cast<std::uint64_t>(n)));
      const Eigh e = eigh(a);
      Shape ws = batch;
      ws.push_back(n);
      CHECK(e.eigenvalues.shape() == ws);
      CHECK(e.eigenvectors.shape() == a.shape());
      const Tensor v = e.eigenvectors;
      Shape row = batch;
      row.insert(row.end(), {1, n});
      const double scale = std::max(1.0, max_abs(a)) * static_cast<double>(n);
      CHECK(max_abs(matmul(a, v) - v * reshape(e.eigenvalues, row)) <= 1e-14 * scale);
      CHECK(max_abs(matmul(v.t(), v) - eye(n)) <= 1e-14 * static_cast<double>(n));
      if (n > 1) CHECK(-max(neg(slice(e.eigenvalues, -1, 1, n) - slice(e.eigenvalues, -1, 0, n - 1))).item() >= 0.0);
    }
}

TEST_CASE("eigh reads only the lower triangle and agrees with numpy", "[eigh]") {
  const Tensor a = load("eigh_a");  // unrelated values above the diagonal
  const Eigh e = eigh(a);
  require_close(e.eigenvalues, load("eigh_w"), 1e-13);
  // numpy's eigenvectors with each sign fixed by its largest entry; the same here.
  const Tensor v = e.eigenvectors;
  const Tensor largest = max(abs(v), {0}, true);
  const Tensor signs = sign(sum(v * equal(abs(v), largest), {0}, true));
  require_close(v * signs, load("eigh_v"), 1e-12);
  const Eigh from_lower = eigh(tril(a) + tril(a, -1).t());
  require_close(from_lower.eigenvalues, e.eigenvalues, 0.0);
  // A closed form: the eigenvalues of [[2, 1], [1, 2]] are 1 and 3.
  require_close(eigh(Tensor::from_vector({2, 1e300, 1, 2}, {2, 2})).eigenvalues, {1, 3}, 1e-15);
}

TEST_CASE("eigh gradients of gauge-invariant functions match finite differences and numpy", "[eigh][grad]") {
  for (std::int64_t n : {1, 2, 5, 33}) {
    INFO("n = " << n);
    const Tensor c = randn({n}, 70);
    const Fn f = [&](auto& a) { return invariants(eigh(sym(a[0])), c); };
    const Tensor a = matrices({}, n, n, 71 + static_cast<std::uint64_t>(n));
    if (n <= 5) check_gradients(f, {a}, 1e-6, 1e-8);
    check_directional(f, {a}, 0, 1e-6);
    check_directional(f, {matrices({2}, n, n, 72)}, 0, 1e-6);  // batched
  }
  const Tensor c = load("eigh_c"), W = load("eigh_W"), u = load("eigh_u"), Z = load("eigh_Z");
  const Tensor g = grad([&](const Tensor& a) {
    const Eigh e = eigh(a);
    const Tensor v = e.eigenvectors;
    return sum(W * matmul(v * c, v.t())) + sum(u * e.eigenvalues) + sum(Z * v * v);
  })(load("eigh_a"));
  require_close(g, load("eigh_grad"), 1e-10);
  CHECK(max_abs(g - g.t()) <= 1e-14);  // the gradient with respect to a symmetric input is symmetric
}

TEST_CASE("eigh at a repeated eigenvalue: gauge-invariant gradients are finite and match", "[eigh][grad]") {
  // Eigenvalue 2 twice: any basis of its eigenspace may come back, and the 1 / (w_j - w_i) terms
  // within it are dropped. Functions that do not see that basis are differentiable there.
  const Tensor a = with_spectrum({1, 2, 2, 3.5}, 80);
  const Tensor c = Tensor::from_vector({0.5, -1, -1, 2}, {4});  // equal on the repeated pair
  const std::vector<std::pair<const char*, Fn>> functions = {
      {"symmetric in the eigenvalues", [](auto& x) { return sum(exp(eigh(sym(x[0])).eigenvalues)); }},
      {"eigenvalues' sum of squares", [](auto& x) { return sum(square(eigh(sym(x[0])).eigenvalues)); }},
      {"projector",
       [&](auto& x) {
         const Tensor v = eigh(sym(x[0])).eigenvectors;
         return matmul(v * c, v.t());
       }},
      {"projector onto the repeated eigenspace",
       [](auto& x) {
         const Tensor v = slice(eigh(sym(x[0])).eigenvectors, -1, 1, 3);
         return matmul(v, v.t());
       }},
  };
  for (const auto& [name, f] : functions) {
    INFO(name);
    const Tensor g = grad([&](const Tensor& x) { return vt::testing::weighted(f({x})); })(a);
    for (double x : g.to_vector<double>()) CHECK(std::isfinite(x));
    check_gradients(f, {a}, 1e-5, 1e-7);
  }
  // Close but distinct eigenvalues (gap 1e-4, far above the tolerance): all terms kept, and even
  // the eigenvectors' squares have the (large) gradient finite differences see.
  const Tensor close = with_spectrum({1, 2, 2.0001, 3.5}, 81);
  check_directional([](auto& x) { return square(eigh(sym(x[0])).eigenvectors); }, {close}, 0, 1e-4, false, 3, 1e-9);
}

TEST_CASE("eigh: second derivatives", "[eigh][grad]") {
  const Tensor c = randn({4}, 90), w = randn({4, 4}, 91);
  auto loss = [&](const Tensor& x) {
    const Eigh e = eigh(sym(x));
    return sum(w * matmul(e.eigenvectors * c, e.eigenvectors.t())) + sum(square(e.eigenvalues));
  };
  check_gradients([&](auto& x) { return grad(loss)(x[0]); }, {randn({4, 4}, 92)}, 1e-5, 1e-7);
}

TEST_CASE("eigh under vmap, as_batch and jit: one trace for every batch size", "[eigh][vmap][jit]") {
  const Tensor c = randn({5}, 100);
  auto loss = [&](const Tensor& a) {
    const Eigh e = eigh(a);
    return sum(matmul(e.eigenvectors * c, e.eigenvectors.t())) + sum(exp(e.eigenvalues));
  };
  auto step = jit(vmap(value_and_grad(loss)));
  for (std::int64_t b : {1, 4, 9}) {
    INFO("B = " << b);
    const Tensor x = sym(randn({b, 5, 5}, 101 + static_cast<std::uint64_t>(b)));
    const auto [values, grads] = step(as_batch(x));
    const Tensor w = unbatch(vmap([](const Tensor& a) { return eigh(a).eigenvalues; })(x));
    const Tensor direct = unbatch(eigh(as_batch(x)).eigenvalues);
    for (std::int64_t i = 0; i < b; ++i) {
      const Tensor xi = reshape(slice(x, 0, i, i + 1), {5, 5});
      const auto [v, g] = value_and_grad(loss)(xi);
      CHECK(values.to_vector<double>()[static_cast<std::size_t>(i)] == Approx(v.item()).epsilon(1e-12));
      require_close(reshape(slice(unbatch(grads), 0, i, i + 1), {5, 5}), g, 1e-11);
      require_close(reshape(slice(w, 0, i, i + 1), {5}), eigh(xi).eigenvalues, 1e-14);
      require_close(reshape(slice(direct, 0, i, i + 1), {5}), eigh(xi).eigenvalues, 1e-14);
    }
  }
  CHECK(step.counters().traces == 1);
  CHECK(step.counters().cache_hits == 2);
}

TEST_CASE("eigh in float32", "[eigh]") {
  const Tensor a = sym(matrices({2}, 6, 6, 110));
  const Eigh f = eigh(a.astype(DType::f32)), d = eigh(a);
  CHECK(f.eigenvalues.dtype() == DType::f32);
  require_close(f.eigenvalues, d.eigenvalues, 1e-5);
  const auto projector = [](const Eigh& e) { return e.eigenvectors * e.eigenvectors; };
  require_close(projector(f), projector(d), 1e-4);
}

TEST_CASE("eigh: residual and orthogonality within a small multiple of n eps, float64 and float32", "[eigh]") {
  const auto half = [](std::int64_t n) { return std::max<std::int64_t>(1, n / 2); };
  const std::vector<std::pair<const char*, std::function<Tensor(std::int64_t, std::uint64_t)>>> kinds = {
      {"random",
       [](std::int64_t n, std::uint64_t seed) {
         return sym(randn({n, n}, seed));
       }},
      {"rank-deficient B B^T, B n x n/2",
       [&](std::int64_t n, std::uint64_t seed) {
         const Tensor b = randn({n, half(n)}, seed);
         return matmul(b, b.t());
       }},
      {"half the eigenvalues within 1e-9 of 1",
       [&](std::int64_t n, std::uint64_t seed) {
         std::vector<double> w = randn({n}, seed + 1).to_vector<double>();
         for (std::int64_t i = 0; i < half(n); ++i)
           w[static_cast<std::size_t>(i)] = 1 + 1e-9 * w[static_cast<std::size_t>(i)];
         return with_spectrum(w, seed);
       }},
  };
  for (const auto& [kind, make] : kinds)
    for (std::int64_t n : {1, 2, 3, 4, 5, 10, 33, 64, 128, 512})
      for (DType dtype : {DType::f64, DType::f32}) {
        INFO(kind << ", n = " << n << ", " << name_of(dtype));
        const Tensor a = make(n, 200 + static_cast<std::uint64_t>(n)).astype(dtype);
        const Eigh e = eigh(a);
        check_accuracy(a, e);
        const std::vector<double> w = e.eigenvalues.to_vector<double>();
        CHECK(std::is_sorted(w.begin(), w.end()));
      }
}

TEST_CASE("eigh's eigenvalues agree with LAPACK's within JAX's bound, float64 and float32", "[eigh]") {
  // JAX's testEigh: |w - w_lapack| <= 8 eps (||A||_F + |w_lapack|), w_lapack numpy's in float64 of
  // the same (here exact) matrix. The Eigen solver this kernel replaced fails it on the first two.
  const std::vector<std::pair<const char*, Tensor>> cases = {
      {"random", lapack_random()}, {"rankdef", lapack_rank_deficient()}, {"glued", lapack_glued()}};
  for (const auto& [name, a] : cases)
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(name << ", " << name_of(dtype));
      const Tensor reference = load(std::string("eigh_lapack_") + name + "_w");
      const Eigh e = eigh(a.astype(dtype));
      // The largest |w - w_lapack| / (eps (||A||_F + |w_lapack|)), to be at most 8.
      const double eps = eps_of(dtype);
      const Tensor error = abs(e.eigenvalues.astype(DType::f64) - reference) / ((abs(reference) + frobenius(a)) * eps);
      CHECK(max_abs(error) <= 8);
      check_accuracy(a.astype(dtype), e);
    }
}

TEST_CASE("eigh of special matrices: identity, zero, diagonal, scaled by powers of two", "[eigh]") {
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(name_of(dtype));
    for (std::int64_t n : {1, 4, 50}) {
      // Nothing to reduce and nothing to iterate: exactly I (JAX's testEighIdentity asks eps).
      const Eigh identity = eigh(eye(n, dtype));
      CHECK(max_abs(identity.eigenvectors - eye(n, dtype)) == 0.0);
      CHECK(max_abs(identity.eigenvalues - 1.0) == 0.0);
      const Eigh zero = eigh(zeros({n, n}, dtype));
      CHECK(max_abs(zero.eigenvectors - eye(n, dtype)) == 0.0);
      CHECK(max_abs(zero.eigenvalues) == 0.0);
    }
    // A diagonal matrix: its entries sorted, and a permutation.
    const Eigh d = eigh(diag(Tensor::from_vector({3, -1, 2, -0.125}, {4}, dtype)));
    require_close(d.eigenvalues, {-1, -0.125, 2, 3}, 0.0);
    require_close(d.eigenvectors, {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0}, 0.0);
    // JAX's testEighZeroDiagonal: ||A V - V W||_F <= 2 eps ||A||_F.
    const Tensor z = Tensor::from_vector({0, -1, -1, 1, -1, 0, 1, -1, -1, 1, 0, -1, 1, -1, -1, 0}, {4, 4}, dtype);
    const Eigh ez = eigh(z);
    CHECK(accuracy(z, ez).residual * max_abs(ez.eigenvalues) <= 2 * frobenius(z));
    // The input is scaled by a power of two before the reduction, exactly: 2^k A gives 2^k w and the
    // same V, bit for bit, as far as the dtype's range allows (eps A included: JAX's testEighTinyNorm).
    const Tensor a = sym(randn({30, 30}, 300)).astype(dtype);
    const Eigh e = eigh(a);
    for (int k : dtype == DType::f64 ? std::vector<int>{-1000, -52, 7, 1000} : std::vector<int>{-100, -23, 7, 100}) {
      INFO("2^" << k);
      const double scale = std::ldexp(1.0, k);
      const Eigh scaled = eigh(a * scale);
      CHECK(scaled.eigenvalues.to_vector<double>() == (e.eigenvalues * scale).to_vector<double>());
      CHECK(scaled.eigenvectors.to_vector<double>() == e.eigenvectors.to_vector<double>());
    }
  }
}

TEST_CASE("eigh: the same bits on one, two and three threads", "[eigh][threads]") {
  // Each matrix on one thread (a single one included: Eigen's threaded products are not used).
  for (DType dtype : {DType::f64, DType::f32})
    for (const Shape& shape : {Shape{300, 300}, Shape{7, 40, 40}}) {
      INFO(name_of(dtype) << ", " << to_string(shape));
      const Tensor a = sym(randn(shape, 310)).astype(dtype);
      const auto run = [&](int threads) {
        return on_threads(threads, [&] {
          const Eigh e = eigh(a);
          return std::pair{e.eigenvalues.to_vector<double>(), e.eigenvectors.to_vector<double>()};
        });
      };
      const auto one = run(1);
      CHECK(run(2) == one);
      CHECK(run(3) == one);
    }
}

TEST_CASE("eigh errors name the op, the shape and the failing matrix", "[eigh][errors]") {
  CHECK_THAT(error_of([] { eigh(ones({2, 3})); }), Catch::Contains("eigh") && Catch::Contains("[2, 3]"));
  CHECK_THAT(error_of([] { eigh(ones({3})); }), Catch::Contains("eigh") && Catch::Contains("square"));
  std::vector<double> v = sym(matrices({3}, 4, 4, 120)).to_vector<double>();
  v[2 * 16 + 3 * 4 + 1] = std::numeric_limits<double>::quiet_NaN();  // matrix 2, lower triangle
  v[0 * 16 + 0 * 4 + 3] = std::numeric_limits<double>::infinity();   // matrix 0, upper: not read
  const Tensor bad = Tensor::from_vector(v, {3, 4, 4});
  CHECK_THAT(error_of([&] { eigh(bad); }),
             Catch::Contains("eigh: matrix 2 of the batch [3] (4 x 4)") && Catch::Contains("non-finite"));
  CHECK_THAT(error_of([&] { vmap([](const Tensor& a) { return eigh(a).eigenvalues; })(bad); }),
             Catch::Contains("eigh: example 2 of the batch of 3 (4 x 4)"));
  auto jitted = jit([](const Tensor& a) { return eigh(a).eigenvectors; });
  CHECK_THAT(error_of([&] { jitted(as_batch(bad)); }), Catch::Contains("example 2 of the batch of 3"));
  // Only the lower triangle is read: an Inf above the diagonal is no error.
  const Tensor first = reshape(slice(bad, 0, 0, 1), {4, 4});
  for (double x : eigh(first).eigenvalues.to_vector<double>()) CHECK(std::isfinite(x));
}

TEST_CASE("qr and eigh: one op over the whole batch, and empty matrices", "[qr][eigh]") {
  const Tensor x = as_batch(sym(randn({6, 2, 4, 4}, 130)));
  OpCounter counter;
  const QR f = qr(x);
  const Eigh e = eigh(x);
  CHECK(counter.forward("qr") == 1);
  CHECK(counter.forward("eigh") == 1);
  CHECK(f.q.batch_size() == 6);
  CHECK(e.eigenvectors.shape() == Shape{2, 4, 4});
  const QR tall = qr(zeros({3, 0})), wide = qr(zeros({0, 3}));
  CHECK(tall.q.shape() == Shape{3, 0});
  CHECK(tall.r.shape() == Shape{0, 0});
  CHECK(wide.q.shape() == Shape{0, 0});
  CHECK(wide.r.shape() == Shape{0, 3});
  CHECK(eigh(zeros({2, 0, 0})).eigenvalues.shape() == Shape{2, 0});
}

TEST_CASE("qr and eigh of empty matrices: gradients of the input's shape", "[qr][eigh][grad]") {
  auto qr_loss = [](const Tensor& x) { return sum(qr(x).q) + sum(qr(x).r); };
  auto eigh_loss = [](const Tensor& x) { return sum(eigh(x).eigenvalues) + sum(eigh(x).eigenvectors); };
  for (const Shape& shape : {Shape{3, 0}, Shape{0, 3}, Shape{0, 0}, Shape{2, 0, 4}}) {
    INFO("qr of " << to_string(shape));
    const Tensor g = grad(qr_loss)(zeros(shape));
    CHECK(g.shape() == shape);
    Shape batched = shape;
    batched.insert(batched.begin(), 2);
    const Tensor gb = grad(qr_loss)(as_batch(zeros(batched)));
    CHECK(gb.is_batched());
    CHECK(gb.shape() == shape);
  }
  for (const Shape& shape : {Shape{0, 0}, Shape{2, 0, 0}}) {
    INFO("eigh of " << to_string(shape));
    const Tensor g = grad(eigh_loss)(zeros(shape));
    CHECK(g.shape() == shape);
    const Tensor gb = grad(eigh_loss)(as_batch(zeros({3, 0, 0})));
    CHECK(gb.is_batched());
    CHECK(gb.shape() == Shape{0, 0});
  }
  // A loss that also reads a non-empty input: the empty factorization adds nothing to its gradient.
  const Tensor y = randn({3}, 150);
  auto loss = [](const Tensor& v) { return sum(v * v) + sum(eigh(zeros({0, 0}) * sum(v)).eigenvalues); };
  const Tensor gy = grad(loss)(y);
  require_close(gy, y * 2.0, 1e-15);
}

TEST_CASE("per-example gradients with respect to a matrix shared by the batch", "[qr][eigh][vmap]") {
  // The decomposition is unbatched and its cotangent batched: the adjoints broadcast.
  const Tensor a = randn({5, 3}, 140), s = sym(randn({4, 4}, 141));
  const Tensor p = randn({3, 5, 3}, 142), c = randn({3, 4}, 143);
  auto qr_loss = [](const Tensor& x, const Tensor& w) { return sum(qr(x).q * w) + sum(qr(x).r); };
  auto eigh_loss = [](const Tensor& x, const Tensor& w) {
    const Eigh e = eigh(x);
    return sum(matmul(e.eigenvectors * w, e.eigenvectors.t())) + sum(e.eigenvalues * w);
  };
  const Tensor gq = unbatch(vmap(grad(qr_loss), {not_mapped, 0})(a, p));
  const Tensor ge = unbatch(vmap(grad(eigh_loss), {not_mapped, 0})(s, c));
  for (std::int64_t i = 0; i < 3; ++i) {
    INFO("example " << i);
    require_close(reshape(slice(gq, 0, i, i + 1), {5, 3}), grad(qr_loss)(a, reshape(slice(p, 0, i, i + 1), {5, 3})),
                  1e-12);
    require_close(reshape(slice(ge, 0, i, i + 1), {4, 4}), grad(eigh_loss)(s, reshape(slice(c, 0, i, i + 1), {4})),
                  1e-12);
  }
}
