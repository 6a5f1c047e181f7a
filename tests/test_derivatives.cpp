// jvp, jacrev, jacfwd, hessian and hvp (autodiff/derivatives.hpp): every tangent against central
// finite differences and against the reverse rule (<J v, u> = <v, J^T u>), Jacobians both ways
// against each other and against finite differences, Hessians against closed forms, and all of
// them under vmap and jit.
#include <functional>
#include <string>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;

double dot(const Tensor& a, const Tensor& b) { return sum(a * b).item(); }

// A symmetric positive definite matrix from any square x: x x^T / n + I (so every op of the
// factorizations is exercised through x).
Tensor spd(const Tensor& x) { return matmul(x, x.t()) / static_cast<double>(x.shape(0)) + eye(x.shape(0)); }

struct Rule {
  std::string name;
  Unary f;
  Tensor x;
};

std::vector<Rule> rules() {
  const Tensor b = randn({5, 2}, 3), w = randn({4, 3}, 4);
  const Tensor ids = Tensor::from_ints({2, 0, 1, 2, 2, 0}, {6}), at = Tensor::from_ints({1, 3, 3, 0}, {4});
  const Tensor m5 = randn({5, 5}, 5) * 0.5, v6 = randn({6}, 6), m43 = randn({4, 3}, 7);
  return {
      {"exp, sin, tanh, log1p", [](const Tensor& x) { return exp(x) * sin(x) + tanh(log1p(x * x)); }, v6},
      {"pow, div, softplus, where",
       [](const Tensor& x) { return where(greater(x, zeros({})), pow(x * x + 1.0, x), softplus(x) / (x * x + 2.0)); },
       v6},
      {"sum, mean, max, logsumexp, cumsum",
       [](const Tensor& x) {
         return stack({sum(x), mean(x * x), max(x), logsumexp(x)}) + sum(cumsum(x, 0));
       },
       v6},
      {"matmul", [=](const Tensor& x) { return matmul(x, matmul(x.t(), w)); }, m43},
      {"cholesky", [](const Tensor& x) { return cholesky(spd(x)); }, m5},
      {"cho_solve and logdet",
       [=](const Tensor& x) {
         const CholeskyFactor c = cho_factor(spd(x));
         return cho_solve(c, b) + logdet(c);
       },
       m5},
      {"triangular_solve", [=](const Tensor& x) { return triangular_solve(cholesky(spd(x)), b, true, true); }, m5},
      {"solve", [=](const Tensor& x) { return solve(spd(x) * 1.5, b); }, m5},
      {"qr", [](const Tensor& x) { return sum(qr(x).r, {0}) + sum(qr(x).q * 2.0, {0}); }, m43},
      {"eigh (eigenvalues)", [](const Tensor& x) { return eigh(spd(x)).eigenvalues; }, m5},
      {"take and scatter_add",
       [=](const Tensor& x) {
         return scatter_add(take(x, at) * take(x, Tensor::from_ints({0}, {})), at, take(x, at) * 0.5 + 1.0);
       },
       v6},
      {"segment_sum and segment_max",
       [=](const Tensor& x) { return segment_sum(x * x, ids, 3) + segment_max(sin(x), ids, 3); }, v6},
  };
}

// (f(x + h v) - f(x - h v)) / 2h.
Tensor finite_difference(const Unary& f, const Tensor& x, const Tensor& v, double h = 1e-6) {
  return (f(x + v * h) - f(x - v * h)) / (2 * h);
}

}  // namespace

TEST_CASE("jvp: every tangent against finite differences and against the reverse rule", "[derivatives][jvp]") {
  for (const Rule& r : rules()) {
    INFO(r.name);
    const Tensor v = randn(r.x.shape(), 11);
    const auto [y, jv] = jvp(r.f, {r.x}, {v});
    require_close(y, r.f(r.x), 0);
    require_close(jv, finite_difference(r.f, r.x, v), 1e-6);
    // <J v, u> = <v, J^T u> for a random u.
    const Tensor u = randn(y.shape(), 12);
    const auto [value, pullback] = vjp(r.f, r.x);
    const double forward = dot(jv, u), reverse = dot(v, pullback(u)[0]);
    CHECK(std::abs(forward - reverse) <= 1e-10 * std::max(1.0, std::abs(reverse)));
  }
}

TEST_CASE("jvp: several primals, integer primals, zero tangents and bad tangents", "[derivatives][jvp]") {
  const Tensor x = randn({3}, 20), y = randn({3}, 21), i = Tensor::from_ints({2, 0}, {2});
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& idx) { return take(a * b, idx) + sum(exp(b)); };
  const Tensor vx = randn({3}, 22), vy = randn({3}, 23);
  const auto [out, t] = jvp(f, {x, y, i}, {vx, vy, Tensor()});
  // By linearity: the tangent along (vx, vy) is the sum of those along (vx, 0) and (0, vy).
  const Tensor tx = jvp(f, {x, y, i}, {vx, zeros({3}), Tensor()}).second;
  const Tensor ty = jvp(f, {x, y, i}, {zeros({3}), vy, Tensor()}).second;
  require_close(t, tx + ty, 1e-13);
  // d/dx take(x * y, idx) along vx is take(vx * y, idx).
  require_close(tx, take(vx * y, i), 1e-14);
  require_close(jvp(f, {x, y, i}, {zeros({3}), zeros({3}), Tensor()}).second, zeros({2}), 0);
  CHECK(error_of([&] {
          jvp(f, {x, y, i}, {randn({4}, 24), vy, Tensor()});
        }).find("jvp: tangent 0 is float64 of shape [4], but its primal is float64 of shape [3]") != std::string::npos);
  CHECK(error_of([&] {
          jvp([](const Tensor& a) { return astype(a, DType::i64); }, {x}, {vx});
        }).find("which has no tangent") != std::string::npos);
}

TEST_CASE("a pullback under vmap keeps each cotangent's result apart; a batch of tangents gives one J v each",
          "[derivatives][jvp]") {
  const Tensor A = randn({3, 3}, 25), x = randn({3}, 26), E = randn({4, 3}, 27);
  auto f = [&](const Tensor& y) { return matmul(A, y) * y; };
  auto [out, pullback] = vjp(f, x);
  const Tensor rows = vmap([&](const Tensor& u) { return pullback(u)[0]; }, {0}, 0)(E);
  const Tensor columns = vmap([&](const Tensor& v) { return jvp(f, {x}, {v}).second; }, {0}, 0)(E);
  for (std::int64_t i = 0; i < 4; ++i) {
    const Tensor e = reshape(slice(E, 0, i, i + 1), {3});
    require_close(reshape(slice(rows, 0, i, i + 1), {3}), pullback(e)[0], 1e-14);
    require_close(reshape(slice(columns, 0, i, i + 1), {3}), jvp(f, {x}, {e}).second, 1e-14);
  }
  // A pullback under vmap of a result that reduces a batch is refused (the two batches would share one axis).
  auto [mean_out, mean_pullback] = vjp([](const Tensor& b) { return batch_mean(b * 2.0); }, as_batch(E));
  CHECK(error_of([&] {
          vmap([&](const Tensor& u) { return mean_pullback(u)[0]; }, {0}, 0)(randn({2, 3}, 29));
        }).find("a batch of cotangents (a pullback under vmap) for an unbatched result") != std::string::npos);
  require_close(unbatch(mean_pullback(ones({3}))[0]), full({4, 3}, 0.5), 1e-15);
  // A loss over a batch still sums a shared variable's cotangents.
  const Tensor W = randn({3}, 28);
  const Tensor g = grad([&](const Tensor& w) { return sum(vmap([&](const Tensor& e) { return sum(e * w); })(E)); })(W);
  require_close(g, sum(E, {0}), 1e-14);
}

TEST_CASE("jacrev and jacfwd agree with each other and with finite differences", "[derivatives][jacobian]") {
  const Tensor w = randn({3, 4}, 30);
  // f: [2, 4] -> [3, 2]
  auto f = [&](const Tensor& x) { return tanh(matmul(w, x.t())) * sum(x); };
  const Tensor x = randn({2, 4}, 31);
  const Tensor jr = jacrev(f)(x), jf = jacfwd(f)(x);
  CHECK(jr.shape() == Shape{3, 2, 2, 4});
  CHECK(jf.shape() == Shape{3, 2, 2, 4});
  require_close(jr, jf, 1e-13);
  // Column (a, b) of the Jacobian is the derivative along the unit tensor e_ab.
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t c = 0; c < 4; ++c) {
      std::vector<double> e(8, 0.0);
      e[static_cast<std::size_t>(a * 4 + c)] = 1;
      const Tensor column = reshape(slice(reshape(jr, {6, 8}), 1, a * 4 + c, a * 4 + c + 1), {3, 2});
      require_close(column, finite_difference(f, x, Tensor::from_vector(e, {2, 4})), 1e-7);
    }
  // A second argument, and a scalar function's Jacobian (its gradient's shape).
  auto g = [](const Tensor& a, const Tensor& b) { return sum(a * exp(b)); };
  const Tensor a = randn({3}, 32), b = randn({3}, 33);
  require_close(jacrev(g, 1)(a, b), a * exp(b), 1e-14);
  require_close(jacfwd(g, 1)(a, b), a * exp(b), 1e-14);
  CHECK(error_of([&] { jacrev(g, 2)(a, b); }).find("jacrev: argnum 2 is out of range") != std::string::npos);
  // Empty: zeros of the Jacobian's shape.
  CHECK(jacrev(f)(zeros({0, 4})).shape() == Shape{3, 0, 0, 4});
}

TEST_CASE("hessian and hvp against closed forms and finite differences of the gradient", "[derivatives][hessian]") {
  // A quadratic form: H = A + A^T.
  const Tensor A = randn({4, 4}, 40), x = randn({4}, 41), v = randn({4}, 42);
  auto quad = [&](const Tensor& y) { return matmul(y, matmul(A, y)); };
  require_close(hessian(quad)(x), A + A.t(), 1e-13);
  require_close(hvp(quad)(x, v), matmul(A + A.t(), v), 1e-13);
  // A GP's negative log likelihood in its hyperparameters (a Cholesky, a solve and a logdet).
  const Tensor t = reshape(Tensor::from_vector({0.0, 0.3, 0.7, 1.1, 1.6, 2.0}, {6}), {6, 1}), y = randn({6}, 43);
  auto nll = [&](const Tensor& theta) {
    auto p = [&](std::int64_t i) { return exp(reshape(slice(theta, 0, i, i + 1), {})); };
    const Tensor amp = p(0), ell = p(1), noise = p(2);
    const Tensor K = amp * exp(square(t - t.t()) * -0.5 / square(ell)) + eye(6) * noise;
    const CholeskyFactor c = cho_factor(K);
    return 0.5 * sum(y * cho_solve(c, y)) + 0.5 * logdet(c);
  };
  const Tensor theta = Tensor::from_vector({0.2, -0.4, -1.5}, {3});
  const Tensor H = hessian(nll)(theta);
  CHECK(H.shape() == Shape{3, 3});
  require_close(H, H.t(), 1e-10);
  for (std::int64_t j = 0; j < 3; ++j) {
    const Tensor e = reshape(slice(eye(3), 0, j, j + 1), {3});
    const Tensor column = reshape(slice(H, 1, j, j + 1), {3});
    require_close(column, finite_difference(grad(nll), theta, e), 1e-6);
    require_close(hvp(nll)(theta, e), column, 1e-12);
  }
  CHECK(error_of([&] { hvp(quad)(x, randn({3}, 44)); }).find("hvp: tangent 0 is float64 of shape [3]") !=
        std::string::npos);
}

TEST_CASE("derivative builders under vmap and jit: one vmap, one trace for every batch size", "[derivatives][jit]") {
  const Tensor A = randn({3, 3}, 50);
  auto f = [&](const Tensor& p) { return sum(exp(matmul(A, p)) * p) + logdet(spd(reshape(p, {3, 1}) * 1.0 + A)); };
  const Tensor P = randn({5, 3}, 51) * 0.3;
  // vmap(hessian) equals a loop of hessians.
  const Tensor H = vmap(hessian(f))(P);
  for (std::int64_t i = 0; i < 5; ++i) {
    const Tensor p = reshape(slice(P, 0, i, i + 1), {3});
    require_close(reshape(slice(unbatch(H), 0, i, i + 1), {3, 3}), hessian(f)(p), 1e-12);
  }
  // jit(vmap(...)) of each builder: the same values, traced once for two batch sizes.
  const Tensor V = randn({5, 3}, 52);
  auto hv = jit(vmap(hvp(f)));
  auto jac = jit(vmap(jacfwd(f)));
  auto hess = jit(vmap(hessian(f)));
  auto tangent = jit(vmap([&](const Tensor& p, const Tensor& d) { return jvp(f, {p}, {d}).second; }));
  require_close(hess(as_batch(P)), H, 1e-12);
  require_close(hv(as_batch(P), as_batch(V)), vmap(hvp(f))(P, V), 1e-12);
  require_close(jac(as_batch(P)), vmap(grad(f))(P), 1e-12);
  require_close(tangent(as_batch(P), as_batch(V)), sum(vmap(grad(f))(P) * as_batch(V), {0}), 1e-12);
  // An unbatched Hessian and Jacobian under jit.
  const Tensor p0 = reshape(slice(P, 0, 0, 1), {3});
  auto hess_one = jit(hessian(f));
  require_close(hess_one(p0), hessian(f)(p0), 1e-12);
  require_close(jit(jacrev(f))(p0), grad(f)(p0), 1e-12);
  const Tensor P2 = randn({2, 3}, 53) * 0.3;
  require_close(hess(as_batch(P2)), vmap(hessian(f))(P2), 1e-12);
  CHECK(hess.counters().traces == 1);
  CHECK(hess.counters().calls == 2);
}
