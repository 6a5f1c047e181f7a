// Linear algebra: cholesky, triangular_solve, cho_factor/cho_solve, logdet, solve.
#include <vtape/core/eigen.hpp>

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "forwarding_backend.hpp"
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

// Both sides of Eigen's blocking thresholds (unblocked below 32, blocks of up to 128).
const std::vector<std::int64_t> sizes = {1, 2, 17, 31, 32, 33, 64, 130};

// Well-conditioned SPD matrices: X X^T / n + I, with leading batch axes.
Tensor spd(Shape batch, std::int64_t n, std::uint64_t seed) {
  batch.push_back(n);
  batch.push_back(n);
  const Tensor x = randn(batch, seed);
  return matmul(x, swapaxes(x, -1, -2)) / static_cast<double>(n) + eye(n);
}

// A symmetric input parametrised by a free matrix, so finite differences see symmetric changes.
Tensor sym(const Tensor& s) { return (s + swapaxes(s, -1, -2)) * 0.5; }

// SPD with condition number 1e8: Q diag(logspace(0, -8)) Q^T.
Tensor ill_conditioned(std::int64_t n) {
  Eigen::MatrixXd r = randn({n, n}, 77).as_eigen<double>();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(r);
  const Eigen::MatrixXd q = qr.householderQ();
  Eigen::VectorXd d(n);
  for (std::int64_t i = 0; i < n; ++i)
    d(i) = std::pow(10.0, -8.0 * static_cast<double>(i) / static_cast<double>(n - 1));
  const Eigen::MatrixXd a = q * d.asDiagonal() * q.transpose();
  return Tensor::from_eigen(Eigen::MatrixXd(0.5 * (a + a.transpose())));
}

double max_abs(const Tensor& x) { return max(abs(x)).item(); }

Tensor load(const std::string& name) { return load_npy(std::string(VTAPE_TEST_DATA) + "/linalg/" + name + ".npy"); }

}  // namespace

TEST_CASE("cholesky: L is lower triangular and L L^T = A, batched and unbatched", "[linalg][cholesky]") {
  for (std::int64_t n : sizes)
    for (const Shape& batch : {Shape{}, Shape{3}, Shape{2, 2}}) {
      INFO("n = " << n << ", batch " << to_string(batch));
      const Tensor a = spd(batch, n, static_cast<std::uint64_t>(n));
      const Tensor l = cholesky(a);
      CHECK(l.shape() == a.shape());
      CHECK(max_abs(triu(l, 1)) == 0.0);
      CHECK(max_abs(matmul(l, swapaxes(l, -1, -2)) - a) <= 1e-12 * max_abs(a));
      CHECK(-max(neg(diagonal(l))).item() > 0.0);
    }
}

TEST_CASE("cholesky agrees with Eigen's LLT and with scipy", "[linalg][cholesky]") {
  const Tensor a = spd({}, 33, 5);
  const Eigen::MatrixXd l = Eigen::LLT<Eigen::MatrixXd>(a.as_eigen<double>()).matrixL();
  require_close(cholesky(a), Tensor::from_eigen(l), 1e-12);
  require_close(cholesky(load("A")), load("L"), 1e-12);
}

TEST_CASE("cholesky gradients match finite differences and a forward-mode reference", "[linalg][cholesky][grad]") {
  const Fn f = [](auto& a) { return cholesky(sym(a[0])); };
  for (std::int64_t n : sizes) {
    INFO("n = " << n);
    const Tensor a = spd({}, n, 10 + static_cast<std::uint64_t>(n));
    if (n <= 17) check_gradients(f, {a}, 1e-5, 1e-7);
    check_directional(f, {a}, 0, 1e-6);
    check_directional(f, {spd({2}, n, 20 + static_cast<std::uint64_t>(n))}, 0, 1e-6);  // batched
  }
  const Tensor g = grad([](const Tensor& a) { return sum(load("W") * cholesky(a)); })(load("A"));
  require_close(g, load("grad_chol"), 1e-10);
  CHECK(max_abs(g - g.t()) <= 1e-14);  // the gradient with respect to a symmetric input is symmetric
}

TEST_CASE("triangular_solve: identities for every side, triangle and transpose", "[linalg][triangular_solve]") {
  for (std::int64_t n : {1L, 5L, 33L}) {
    const Tensor t = randn({n, n}, 3) + eye(n) * static_cast<double>(2 * n);
    const Tensor b = randn({n, 4}, 4), v = randn({n}, 5), br = randn({4, n}, 6);
    for (bool lower : {true, false})
      for (bool trans : {false, true}) {
        INFO("n = " << n << " lower " << lower << " transpose " << trans);
        const Tensor tri = lower ? tril(t) : triu(t);
        const Tensor op = trans ? tri.t() : tri;
        CHECK(max_abs(matmul(op, triangular_solve(t, b, lower, trans)) - b) <= 1e-12);
        CHECK(max_abs(matmul(op, triangular_solve(t, v, lower, trans)) - v) <= 1e-12);
        CHECK(max_abs(matmul(triangular_solve(t, br, lower, trans, /*left=*/false), op) - br) <= 1e-12);
      }
  }
  require_close(triangular_solve(load("L"), load("B"), true, true), load("T_solve"), 1e-12);
}

TEST_CASE("triangular_solve gradients match finite differences", "[linalg][triangular_solve][grad]") {
  for (std::int64_t n : sizes) {
    INFO("n = " << n);
    const Tensor t = randn({n, n}, 7) * 0.3 + eye(n) * 2.0;
    for (std::int64_t cols : {1L, 3L}) {
      const Tensor b = randn({2, n, cols}, 8);  // batched right-hand sides against one matrix
      for (bool lower : {true, false})
        for (bool trans : {false, true}) {
          const Fn f = [=](auto& a) { return triangular_solve(a[0], a[1], lower, trans); };
          if (n <= 17) check_gradients(f, {t, b}, 1e-5, 1e-7);
          check_directional(f, {t, b}, 0, 1e-6);
          check_directional(f, {t, b}, 1, 1e-6);
        }
    }
    const Fn vec = [](auto& a) { return triangular_solve(a[0], a[1]); };
    check_directional(vec, {t, randn({n}, 9)}, 0, 1e-6);
    const Fn right = [](auto& a) { return triangular_solve(a[0], a[1], true, false, false); };
    check_directional(right, {t, randn({3, n}, 9)}, 0, 1e-6);
  }
}

TEST_CASE("cho_solve and solve: A x = b for vector and matrix right-hand sides", "[linalg][cho_solve]") {
  for (std::int64_t n : sizes) {
    INFO("n = " << n);
    const Tensor a = spd({3}, n, 30 + static_cast<std::uint64_t>(n));
    const CholeskyFactor f = cho_factor(a);
    const Tensor b = randn({3, n, 2}, 31);
    CHECK(max_abs(matmul(a, cho_solve(f, b)) - b) <= 1e-10);
    const Tensor v = randn({n}, 32);  // one vector against every matrix of the batch
    const Tensor x = cho_solve(f, v);
    CHECK(x.shape() == Shape{3, n});
    CHECK(max_abs(matmul(a, reshape(x, {3, n, 1})) - reshape(v, {n, 1})) <= 1e-10);
    CHECK(max_abs(solve(a, b) - cho_solve(f, b)) == 0.0);
  }
  const CholeskyFactor f = cho_factor(load("A"));
  require_close(cho_solve(f, load("b")), load("x"), 1e-12);
  require_close(cho_solve(f, load("B")), load("XB"), 1e-12);
}

TEST_CASE("cho_solve gradients match finite differences and closed forms", "[linalg][cho_solve][grad]") {
  for (std::int64_t n : sizes) {
    INFO("n = " << n);
    for (std::int64_t cols : {0L, 1L, 4L}) {  // 0: a vector right-hand side
      const Tensor a = spd({2}, n, 40 + static_cast<std::uint64_t>(n));
      const Tensor b = cols == 0 ? randn({n}, 41) : randn({2, n, cols}, 41);
      const Fn f = [](auto& x) { return cho_solve(cho_factor(sym(x[0])), x[1]); };
      if (n <= 17) check_gradients(f, {a, b}, 1e-5, 1e-7);
      check_directional(f, {a, b}, 0, 1e-6);
      check_directional(f, {a, b}, 1, 1e-6);
      check_directional([](auto& x) { return solve(sym(x[0]), x[1]); }, {a, b}, 0, 1e-6);
    }
  }
  const auto g = grad([](const Tensor& a, const Tensor& b) { return sum(load("w") * cho_solve(cho_factor(a), b)); },
                      {0, 1})(load("A"), load("b"));
  require_close(g[0], load("grad_solve_A"), 1e-12);
  require_close(g[1], load("grad_solve_b"), 1e-12);
}

TEST_CASE("logdet: values and gradients", "[linalg][logdet][grad]") {
  for (std::int64_t n : sizes) {
    INFO("n = " << n);
    const Tensor a = spd({3}, n, 50 + static_cast<std::uint64_t>(n));
    const Tensor ld = logdet(a);
    CHECK(ld.shape() == Shape{3});
    for (std::int64_t i = 0; i < 3; ++i) {
      const Eigen::MatrixXd ai = reshape(slice(a, 0, i, i + 1), {n, n}).as_eigen<double>();
      const Eigen::VectorXd eig = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(ai).eigenvalues();
      CHECK(ld.to_vector<double>()[static_cast<std::size_t>(i)] == Approx(eig.array().log().sum()).epsilon(1e-12));
    }
    const Fn f = [](auto& x) { return logdet(sym(x[0])); };
    if (n <= 17) check_gradients(f, {a}, 1e-5, 1e-7);
    check_directional(f, {a}, 0, 1e-6);
  }
  CHECK(logdet(load("A")).item() == Approx(load("logdet").item()).epsilon(1e-13));
  require_close(grad([](const Tensor& a) { return logdet(a); })(load("A")), load("grad_logdet"), 1e-12);
}

TEST_CASE("ill-conditioned matrices (condition number 1e8)", "[linalg][cholesky][cho_solve][logdet]") {
  // Tolerances: the factorization is backward stable, so L L^T = A and A x = b hold to about
  // n eps |A| |x| whatever the conditioning. A finite difference of f itself carries a relative
  // error near cond(A) eps = 1e-8 divided by the step, so gradients are checked along directions
  // to 1e-3 of the gradient's scale instead of 1e-6.
  const std::int64_t n = 40;
  const Tensor a = ill_conditioned(n);
  const Tensor l = cholesky(a);
  CHECK(max_abs(matmul(l, l.t()) - a) <= 1e-14);
  const Tensor b = randn({n}, 60);
  const Tensor x = solve(a, b);
  CHECK(max_abs(matmul(a, x) - b) <= 1e-6 * max_abs(x) * 1e-8 * 100);
  check_directional([](auto& v) { return logdet(sym(v[0])); }, {a}, 0, 1e-3, false, 3, 1e-11);
  check_directional([&](auto& v) { return cho_solve(cho_factor(sym(v[0])), b); }, {a}, 0, 1e-3, false, 3, 1e-15);
  check_directional([](auto& v) { return cholesky(sym(v[0])); }, {a}, 0, 1e-3, false, 3, 1e-12);
}

TEST_CASE("a factor used only in solves and logdet never runs the Cholesky adjoint", "[linalg][cho_solve][logdet]") {
  const Tensor F = randn({20, 6}, 70), y = randn({20}, 71);
  auto nll = [&](const Tensor& p) {
    const Tensor a = matmul(F * square(p), F.t()) + eye(20);
    const CholeskyFactor f = cho_factor(a);
    return 0.5 * (sum(y * cho_solve(f, y)) + logdet(f));
  };
  const Tensor p = rand({6}, 72) + 0.5;
  {
    OpCounter ops;
    const Tensor g = grad(nll)(p);
    CHECK(ops.forward("cho_factor") == 1);
    CHECK(ops.adjoint("cho_factor") == 0);
    CHECK(ops.adjoint("cholesky") == 0);
    CHECK(ops.forward("triangular_solve") == 0);
    CHECK(ops.adjoint("cho_solve") == 1);
    CHECK(ops.adjoint("logdet") == 1);
  }
  check_gradients([&](auto& v) { return nll(v[0]); }, {p}, 1e-6, 1e-8);
  {
    // Control: a loss that uses L itself does run the Cholesky adjoint.
    OpCounter ops;
    grad([&](const Tensor& q) { return sum(cho_factor(matmul(F * square(q), F.t()) + eye(20)).l); })(p);
    CHECK(ops.adjoint("cho_factor") == 1);
  }
}

TEST_CASE("not positive definite: the error names the op, the batch index and the minor", "[linalg][cholesky]") {
  Tensor a = stack({eye(4), eye(4), eye(4) - diag(Tensor::from_vector({0, 0, 2, 0}, {4})), eye(4)});
  try {
    cholesky(a);
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 2);
    CHECK(e.minor == 3);
    CHECK_THAT(std::string(e.what()), Catch::Contains("cholesky") && Catch::Contains("matrix 2 of the batch [4]") &&
                                          Catch::Contains("order 3"));
  }
  CHECK_THAT(error_of([&] { cho_factor(a); }), Catch::Contains("cho_factor") && Catch::Contains("matrix 2"));
  CHECK_THAT(error_of([&] { solve(a, ones({4})); }), Catch::Contains("cho_factor"));
  CHECK_THAT(error_of([&] { logdet(a); }), Catch::Contains("cho_factor"));
  CHECK_THAT(error_of([] {
               cholesky(Tensor::from_vector({1, 2, 2, 1}, {2, 2}));
             }),
             Catch::Contains("the matrix (2 x 2)") && Catch::Contains("order 2"));
}

TEST_CASE("cholesky_checked reports per-example status instead of raising", "[linalg][cholesky]") {
  const Tensor bad = eye(4) - diag(Tensor::from_vector({0, 0, 2, 0}, {4}));
  const Tensor good = spd({}, 4, 80);
  const CheckedCholesky c = cholesky_checked(stack({good, bad, good}));
  require_close(c.info, {0, 3, 0});
  require_close(slice(c.l, 0, 0, 1), reshape(cholesky(good), {1, 4, 4}), 1e-14);
  const std::vector<double> failed = slice(c.l, 0, 1, 2).to_vector<double>();
  for (std::size_t j = 0; j < 16; ++j) CHECK(std::isnan(failed[j]) == (j >= 8));  // NaN from row 2 on
}

TEST_CASE("NaN or Inf input is reported as a failure at the first leading minor containing it", "[linalg][cholesky]") {
  std::vector<double> v(16, 0.0);
  for (int i = 0; i < 4; ++i) v[static_cast<std::size_t>(i * 5)] = 2.0;
  v[2 * 4 + 1] = std::numeric_limits<double>::quiet_NaN();  // A[2][1]: in the minors of order >= 3
  const Tensor a = Tensor::from_vector(v, {4, 4});
  CHECK_THAT(error_of([&] { cholesky(a); }), Catch::Contains("order 3"));
  require_close(cholesky_checked(a).info, {3});
  v[2 * 4 + 1] = 0.0;
  v[0] = std::numeric_limits<double>::infinity();
  CHECK_THAT(error_of([&] { cholesky(Tensor::from_vector(v, {4, 4})); }), Catch::Contains("order 1"));
}

TEST_CASE("linear algebra shape errors name the op and the shapes", "[linalg][errors]") {
  CHECK_THAT(error_of([] { cholesky(ones({2, 3})); }), Catch::Contains("cholesky") && Catch::Contains("[2, 3]"));
  CHECK_THAT(error_of([] { cholesky(ones({3})); }), Catch::Contains("square"));
  CHECK_THAT(error_of([] { triangular_solve(eye(3), ones({4})); }),
             Catch::Contains("triangular_solve") && Catch::Contains("[4]") && Catch::Contains("[3, 3]"));
  CHECK_THAT(error_of([] { cho_solve(cho_factor(eye(3)), ones({2, 2})); }), Catch::Contains("cho_solve"));
  CHECK_THAT(error_of([] { solve(stack({eye(3), eye(3)}), ones({3, 3, 1})); }), Catch::Contains("cho_solve"));
  CHECK_THAT(error_of([] { cho_solve(CholeskyFactor{}, ones({2})); }), Catch::Contains("empty"));
  CHECK_THAT(error_of([] { logdet(ones({2, 3})); }), Catch::Contains("cho_factor"));
}

TEST_CASE("linear algebra in float32", "[linalg][cholesky][cho_solve][logdet]") {
  const Tensor a = spd({2}, 8, 90), b = randn({2, 8, 1}, 91);
  const Tensor l = cholesky(a.astype(DType::f32));
  CHECK(l.dtype() == DType::f32);
  require_close(l, cholesky(a), 1e-5);
  require_close(solve(a.astype(DType::f32), b.astype(DType::f32)), solve(a, b), 1e-4);
  require_close(logdet(a.astype(DType::f32)), logdet(a), 1e-5);
}

TEST_CASE("second derivatives through cholesky, cho_solve and logdet", "[linalg][cholesky][cho_solve][logdet][grad]") {
  // The gradient of each loss, itself differentiated: exercises the differentiable form of every
  // linear-algebra adjoint (the blocked Cholesky kernel is used only when nothing watches).
  const Tensor w = randn({7, 7}, 95), b = randn({7}, 96);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> losses = {
      {"cholesky", [&](const Tensor& a) { return sum(w * cholesky(sym(a))); }},
      {"cho_solve", [&](const Tensor& a) { return sum(b * cho_solve(cho_factor(sym(a)), b)); }},
      {"logdet", [&](const Tensor& a) { return logdet(sym(a)); }},
      {"triangular_solve", [&](const Tensor& a) { return sum(triangular_solve(a, b) * b); }},
  };
  for (const auto& [name, loss] : losses) {
    INFO(name);
    check_gradients([&](auto& v) { return grad(loss)(v[0]); }, {spd({}, 7, 97)}, 1e-5, 1e-6);
  }
}

TEST_CASE("a non-finite pivot before a failing one is the one reported", "[linalg][cholesky]") {
  const Tensor a = diag(Tensor::from_vector({std::numeric_limits<double>::infinity(), -1, 1}, {3}));
  CHECK_THAT(error_of([&] { cholesky(a); }), Catch::Contains("order 1"));
  require_close(cholesky_checked(a).info, {1});
}

TEST_CASE("cholesky's adjoint ignores the cotangent above the diagonal, even when infinite", "[linalg]") {
  const Tensor m = randn({5, 5}, 21);
  const Tensor a = matmul(m, m.t()) / 5.0 + eye(5);
  const Tensor w = randn({5, 5}, 22);
  // A downstream op with an infinite derivative at L's structural zeros (sqrt, say) gives this.
  const Tensor inf_above = where(tril(ones({5, 5})), w, full({5, 5}, INFINITY));
  auto adjoint = [](const Tensor& x, const Tensor& cotangent) {
    auto [l, pullback] = vjp([](const Tensor& y) { return cholesky(y); }, x);
    return pullback(cotangent)[0];
  };
  const Tensor g = adjoint(a, inf_above);
  for (double v : g.to_vector<double>()) CHECK(std::isfinite(v));
  require_close(g, adjoint(a, tril(w)).to_vector<double>(), 1e-12);
  // the same through the differentiable form of the adjoint, taken when an outer grad needs it
  const Tensor gg = grad([&](const Tensor& x) { return sum(square(adjoint(x, inf_above))); })(a);
  for (double v : gg.to_vector<double>()) CHECK(std::isfinite(v));
  require_close(gg, grad([&](const Tensor& x) { return sum(square(adjoint(x, tril(w)))); })(a).to_vector<double>(),
                1e-10);
}

namespace {

// I + u u^T for each row u of `u` [k, n], and its inverse I - u u^T / (1 + u^T u) (Sherman-Morrison).
Tensor outer(const Tensor& u) {
  const std::int64_t k = u.shape(0), n = u.shape(1);
  return u.reshape({k, n, 1}) * u.reshape({k, 1, n});
}
Tensor identity_plus_outer(const Tensor& u) { return eye(u.shape(-1)) + outer(u); }
Tensor identity_plus_outer_inverse(const Tensor& u) {
  return eye(u.shape(-1)) - outer(u) / (sum(u * u, {-1}).reshape({u.shape(0), 1, 1}) + 1.0);
}

// The backend's kernel on contiguous factors [count, n, n], whose strict upper triangles hold NaN
// (the kernel must not read them).
Tensor cholesky_inverse_kernel(const Tensor& l) {
  const std::int64_t n = l.shape(-1), count = l.shape(0);
  const Tensor dirty = where(tril(ones({n, n})), l, full(l.shape(), NAN, l.dtype()));
  const Tensor out = full(l.shape(), 7.0, l.dtype());  // every element is written
  backend_for(Device::cpu())
      .cholesky_inverse(l.dtype(), count, n, dirty.raw_data(), n * n, const_cast<void*>(out.raw_data()), n * n);
  return out;
}

}  // namespace

TEST_CASE("cholesky_inverse kernel: (L L^T)^-1 against cho_solve and a closed form", "[linalg][logdet]") {
  // Sizes on both sides of the kernel's panels of 64.
  for (std::int64_t n : {1, 2, 17, 63, 64, 65, 130, 200})
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO("n = " << n << ", " << name_of(dtype));
      const double tol = dtype == DType::f64 ? 1e-11 : 2e-4;
      const Tensor a = spd({3}, n, 300 + static_cast<std::uint64_t>(n));
      const Tensor inverse = cholesky_inverse_kernel(cholesky(a).astype(dtype));
      CHECK(inverse.dtype() == dtype);
      const Tensor reference = cho_solve(cho_factor(a), broadcast_to(eye(n), a.shape()));
      CHECK(max_abs(inverse.astype(DType::f64) - reference) <= tol * max_abs(reference));
      CHECK(max_abs(inverse - swapaxes(inverse, -1, -2)) == 0.0);  // exactly symmetric
      const Tensor u = randn({2, n}, 400 + static_cast<std::uint64_t>(n)) * 0.3;
      const Tensor closed = identity_plus_outer_inverse(u);
      CHECK(max_abs(cholesky_inverse_kernel(cholesky(identity_plus_outer(u)).astype(dtype)).astype(DType::f64) -
                    closed) <= tol);
    }
  // No matrices: nothing is read or written.
  backend_for(Device::cpu()).cholesky_inverse(DType::f64, 0, 5, nullptr, 25, nullptr, 25);
}

TEST_CASE("a single large factorization and inverse: the same bits on two threads and on three", "[linalg][threads]") {
  // With more than one thread, one matrix of order 384 or more (256 for the inverse) is split over the threads by
  // fixed blocks of 64 (backends/cpu/matrix.cpp), which do not depend on the thread count; one thread, or a batch,
  // runs the whole-matrix kernels, which round differently. Orders that are and are not multiples of the block.
  for (std::int64_t n : {300, 448, 521})
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO("n = " << n << ", " << name_of(dtype));
      const double tol = dtype == DType::f64 ? 1e-11 : 2e-3;
      const Tensor a = spd({}, n, 500 + static_cast<std::uint64_t>(n)).astype(dtype);
      const auto run = [&](int threads) {
        return on_threads(threads, [&] {
          const Tensor l = cholesky(a);
          return std::pair{l, cholesky_inverse_kernel(l.reshape({1, n, n})).reshape({n, n})};
        });
      };
      const auto [l1, inverse1] = run(1);
      const auto [l2, inverse2] = run(2);
      const auto [l3, inverse3] = run(3);
      CHECK(l2.to_vector<double>() == l3.to_vector<double>());
      CHECK(inverse2.to_vector<double>() == inverse3.to_vector<double>());
      // And the values are the whole-matrix kernels', a lower triangular factor and an exactly symmetric inverse.
      require_close(l2, l1, tol);
      CHECK(max_abs((inverse2 - inverse1).astype(DType::f64)) <= tol * max_abs(inverse1.astype(DType::f64)));
      CHECK(max_abs(triu(l2, 1)) == 0.0);
      CHECK(max_abs(inverse2 - inverse2.t()) == 0.0);
      CHECK(max_abs((matmul(inverse2, a) - eye(n)).astype(DType::f64)) <= tol * 10);
      // In place, as the serial kernel allows.
      const Tensor in_place = l2.reshape({1, n, n}).astype(dtype);  // a copy
      on_threads(2, [&] {
        backend_for(Device::cpu())
            .cholesky_inverse(dtype, 1, n, in_place.raw_data(), n * n, const_cast<void*>(in_place.raw_data()), n * n);
      });
      CHECK(in_place.reshape({n, n}).to_vector<double>() == inverse2.to_vector<double>());
    }
  // A failure in the split form: the same minor, and the same rows of NaN, as on one thread.
  const std::int64_t n = 448;
  std::vector<double> dent(static_cast<std::size_t>(n), 0.0);
  dent[300] = 100.0;
  const Tensor bad = spd({}, n, 90) - diag(Tensor::from_vector(dent, {n}));
  const CheckedCholesky one = on_threads(1, [&] { return cholesky_checked(bad); });
  const CheckedCholesky two = on_threads(2, [&] { return cholesky_checked(bad); });
  require_close(two.info, {301});
  require_close(one.info, {301});
  CHECK_THAT(on_threads(2, [&] { return error_of([&] { cholesky(bad); }); }), Catch::Contains("order 301"));
  const auto nan_at = [](const Tensor& l) {
    std::vector<bool> at;
    for (double v : l.to_vector<double>()) at.push_back(std::isnan(v));
    return at;
  };
  CHECK(nan_at(two.l) == nan_at(one.l));
  CHECK(nan_at(two.l)[static_cast<std::size_t>(n * n - 1)]);
}

TEST_CASE("cholesky kernel with lower_only: the same lower factor, the strict upper triangle left as it was",
          "[linalg][cholesky]") {
  Backend& cpu = backend_for(Device::cpu());
  for (std::int64_t n : {1, 17, 130, 256}) {
    INFO("n = " << n);
    const Tensor a = spd({2}, n, 700 + static_cast<std::uint64_t>(n));
    const std::vector<double> want = cholesky(a).to_vector<double>();
    // In place, over A's lower triangle with a marker above: lower_only keeps the marker, else zeros.
    for (bool lower_only : {false, true}) {
      std::vector<double> work = tril(a).to_vector<double>();
      const double marker = 7.25;
      for (std::int64_t m = 0; m < 2; ++m)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = i + 1; j < n; ++j) work[static_cast<std::size_t>((m * n + i) * n + j)] = marker;
      cpu.cholesky(DType::f64, 2, n, work.data(), n * n, work.data(), n * n, lower_only, FactorFailure::poisoning());
      std::int64_t lower_differs = 0, upper_kept = 0;
      for (std::int64_t m = 0; m < 2; ++m)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            const auto e = static_cast<std::size_t>((m * n + i) * n + j);
            if (j <= i) lower_differs += work[e] != want[e];
            else upper_kept += work[e] == marker;
          }
      CHECK(lower_differs == 0);
      CHECK(upper_kept == (lower_only ? n * (n - 1) : 0));
    }
  }
}

namespace {

// A CPU-computing device that records each Cholesky factorization's lower_only flag.
class FactorRecorder final : public vt::testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, bool lower_only, const FactorFailure& failure) override {
    flags.push_back(lower_only);
    ForwardingBackend::cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only, failure);
  }
  std::vector<bool> flags;
};

}  // namespace

TEST_CASE("jit leaves a factor's upper triangle unwritten only when every reader reads the lower one",
          "[linalg][cholesky][jit]") {
  const Device recorded = Device::cuda(6);
  FactorRecorder device(recorded);
  const std::int64_t n = 40;
  const Tensor a = spd({}, n, 710).to(recorded), b = randn({n}, 711).to(recorded);
  const Tensor m = randn({n, n}, 712).to(recorded);
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&)> f;
    bool lower_only;
  };
  const std::vector<Case> cases = {
      {"cho_solve", [&](const Tensor& x) { return cho_solve(cho_factor(x), b); }, true},
      {"cho_solve and logdet, a GP's likelihood",
       [&](const Tensor& x) {
         const CholeskyFactor f = cho_factor(x);
         return sum(b * cho_solve(f, b)) + logdet(f);
       },
       true},
      {"its gradient (the factor's inverse)",
       [&](const Tensor& x) {
         return grad([&](const Tensor& y) {
           const CholeskyFactor f = cho_factor(y);
           return sum(b * cho_solve(f, b)) + logdet(f);
         })(x);
       },
       true},
      {"a captured matrix's factor (folded once)",
       [&](const Tensor& x) { return cho_solve(cho_factor(a), matmul(x, b)); }, true},
      {"cholesky_checked's factor in a solve, the status unused",
       [&](const Tensor& x) {
         return cho_solve(CholeskyFactor{x, cholesky_checked(x).l}, b);
       },
       true},
      {"cholesky_checked's status used too",
       [&](const Tensor& x) {
         const CheckedCholesky c = cholesky_checked(x);
         return cho_solve(CholeskyFactor{x, c.l}, b) + c.info;
       },
       false},
      {"the factor a result", [&](const Tensor& x) { return cholesky(x); }, false},
      {"the factor a result through stop_gradient", [&](const Tensor& x) { return stop_gradient(cho_factor(x).l); },
       false},
      {"the factor summed through stop_gradient",
       [&](const Tensor& x) {
         const CholeskyFactor f = cho_factor(x);
         return cho_solve(f, b) + sum(stop_gradient(f.l), {0});
       },
       false},
      {"the factor summed", [&](const Tensor& x) { return sum(cholesky(x)); }, false},
      {"the factor in a product too",
       [&](const Tensor& x) {
         const CholeskyFactor f = cho_factor(x);
         return cho_solve(f, b) + matmul(f.l, b);
       },
       false},
      {"the factor reshaped, then solved with",
       [&](const Tensor& x) {
         const CholeskyFactor f = cho_factor(x);
         return cho_solve(CholeskyFactor{f.a, reshape(reshape(f.l, {n * n}), {n, n})}, b);
       },
       false},
      {"the Cholesky adjoint reads the factor",
       [&](const Tensor& x) { return grad([&](const Tensor& y) { return sum(cholesky(y) * m); })(x); }, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    device.flags.clear();
    const Tensor got = jit(c.f)(a);
    REQUIRE(device.flags.size() == 1);
    CHECK(device.flags[0] == c.lower_only);
    device.flags.clear();
    const Tensor eager = c.f(a);
    REQUIRE(device.flags.size() == 1);
    CHECK_FALSE(device.flags[0]);
    CHECK(max_abs(got.to(Device::cpu()) - eager.to(Device::cpu())) <= 1e-12 * (1.0 + max_abs(eager.to(Device::cpu()))));
  }
}

TEST_CASE("jit takes a solve against s 1 as s times the solve against 1 it already makes", "[linalg][cho_solve][jit]") {
  const std::int64_t n = 30;
  const Tensor f = randn({n, 6}, 720), ones_n = ones({n}), twos = full({n}, 2.0), eye_n = eye(n), w = randn({n}, 721);
  const Tensor ps = randn({4, 6}, 722);
  const auto a_of = [&](const Tensor& p) { return matmul(f * square(p), f.t()) + eye_n; };
  auto close = [](const Tensor& got, const Tensor& want) {
    const std::vector<double> g = got.to_vector<double>(), e = want.to_vector<double>();
    REQUIRE(g.size() == e.size());
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - e[i]) <= 1e-12 * (1.0 + std::abs(e[i])));
  };
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&)> loss;
    std::int64_t scaled;
  };
  const std::vector<Case> cases = {
      // The seed program: mean's cotangent, 1/n broadcast, is solved against in the gradient.
      {"mean(cho_solve(A, 1))", [&](const Tensor& p) { return mean(cho_solve(cho_factor(a_of(p)), ones_n)); }, 1},
      {"a solve against s 1 written out",
       [&](const Tensor& p) {
         const CholeskyFactor c = cho_factor(a_of(p));
         return sum(cho_solve(c, ones_n) * w) + sum(cho_solve(c, broadcast_to(reshape(sum(p), {1}), {n})));
       },
       2},  // and the gradient's solve against 1 broadcast
      {"a solve against w and one against w s (any right-hand side, any scaling)",
       [&](const Tensor& p) {
         const CholeskyFactor c = cho_factor(a_of(p));
         return sum(cho_solve(c, w) * w) + sum(cho_solve(c, w * sum(p)));
       },
       2},  // the forward solve against w s; and the gradient's, against w times the output's cotangent, once
            // fold_broadcasts_into_elementwise reads that cotangent as one number (the solve against w is merged)
      {"against 2s: not ones", [&](const Tensor& p) { return mean(cho_solve(cho_factor(a_of(p)), twos)); }, 0},
      {"s with more axes than the solve (its product would be [1, n])",
       [&](const Tensor& p) {
         const CholeskyFactor c = cho_factor(a_of(p));
         return sum(cho_solve(c, ones_n) * w) +
                sum(cho_solve(c, reshape(broadcast_to(reshape(sum(p), {1, 1}), {1, n}), {n})) * w);
       },
       0},
      {"a cotangent that is not one number",
       [&](const Tensor& p) { return sum(cho_solve(cho_factor(a_of(p)), ones_n) * w); }, 0},
      {"another factor",
       [&](const Tensor& p) {
         return mean(cho_solve(cho_factor(a_of(p)), ones_n)) +
                sum(cho_solve(cho_factor(a_of(p * 2.0)), broadcast_to(reshape(sum(p), {1}), {n})));
       },
       1},  // mean's gradient's solve only: the other factor solves against nothing of ones
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const auto step = jit(vmap(value_and_grad(c.loss)));
    CHECK(step.compile(as_batch(ps)).rewrites_by("scale_repeated_solves") == c.scaled);
    const auto [value, gradient] = step(ps);
    const auto [eager_value, eager_gradient] = vmap(value_and_grad(c.loss))(ps);
    close(value, eager_value);
    close(gradient, eager_gradient);
  }
}

TEST_CASE("logdet's gradient is A^-1 from the factor's inverse, eager, jitted and batched", "[linalg][logdet][grad]") {
  const std::int64_t n = 70;
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(name_of(dtype));
    const double tol = dtype == DType::f64 ? 1e-12 : 1e-4;
    const Tensor u = randn({4, n}, 500) * 0.2;
    const Tensor a = identity_plus_outer(u).astype(dtype);
    const Tensor closed = identity_plus_outer_inverse(u);
    auto loss = [](const Tensor& x) { return logdet(x); };
    {
      OpCounter ops;  // not differentiated further: the inverse kernel, no solves against I
      const Tensor g = grad(loss)(slice(a, 0, 0, 1).reshape({n, n}));
      CHECK(ops.forward("cholesky_inverse") == 1);
      CHECK(ops.forward("cho_solve") == 0);
      CHECK(g.dtype() == dtype);
      require_close(g.astype(DType::f64), slice(closed, 0, 0, 1).reshape({n, n}), tol);
    }
    require_close(jit(grad(loss))(slice(a, 0, 1, 2).reshape({n, n})).astype(DType::f64),
                  slice(closed, 0, 1, 2).reshape({n, n}), tol);
    require_close(unbatch(jit(vmap(grad(loss)))(as_batch(a))).astype(DType::f64), closed, tol);
    require_close(unbatch(vmap(grad(loss))(as_batch(a))).astype(DType::f64), closed, tol);
    // A stack of matrices in one example, and an empty stack.
    require_close(grad([](const Tensor& x) { return sum(logdet(x)); })(a).astype(DType::f64), closed, tol);
    const Tensor empty = zeros({0, n, n}, dtype);
    CHECK(grad([](const Tensor& x) { return sum(logdet(x)); })(empty).shape() == Shape{0, n, n});
    CHECK(unbatch(jit(vmap(grad(loss)))(as_batch(empty))).shape() == Shape{0, n, n});
  }
  {
    // Differentiated: the same inverse kernel, its adjoint -X sym(Xbar) X by products, no solves against I. The
    // gradient of sum(A^-1) is -(X 1)(X 1)^T.
    const Tensor u = randn({1, n}, 502) * 0.2;
    const Tensor a = identity_plus_outer(u).reshape({n, n}), x = identity_plus_outer_inverse(u).reshape({n, n});
    OpCounter ops;
    const Tensor g = grad([](const Tensor& m) { return sum(grad([](const Tensor& y) { return logdet(y); })(m)); })(a);
    CHECK(ops.forward("cholesky_inverse") == 1);
    CHECK(ops.forward("cho_solve") == 0);
    const Tensor w = matmul(x, ones({n}));
    require_close(g, -matmul(w.reshape({n, 1}), w.reshape({1, n})), 1e-12);
  }
}

TEST_CASE("trsm: every path by number of right-hand sides, triangle, transpose and then_transposed",
          "[linalg][triangular_solve]") {
  // The kernel solves 1 to 3 right-hand sides as vectors, up to 8 on a column-major copy, more in
  // place: each against Eigen's solve of the dense triangle.
  for (std::int64_t n : {1, 33, 70})
    for (std::int64_t k : {1, 2, 3, 4, 8, 9, 20})
      for (bool lower : {true, false})
        for (bool trans : {false, true})
          for (bool both : {false, true}) {
            INFO("n = " << n << ", nrhs " << k << ", lower " << lower << ", transpose " << trans << ", then " << both);
            const Eigen::MatrixXd t =
                (randn({n, n}, 600).as_eigen<double>() * 0.3 + 2.0 * Eigen::MatrixXd::Identity(n, n));
            const Eigen::MatrixXd tri = lower ? Eigen::MatrixXd(t.triangularView<Eigen::Lower>())
                                              : Eigen::MatrixXd(t.triangularView<Eigen::Upper>());
            const Eigen::MatrixXd op = trans ? Eigen::MatrixXd(tri.transpose()) : tri;
            const Tensor b = randn({2, n, k}, 601);
            Eigen::MatrixXd expected(2 * n, k);
            for (int i = 0; i < 2; ++i) {
              Eigen::MatrixXd x = op.lu().solve(reshape(slice(b, 0, i, i + 1), {n, k}).as_eigen<double>());
              if (both) x = op.transpose().lu().solve(x);
              expected.middleRows(i * n, n) = x;
            }
            const Tensor tt = Tensor::from_eigen(t);
            const Tensor out = b * 1.0;  // a fresh buffer the kernel solves in place
            backend_for(Device::cpu())
                .trsm(TrsmArgs{.dtype = DType::f64,
                               .count = 2,
                               .n = n,
                               .nrhs = k,
                               .lower = lower,
                               .transpose = trans,
                               .then_transposed = both,
                               .t = tt.raw_data(),
                               .stride_t = 0,
                               .b = const_cast<void*>(out.raw_data()),
                               .stride_b = n * k});
            require_close(reshape(out, {2 * n, k}), Tensor::from_eigen(expected), 1e-10);
          }
}
