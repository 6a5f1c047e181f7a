// vmap and jit: batch as a first-class dimension, one plan for every batch size.
#include <cstdio>
#include <fstream>
#include <thread>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

// The i-th example of a plain [B, ...] tensor.
Tensor row(const Tensor& x, std::int64_t i) {
  Shape s(x.shape().begin() + 1, x.shape().end());
  return reshape(slice(x, 0, i, i + 1), s);
}

// A per-example model touching every op family: [5] -> scalar.
const Tensor W = randn({4, 5}, 1);
Tensor model(const Tensor& p) {
  const Tensor h = tanh(matmul(W, p)) + sin(slice(p, 0, 0, 4)) * 0.5;              // [4]
  const Tensor a = matmul(reshape(h, {4, 1}), reshape(h, {1, 4})) + eye(4) * 2.0;  // SPD [4, 4]
  const CholeskyFactor f = cho_factor(a);
  const Tensor x = cho_solve(f, ones({4}));
  return sum(x * exp(h * 0.1)) + logdet(f) + max(p) + mean(square(diag(cholesky(a))));
}

Tensor gp_func(const Tensor& p, const Tensor& F) {  // the JAX-issue likelihood, small
  const Tensor A = matmul(F * square(p), F.t()) + eye(F.shape(0));
  return mean(cho_solve(cho_factor(A), ones({F.shape(0)})));
}

}  // namespace

TEST_CASE("vmap(f)(X)[i] == f(X[i])", "[vmap]") {
  const Tensor X = randn({6, 5}, 2);
  const Tensor out = vmap(model)(X);
  CHECK(out.is_batched());
  CHECK(out.batch_size() == 6);
  CHECK(out.shape() == Shape{});
  const std::vector<double> got = out.to_vector<double>();
  for (std::int64_t i = 0; i < 6; ++i)
    CHECK(got[static_cast<std::size_t>(i)] == Approx(model(row(X, i)).item()).epsilon(1e-12));
}

TEST_CASE("vmap in_axes, not_mapped arguments, out_axes and several results", "[vmap]") {
  const Tensor X = randn({3, 4}, 3), y = randn({3}, 4);
  auto f = [](const Tensor& a, const Tensor& b) { return std::pair{a * sum(b), stack({sum(a), max(b)})}; };
  // Map axis 1 of X (4 examples of [3]); y is shared.
  auto [first, second] = vmap(f, {1, not_mapped})(X, y);
  CHECK(first.batch_size() == 4);
  CHECK(first.shape() == Shape{3});
  for (std::int64_t i = 0; i < 4; ++i) {
    const Tensor xi = reshape(slice(X, 1, i, i + 1), {3});
    require_close(row(unbatch(first), i), xi * sum(y), 1e-14);
    require_close(row(unbatch(second), i), stack({sum(xi), max(y)}), 1e-14);
  }
  // out_axes places the batch in a plain result.
  const Tensor t = vmap([](const Tensor& a) { return a * 2.0; }, {0}, 1)(X);
  CHECK_FALSE(t.is_batched());
  require_close(t, transpose(X) * 2.0, 0.0);
  // A result that ignores the batch is repeated for every example.
  const Tensor c = vmap([](const Tensor&) { return ones({2}); })(X);
  CHECK(c.batch_size() == 3);
  require_close(unbatch(c), ones({3, 2}));
}

TEST_CASE("captured unbatched tensors broadcast across the batch without copies", "[vmap]") {
  const Tensor F = randn({8, 3}, 5);
  const Tensor P = randn({10, 3}, 6);
  OpCounter ops;
  const Tensor out = vmap([&](const Tensor& p) { return gp_func(p, F); })(P);
  CHECK(ops.forward("broadcast_to") == 0);
  for (std::int64_t i = 0; i < 10; ++i)
    CHECK(out.to_vector<double>()[static_cast<std::size_t>(i)] == Approx(gp_func(row(P, i), F).item()).epsilon(1e-12));
}

TEST_CASE("outside vmap, reductions over all axes include the batch", "[vmap][batch]") {
  const Tensor X = randn({4, 3}, 7);
  const Tensor b = as_batch(X);
  CHECK_FALSE(sum(b).is_batched());
  CHECK(sum(b).item() == Approx(sum(X).item()));
  CHECK(mean(b).item() == Approx(mean(X).item()));
  CHECK(max(b).item() == max(X).item());
  require_close(unbatch(sum(b, {0})), sum(X, {1}), 1e-14);  // explicit axes are per example
  require_close(batch_sum(b), sum(X, {0}), 1e-14);
  require_close(batch_mean(b), mean(X, {0}), 1e-14);
  require_close(batch_max(b), max(X, {0}), 0.0);
  check_gradients([](auto& a) { return batch_mean(as_batch(a[0])) * 3.0; }, {X});
  check_gradients([](auto& a) { return batch_max(as_batch(a[0])); }, {X});
  check_gradients([](auto& a) { return mean(as_batch(a[0]) * a[1]); }, {X, randn({3}, 8)});
}

TEST_CASE("grad of a vmapped loss and vmap of grad (per-example gradients) agree with loops", "[vmap][grad]") {
  const Tensor P = randn({5, 5}, 9);
  // Per-example gradients equal a loop of single gradients.
  const Tensor per_example = unbatch(vmap(grad(model))(P));
  for (std::int64_t i = 0; i < 5; ++i) require_close(row(per_example, i), grad(model)(row(P, i)), 1e-12);
  // The gradient of the batch mean is the per-example gradients over B.
  const Tensor g = grad([](const Tensor& x) { return mean(vmap(model)(x)); })(P);
  require_close(g, per_example / 5.0, 1e-12);
  check_gradients([](auto& a) { return mean(vmap(model)(a[0])); }, {P}, 1e-5, 1e-7);
  // A captured unbatched variable receives the sum over the batch.
  const Tensor F = randn({6, 5}, 10);
  const Tensor gF =
      grad([&](const Tensor& f) { return sum(vmap([&](const Tensor& p) { return gp_func(p, f); })(P)); })(F);
  Tensor expected = zeros({6, 5});
  for (std::int64_t i = 0; i < 5; ++i)
    expected = expected + grad([&](const Tensor& f) { return gp_func(row(P, i), f); })(F);
  require_close(gF, expected, 1e-12);
}

TEST_CASE("jit equals eager, values and gradients", "[jit]") {
  auto loss = [](const Tensor& P) { return mean(vmap(model)(P)); };
  auto step = jit(value_and_grad(loss));
  for (std::int64_t b : {1, 3, 8}) {
    const Tensor P = as_batch(randn({b, 5}, 11 + static_cast<std::uint64_t>(b)));
    const auto [v, g] = step(P);
    const auto [ve, ge] = value_and_grad(loss)(P);
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-13));
    CHECK(g.is_batched());
    require_close(unbatch(g), unbatch(ge), 1e-13);
  }
  // Plain arguments and several results.
  auto f = jit([](const Tensor& a, const Tensor& b) {
    return std::tuple{matmul(a, b), sum(a) * b, std::vector{a, b}};
  });
  const Tensor a = randn({3, 4}, 12), b = randn({4, 2}, 13);
  const auto [ab, sb, both] = f(a, b);
  require_close(ab, matmul(a, b), 1e-14);
  require_close(sb, sum(a) * b, 1e-14);
  require_close(both[0], a, 0.0);
  require_close(both[1], b, 0.0);
}

TEST_CASE("one trace serves batch sizes 1, 2, 7 and 64", "[jit]") {
  const Tensor F = randn({16, 6}, 14);
  auto step = jit(
      value_and_grad([&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); }));
  for (std::int64_t b : {1, 2, 7, 64}) {
    const Tensor P = as_batch(randn({b, 6}, 15 + static_cast<std::uint64_t>(b)));
    const auto [v, g] = step(P);
    CHECK(g.batch_size() == b);
    double expected = 0;
    for (std::int64_t i = 0; i < b; ++i) expected += gp_func(row(unbatch(P), i), F).item() / static_cast<double>(b);
    CHECK(v.item() == Approx(expected).epsilon(1e-12));
  }
  const JitCounters c = step.counters();
  CHECK(c.traces == 1);
  CHECK(c.calls == 4);
  CHECK(c.cache_hits == 3);
  CHECK(c.trace_ms > 0);
  CHECK(c.plan_ms > 0);
  // A different per-example shape or dtype is a new key; a plain argument's whole shape is in it.
  step(as_batch(randn({3, 6}, 16, DType::f32)));
  CHECK(step.counters().traces == 2);
}

TEST_CASE("the JAX-issue plan: reassociated cotangents and a per-example memory plan", "[jit][cho_solve]") {
  const std::int64_t n = 64, m = 16;
  const Tensor F = randn({n, m}, 17);
  auto step = jit(
      value_and_grad([&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); }));
  const Tensor P = as_batch(randn({4, m}, 18));
  const PlanSummary s = step.compile(P);
  CHECK(s.rewrites_by("reassociate_matmuls") >= 1);  // Abar F is computed as L (R^T F): no n x n cotangent
  // In-place reuse keeps the largest per-example buffers (the n x n A, then its factor) to one
  // matrix plus the [n, m] product it is made from.
  CHECK(s.arena_bytes_per_example <= (n * n + n * m) * 8 + 16 * 1024);
  const auto [v, g] = step(P);
  const auto [ve, ge] =
      value_and_grad([&](const Tensor& Q) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(Q)); })(P);
  CHECK(v.item() == Approx(ve.item()).epsilon(1e-13));
  require_close(unbatch(g), unbatch(ge), 1e-13);
}

TEST_CASE("traced code cannot depend on the batch size", "[jit]") {
  const Tensor P = as_batch(randn({4, 3}, 19));
  CHECK(P.batch_size() == 4);  // eager code may read it
  CHECK_THAT(error_of([&] { jit([](const Tensor& x) { return x * static_cast<double>(x.batch_size()); })(P); }),
             Catch::Contains("batch_size") && Catch::Contains("jit"));
  CHECK_THAT(error_of([&] { jit([](const Tensor& x) { return x * unbatch(x).shape(0); })(P); }),
             Catch::Contains("unbatch") && Catch::Contains("run-time"));
  CHECK_THAT(error_of([&] { jit([](const Tensor& x) { return x * sum(x).item(); })(P); }), Catch::Contains("traced"));
  // Plain results of a run-time batch (vmap's out_axes >= 0 over a batched argument) cannot be traced.
  CHECK_THAT(
      error_of([&] { jit([](const Tensor& x) { return vmap([](const Tensor& p) { return sum(p); }, {}, 0)(x); })(P); }),
      Catch::Contains("out_axes 0") && Catch::Contains("run-time") && Catch::Contains("plain"));
}

TEST_CASE("vmap and batching errors", "[vmap][errors]") {
  const Tensor X = randn({4, 3}, 20);
  CHECK_THAT(error_of([&] { vmap([](const Tensor& a) { return a; }, {1})(as_batch(X)); }),
             Catch::Contains("nest the vmaps"));
  CHECK_THAT(error_of([&] {
               vmap([](const Tensor& a, const Tensor& b) { return a + b; })(X, randn({5, 3}, 21));
             }),
             Catch::Contains("different sizes"));
  CHECK_THAT(error_of([&] { vmap([](const Tensor& a) { return a; }, {not_mapped})(X); }),
             Catch::Contains("no argument"));
  CHECK_THAT(error_of([&] { vmap([](const Tensor& a) { return a; })(Tensor::scalar(1.0)); }),
             Catch::Contains("scalar"));
  CHECK_THAT(error_of([&] { grad([](const Tensor& a) { return sum(a, {0}); })(as_batch(X)); }),
             Catch::Contains("batch of scalars"));
  CHECK_THAT(error_of([&] { as_batch(X) + as_batch(randn({5, 3}, 22)); }), Catch::Contains("batch sizes"));
  CHECK_THAT(error_of([&] { batch_sum(X); }), Catch::Contains("not batched"));
  // A non-positive-definite example inside a jitted, batched call names its batch index.
  auto f = jit([](const Tensor& a) { return logdet(a); });
  const Tensor mats = stack({eye(2), eye(2) * -1.0, eye(2)});
  CHECK_THAT(error_of([&] { f(as_batch(mats)); }), Catch::Contains("example 1 of the batch of 3"));
}

TEST_CASE("a jitted function is safe to call from several threads", "[jit]") {
  const Tensor F = randn({12, 4}, 23);
  auto loss = [&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); };
  auto step = jit(value_and_grad(loss));
  std::vector<Tensor> inputs;
  for (std::int64_t b = 1; b <= 8; ++b) inputs.push_back(as_batch(randn({b, 4}, 30 + static_cast<std::uint64_t>(b))));
  std::vector<double> values(inputs.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < inputs.size(); ++t)
    threads.emplace_back([&, t] { values[t] = step(inputs[t]).first.item(); });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < inputs.size(); ++t) CHECK(values[t] == Approx(loss(inputs[t]).item()).epsilon(1e-13));
  CHECK(step.counters().traces == 1);
  CHECK(step.counters().calls == 8);
}

TEST_CASE("npy files round-trip and bad files are clear errors", "[npy]") {
  const std::string dir = std::string(VTAPE_TEST_DATA) + "/../";
  const std::string path = "vtape_test_roundtrip.npy";
  for (DType d : {DType::f32, DType::f64})
    for (const Shape& s : {Shape{}, Shape{3}, Shape{2, 3, 4}}) {
      const Tensor t = randn(s, 40, d);
      save_npy(path, t);
      const Tensor back = load_npy(path);
      CHECK(back.dtype() == d);
      CHECK(back.shape() == s);
      require_close(back, t, 0.0);
    }
  save_npy(path, as_batch(randn({3, 2}, 41)));
  CHECK(load_npy(path).shape() == Shape{3, 2});
  CHECK(load_npy(std::string(VTAPE_TEST_DATA) + "/linalg/A.npy").shape() == Shape{6, 6});  // written by numpy
  {
    std::ofstream bad(path, std::ios::binary);
    bad << "not a numpy file";
  }
  CHECK_THAT(error_of([&] { load_npy(path); }), Catch::Contains("not a .npy"));
  CHECK_THAT(error_of([&] { load_npy("/nonexistent/x.npy"); }), Catch::Contains("cannot open"));
  std::remove(path.c_str());
}

// ---------------------------------------------------------------- regressions found in review
TEST_CASE("jit: several reassociated matmul chains in one plan", "[jit]") {
  const std::int64_t n = 40, k = 2;
  auto g = [](const Tensor& P, const Tensor& Q, const Tensor& Y, const Tensor& R, const Tensor& S, const Tensor& U,
              const Tensor& V) {
    return std::pair{matmul(matmul(P, Q), Y), matmul(matmul(R, S), matmul(U, V))};
  };
  const Tensor P = randn({n, k}, 1), Q = randn({k, n}, 2), Y = randn({n, 3}, 3), R = randn({n, k}, 4),
               S = randn({k, n}, 5), U = randn({n, k}, 6), V = randn({k, n}, 7);
  auto j = jit(g);
  CHECK(j.compile(P, Q, Y, R, S, U, V).rewrites_by("reassociate_matmuls") >= 2);
  const auto [a, b] = j(P, Q, Y, R, S, U, V);
  const auto [ea, eb] = g(P, Q, Y, R, S, U, V);
  require_close(a, ea, 1e-12);
  require_close(b, eb, 1e-12);
}

TEST_CASE("jit: in-place reuse never overwrites an input that is still broadcast", "[jit]") {
  const Tensor v = Tensor::from_vector({1, 2, 3, 4}, {4});
  auto f = [&](const Tensor& p) { return sum(square(exp(sum(p)) * v), {0}); };
  const Tensor X = as_batch(randn({3, 2}, 8) * 0.3);
  require_close(unbatch(jit(vmap(f))(X)), unbatch(vmap(f)(X)), 1e-12);
  auto g = [](const Tensor& x, const Tensor& y) { return x * 2.0 + y; };
  const Tensor x = Tensor::from_vector({1, 2}, {2, 1}), y = Tensor::from_vector({10, 20}, {1, 2});
  require_close(jit(g)(x, y), g(x, y), 0.0);
}

TEST_CASE("per-example gradients with respect to an unmapped argument stay per example", "[vmap][grad]") {
  const Tensor P = randn({3, 4}, 9), F = randn({4}, 10);
  auto f = [](const Tensor& p, const Tensor& w) { return sum(p * w * w); };
  const auto g = vmap(grad(f, {0, 1}), {0, not_mapped})(P, F);
  for (std::int64_t i = 0; i < 3; ++i) {
    const auto gi = grad(f, {0, 1})(row(P, i), F);
    require_close(row(unbatch(g[0]), i), gi[0], 1e-14);
    require_close(row(unbatch(g[1]), i), gi[1], 1e-14);
  }
}

TEST_CASE("grad of grad through a captured variable", "[autodiff]") {
  const Tensor two = Tensor::scalar(2.0);
  auto inner = [&](const Tensor& s) { return grad([&](const Tensor& x) { return x * x * s; })(two); };
  CHECK(grad(inner)(Tensor::scalar(3.0)).item() == 4.0);  // d/ds (2 x s at x = 2) = 4
}

TEST_CASE("jit inside grad and inside vmap behaves like the function", "[jit][vmap][grad]") {
  auto j = jit([](const Tensor& x) { return sum(log1p(x * x)); });
  const Tensor x = Tensor::from_vector({1, 2, 3}, {3});
  require_close(grad([&](const Tensor& a) { return j(a); })(x),
                grad([](const Tensor& a) { return sum(log1p(a * a)); })(x), 1e-14);
  const Tensor X = randn({3, 2}, 11);
  j(as_batch(X));  // a plan where the reduction includes the batch...
  const Tensor per_example = vmap([&](const Tensor& p) { return j(p); })(X);  // ...is not reused per example
  for (std::int64_t i = 0; i < 3; ++i)
    CHECK(per_example.to_vector<double>()[static_cast<std::size_t>(i)] == Approx(sum(log1p(square(row(X, i)))).item()));
}

TEST_CASE("unmatched seeds", "[vmap]") {
  auto [out, pullback] =
      vjp([](const Tensor& a) { return vmap([](const Tensor& p) { return sum(p); })(a); }, randn({2, 3}, 13));
  require_close(pullback(ones({}))[0], ones({2, 3}), 0.0);  // an unbatched cotangent is the same for every example
}

TEST_CASE("batched matrix ops align per-example batch axes after the vmap axis", "[vmap]") {
  // Regression: the vmap axis used to be broadcast against the per-example batch axes of the other
  // operand ([B, 2, 3, 4] @ [B, 4, 5] failed, or paired the wrong matrices).
  const Tensor a = randn({3, 2, 3, 4}, 1), b = randn({3, 4, 5}, 2);
  const Tensor l = tril(randn({3, 4, 4}, 3)) * 0.2 + eye(4) * 2.0, r = randn({3, 2, 4, 2}, 4);
  const Tensor prod = unbatch(matmul(as_batch(a), as_batch(b)));
  const Tensor solved = unbatch(triangular_solve(as_batch(l), as_batch(r)));
  for (std::int64_t i = 0; i < 3; ++i) {
    const auto at = [i](const Tensor& x) {
      return slice(x, 0, i, i + 1).reshape(Shape(x.shape().begin() + 1, x.shape().end()));
    };
    vt::testing::require_close(at(prod), matmul(at(a), at(b)).to_vector<double>(), 1e-12);
    vt::testing::require_close(at(solved), triangular_solve(at(l), at(r)).to_vector<double>(), 1e-12);
  }
}
