// Nested vmap (autodiff/vmap.hpp): vmap inside a vmap body maps a per-example axis by a loop. Every
// result equals loops of unbatched calls: over both axes, with in_axes and out_axes at each level,
// of gradients and Hessians, under jit (one trace for every outer batch size), and the errors.
#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

Tensor at(const Tensor& x, std::int64_t axis, std::int64_t i) {
  Shape shape = x.shape();
  shape.erase(shape.begin() + axis);
  return reshape(slice(x, axis, i, i + 1), shape);
}

// A per-(outer, inner) function of a vector and a matrix: a quadratic form through a solve.
Tensor f(const Tensor& v, const Tensor& m) {
  const Tensor a = matmul(m, m.t()) + eye(m.shape(0)) * 2.0;
  return sum(v * solve(a, v)) + logdet(a) + sum(sin(v));
}

}  // namespace

TEST_CASE("vmap(vmap(f)) equals loops over both axes, with in_axes and out_axes at each level", "[vmap][nested]") {
  const Tensor V = randn({4, 3, 5}, 1);  // [outer, inner, 5]
  const Tensor M = randn({4, 5, 5}, 2);  // [outer, 5, 5]: not mapped by the inner vmap
  const Tensor W = randn({5, 3, 4}, 3);  // [5, inner, outer]: mapped over other axes
  auto inner = vmap([](const Tensor& v, const Tensor& m) { return f(v, m); }, {0, not_mapped});
  const Tensor got = vmap(inner, {0, 0}, 0)(V, M);  // [outer, inner]
  REQUIRE(got.shape() == Shape{4, 3});
  for (std::int64_t o = 0; o < 4; ++o)
    for (std::int64_t i = 0; i < 3; ++i)
      CHECK(got.at<double>({o, i}) == Approx(f(at(at(V, 0, o), 0, i), at(M, 0, o)).item()).epsilon(1e-13));

  // Outer over axis 2 of W, inner over axis 1 (axis 1 of the per-example [5, 3]), out_axes 1 inside
  // and 0 outside: [outer, 5, inner].
  auto inner2 = vmap([](const Tensor& w) { return w * 2.0 + 1.0; }, {1}, 1);
  const Tensor got2 = vmap(inner2, {2}, 0)(W);
  REQUIRE(got2.shape() == Shape{4, 5, 3});
  require_close(got2, transpose(W, {2, 0, 1}) * 2.0 + 1.0, 0);

  // Batched results by default, the inner axis first per example.
  const Tensor batched = vmap(vmap([](const Tensor& v) { return sum(v * v); }))(V);
  REQUIRE(batched.is_batched());
  require_close(unbatch(batched), sum(V * V, {2}), 1e-14);
}

TEST_CASE("nested vmap of gradients and Hessians, eagerly and under jit", "[vmap][nested]") {
  const Tensor V = randn({3, 2, 4}, 4), M = randn({3, 4, 4}, 5);
  auto per = [](const Tensor& v, const Tensor& m) { return f(v, m); };
  auto g = vmap(vmap(grad(per), {0, not_mapped}));
  const Tensor got = unbatch(g(V, M));  // [3, 2, 4]
  for (std::int64_t o = 0; o < 3; ++o)
    for (std::int64_t i = 0; i < 2; ++i)
      require_close(at(at(got, 0, o), 0, i), grad(per)(at(at(V, 0, o), 0, i), at(M, 0, o)), 1e-12);

  // vmap(hessian) inside a vmap, jitted over batched arguments: one trace for every outer size.
  auto h = jit(vmap(vmap(hessian(per), {0, not_mapped})));
  for (std::int64_t B : {3, 2}) {
    const Tensor hv = unbatch(h(as_batch(slice(V, 0, 0, B)), as_batch(slice(M, 0, 0, B))));  // [B, 2, 4, 4]
    for (std::int64_t o = 0; o < B; ++o)
      for (std::int64_t i = 0; i < 2; ++i)
        require_close(at(at(hv, 0, o), 0, i), hessian(per)(at(at(V, 0, o), 0, i), at(M, 0, o)), 1e-11);
  }
  CHECK(h.counters().traces == 1);

  // The gradient of a loss over both levels reaches a parameter shared by all.
  const Tensor theta = Tensor::from_vector({0.3, -0.2, 0.5, 0.1}, {4});
  auto loss = [&](const Tensor& t) { return sum(vmap(vmap([&](const Tensor& v) { return sum(exp(v * t)); }))(V)); };
  auto looped = [&](const Tensor& t) {
    Tensor total = zeros({});
    for (std::int64_t o = 0; o < 3; ++o)
      for (std::int64_t i = 0; i < 2; ++i) total = total + sum(exp(at(at(V, 0, o), 0, i) * t));
    return total;
  };
  require_close(grad(loss)(theta), grad(looped)(theta), 1e-12);
}

TEST_CASE("nested vmap errors", "[vmap][nested][errors]") {
  const Tensor V = randn({2, 3, 4}, 6);
  CHECK_THAT(
      error_of([&] {
        vmap([](const Tensor& v) { return vmap([](const Tensor& a, const Tensor& b) { return a + b; })(v, v.t()); })(V);
      }),
      Catch::Contains("mapped axes have different sizes (3 for an earlier argument, 4 for argument 1)"));
  CHECK_THAT(
      error_of([&] { vmap([](const Tensor& v) { return vmap([](const Tensor& s) { return s; })(sum(v)); })(V); }),
      Catch::Contains("vmap: argument 0 is a scalar"));
}

TEST_CASE("nested vmap over an axis of size 0 gives results of size 0, as JAX", "[vmap][nested]") {
  const Tensor V = randn({2, 3, 4}, 6);
  int calls = 0;
  const auto [a, b] = vmap([&](const Tensor& v) {
    return vmap(
        [&](const Tensor& s) {
          ++calls;
          return std::pair{exp(s) * 2.0, sum(s)};
        },
        {0}, 0)(slice(v, 0, 0, 0));
  })(V);
  CHECK(calls == 1);  // traced once, for the shapes
  CHECK(a.shape() == Shape{0, 4});
  CHECK(b.shape() == Shape{0});
  CHECK(unbatch(a).shape() == Shape{2, 0, 4});
}
