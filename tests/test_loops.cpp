// scan, fori_loop, while_loop and cond (autodiff/loops.hpp): values against unrolled C++ loops of
// the same ops, gradients against central finite differences and against the unrolled loop's
// gradient, under jit (one trace for every batch size) and vmap (against loops over examples), and
// the errors.
#include <functional>
#include <string>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

// One step of a small nonlinear recurrence: a damped rotation driven by x, with a parameter theta
// that the body reads from outside (a capture), and a y per step.
std::pair<Tensor, Tensor> step(const Tensor& theta, const Tensor& c, const Tensor& x) {
  const Tensor a = slice(theta, 0, 0, 1), b = slice(theta, 0, 1, 2);
  const Tensor c0 = slice(c, 0, 0, 1), c1 = slice(c, 0, 1, 2);
  const Tensor next = concatenate({tanh(a * c0 - b * c1) + x * 0.5, sin(b * c0 + a * c1) * exp(-0.1 * x)}, 0);
  return {next, sum(next * next) * a};
}

Tensor scan_loss(const Tensor& theta, const Tensor& init, const Tensor& xs) {
  auto [carry, ys] = scan([&](const Tensor& c, const Tensor& x) { return step(theta, c, x); }, init, xs);
  return sum(carry * carry) + sum(ys * ys) * 0.1;
}

Tensor unrolled_loss(const Tensor& theta, const Tensor& init, const Tensor& xs) {
  Tensor c = init;
  std::vector<Tensor> ys;
  for (std::int64_t t = 0; t < xs.shape(0); ++t) {
    auto [next, y] = step(theta, c, reshape(slice(xs, 0, t, t + 1), {1}));
    c = next;
    ys.push_back(y);
  }
  return sum(c * c) + sum(stack(ys) * stack(ys)) * 0.1;
}

}  // namespace

TEST_CASE("scan equals the unrolled loop, and so do its gradients", "[loops]") {
  const Tensor theta = Tensor::from_vector({0.9, 0.4}, {2}), init = Tensor::from_vector({0.3, -0.2}, {2});
  const Tensor xs = randn({7, 1}, 11);
  require_close(scan_loss(theta, init, xs), unrolled_loss(theta, init, xs), 1e-14);
  const auto g = grad(scan_loss, {0, 1, 2})(theta, init, xs);
  const auto u = grad(unrolled_loss, {0, 1, 2})(theta, init, xs);
  for (int i = 0; i < 3; ++i) require_close(g[i], u[i], 1e-12);
  check_gradients([](const std::vector<Tensor>& a) { return scan_loss(a[0], a[1], a[2]); }, {theta, init, xs});
}

TEST_CASE("scan under jit traces once for every batch size, and under vmap equals a loop over examples", "[loops]") {
  const Tensor init = Tensor::from_vector({0.3, -0.2}, {2}), xs = randn({6, 1}, 12);
  const Tensor thetas = randn({5, 2}, 13) * 0.3 + 0.7;
  auto per_example = [&](const Tensor& theta) { return scan_loss(theta, init, xs); };
  auto step_fn = jit(vmap(value_and_grad(per_example)));
  for (std::int64_t B : {5, 3}) {
    const Tensor batch = slice(thetas, 0, 0, B);
    auto [values, grads] = step_fn(as_batch(batch));
    REQUIRE(values.is_batched());
    for (std::int64_t b = 0; b < B; ++b) {
      const Tensor theta = reshape(slice(batch, 0, b, b + 1), {2});
      CHECK(unbatch(values).at<double>({b}) == Approx(unrolled_loss(theta, init, xs).item()).epsilon(1e-13));
      require_close(reshape(slice(unbatch(grads), 0, b, b + 1), {2}), grad(unrolled_loss)(theta, init, xs), 1e-12);
    }
  }
  CHECK(step_fn.counters().traces == 1);
  // By chunks of two examples on every thread: each chunk's loop runs the body's plan on its own
  // examples, concurrently.
  {
    const JitChunkExamples chunks(2);
    auto chunked = jit(vmap(value_and_grad(per_example)));
    auto [values, grads] = chunked(as_batch(thetas));
    for (std::int64_t b = 0; b < 5; ++b) {
      const Tensor theta = reshape(slice(thetas, 0, b, b + 1), {2});
      CHECK(unbatch(values).at<double>({b}) == Approx(unrolled_loss(theta, init, xs).item()).epsilon(1e-13));
      require_close(reshape(slice(unbatch(grads), 0, b, b + 1), {2}), grad(unrolled_loss)(theta, init, xs), 1e-12);
    }
    CHECK(chunked.counters().chunked_calls == 1);
  }
  // Not unrolled: the traced program is as long for 60 steps as for 6.
  auto traced_ops = [&](std::int64_t T) {
    return jit(value_and_grad(scan_loss, {0}))
        .compile(Tensor::from_vector({0.9, 0.4}, {2}), init, randn({T, 1}, 19))
        .traced_ops;
  };
  CHECK(traced_ops(60) == traced_ops(6));
  // A batched carry and batched xs, the parameter shared.
  const Tensor theta = Tensor::from_vector({0.8, 0.5}, {2});
  const Tensor inits = randn({4, 2}, 14), xss = randn({4, 6, 1}, 15);
  auto loss = jit(vmap([&](const Tensor& c0, const Tensor& x) { return scan_loss(theta, c0, x); }));
  const Tensor got = unbatch(loss(as_batch(inits), as_batch(xss)));
  for (std::int64_t b = 0; b < 4; ++b)
    CHECK(got.at<double>({b}) ==
          Approx(unrolled_loss(theta, reshape(slice(inits, 0, b, b + 1), {2}), reshape(slice(xss, 0, b, b + 1), {6, 1}))
                     .item())
              .epsilon(1e-13));
}

TEST_CASE("scan's second derivatives: a Hessian through the loop equals the unrolled loop's", "[loops]") {
  const Tensor theta = Tensor::from_vector({0.9, 0.4}, {2}), init = Tensor::from_vector({0.3, -0.2}, {2});
  const Tensor xs = randn({5, 1}, 16);
  const Tensor h = hessian([&](const Tensor& t) { return scan_loss(t, init, xs); })(theta);
  const Tensor u = hessian([&](const Tensor& t) { return unrolled_loss(t, init, xs); })(theta);
  require_close(h, u, 1e-11);
  const Tensor hj = jit(hessian([&](const Tensor& t) { return scan_loss(t, init, xs); }))(theta);
  require_close(hj, u, 1e-11);
}

TEST_CASE("reverse over reverse through loops whose body captures a batched value", "[loops]") {
  // Per element: fori_loop from x of c -> c x twice is x^3, whose second derivative is 6x; from 1,
  // x^2 (2). The scan's carry c -> c a x_t (xs 1, 2, 0.5) ends at a^3 with ys a, 2a^2, a^3, so the
  // carry's sum plus the ys' is a + 2a^2 + 2a^3 per element, whose second derivative is 4 + 12a.
  auto cube = [](const Tensor& x) {
    return fori_loop(
        0, 2, [x](const Tensor&, const Tensor& c) { return c * x; }, x);
  };
  auto square = [](const Tensor& x) {
    return fori_loop(
        0, 2, [x](const Tensor&, const Tensor& c) { return c * x; }, ones({2}));
  };
  const Tensor xs = Tensor::from_vector({1.0, 2.0, 0.5}, {3, 1});
  auto scanned = [xs](const Tensor& a) {
    auto [carry, ys] = scan(
        [a](const Tensor& c, const Tensor& x) {
          const Tensor next = c * a * x;
          return std::pair{next, next};
        },
        ones({2}), xs);
    return sum(carry) + sum(ys);
  };
  auto second = [](auto f) {
    return grad([f](const Tensor& y) { return sum(grad([f](const Tensor& z) { return sum(f(z)); })(y)); });
  };
  const Tensor X = Tensor::from_vector({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {3, 2});  // B = 3 examples of 2
  const Tensor cubes = unbatch(second(cube)(as_batch(X)));
  require_close(cubes, X * 6.0, 1e-12);
  require_close(unbatch(vmap(second(cube))(X)), X * 6.0, 1e-12);
  require_close(unbatch(second(scanned)(as_batch(X))), X * 12.0 + 4.0, 1e-12);
  auto square_sum = [&](const Tensor& z) { return sum(square(z)); };
  const Tensor h_square = unbatch(vmap(hessian(square_sum))(X));
  const Tensor h_scan = unbatch(vmap(hessian(scanned))(X));
  require_close(unbatch(jit(vmap(hessian(scanned)))(as_batch(X))), h_scan, 1e-12);
  for (std::int64_t b = 0; b < 3; ++b) {
    const Tensor x = reshape(slice(X, 0, b, b + 1), {2});
    const auto example = [b](const Tensor& t, const Shape& shape) { return reshape(slice(t, 0, b, b + 1), shape); };
    require_close(example(h_square, {2, 2}), eye(2) * 2.0, 1e-12);
    require_close(example(h_scan, {2, 2}), diag(x * 12.0 + 4.0), 1e-12);
    // The same as one unbatched call per example.
    require_close(example(cubes, {2}), second(cube)(x), 1e-12);
    require_close(example(h_square, {2, 2}), hessian(square_sum)(x), 1e-12);
    require_close(example(h_scan, {2, 2}), hessian(scanned)(x), 1e-12);
  }
}

TEST_CASE("scan with checkpoints equals the plain scan, in values and first and second derivatives", "[loops]") {
  const Tensor theta = Tensor::from_vector({0.9, 0.4}, {2}), init = Tensor::from_vector({0.3, -0.2}, {2});
  const Tensor xs = randn({7, 1}, 14);
  using Loss = std::function<Tensor(const Tensor&)>;
  auto loss = [&](ScanOptions options) -> Loss {
    return [&, options](const Tensor& th) {
      auto [carry, ys] = scan([&](const Tensor& c, const Tensor& x) { return step(th, c, x); }, init, xs, options);
      return sum(carry * carry) + sum(ys * ys) * 0.1;
    };
  };
  // The index form: each step reads its own index, so a segment's shifted indices are checked too.
  auto indexed = [&](ScanOptions options) -> Loss {
    return [&, options](const Tensor& th) {
      auto [carry, ys] = scan(
          [&](const Tensor& c, const Tensor& i) {
            const Tensor next = tanh(c * th + astype(i, DType::f64) * 0.1);
            return std::pair{next, sum(next) * astype(i, DType::f64)};
          },
          init, 7, options);
      return sum(carry) + sum(ys * ys);
    };
  };
  for (const bool reverse : {false, true})
    for (const std::int64_t every : {1, 2, 3, 7, 10}) {  // 3: two segments and one step left
      INFO("reverse " << reverse << ", checkpoint_every " << every);
      const ScanOptions plain{.reverse = reverse}, checkpointed{.reverse = reverse, .checkpoint_every = every};
      for (auto [f, g] :
           {std::pair{loss(plain), loss(checkpointed)}, std::pair{indexed(plain), indexed(checkpointed)}}) {
        require_close(g(theta), f(theta), 1e-14);
        require_close(grad(g)(theta), grad(f)(theta), 1e-13);
        require_close(hessian(g)(theta), hessian(f)(theta), 1e-11);
      }
    }
  // Under jit and vmap: one trace, and each example's gradient equals the plain scan's.
  const Tensor thetas = randn({4, 2}, 15) * 0.3 + 0.7;
  auto step_fn = jit(vmap(value_and_grad(loss({.checkpoint_every = 3}))));
  const auto [values, grads] = step_fn(as_batch(thetas));
  const auto [plain_values, plain_grads] = vmap(value_and_grad(loss({})))(thetas);
  require_close(values, plain_values, 1e-13);
  require_close(grads, plain_grads, 1e-12);
  CHECK_THAT(error_of([&] { loss({.checkpoint_every = -2})(theta); }),
             Catch::Matchers::Contains("scan: checkpoint_every is -2; it must be positive"));
}

TEST_CASE("scan: structures, the index form, reverse, and a scan inside a scan", "[loops]") {
  const Tensor a = Tensor::from_vector({1.0, 2.0, 3.0}, {3}), m = randn({4, 2, 2}, 17);
  // Carry {vector, matrix}; xs {[4, 2, 2], [4]}; ys {[4, 2], scalar per step}.
  using Carry = std::pair<Tensor, Tensor>;
  const Tensor w = Tensor::from_vector({0.5, -1.0, 2.0, 0.25}, {4});
  auto body = [&](const Carry& c, const std::pair<Tensor, Tensor>& x) {
    const Tensor v = slice(c.first, 0, 0, 2) * x.second + matmul(x.first, slice(c.first, 0, 1, 3));
    const Tensor mm = matmul(c.second, x.first) * 0.5;
    return std::pair<Carry, std::pair<Tensor, Tensor>>{{concatenate({v, slice(c.first, 0, 2, 3)}, 0), mm},
                                                       {v, sum(mm)}};
  };
  const Carry init{a, eye(2)};
  auto [carry, ys] = scan(body, init, std::pair<Tensor, Tensor>{m, w});
  Carry c = init;
  for (std::int64_t t = 0; t < 4; ++t) {
    auto [next, y] = body(c, {reshape(slice(m, 0, t, t + 1), {2, 2}), reshape(slice(w, 0, t, t + 1), {})});
    require_close(reshape(slice(ys.first, 0, t, t + 1), {2}), y.first, 1e-14);
    require_close(reshape(slice(ys.second, 0, t, t + 1), {}), y.second, 1e-14);
    c = next;
  }
  require_close(carry.first, c.first, 1e-14);
  require_close(carry.second, c.second, 1e-14);
  CHECK(ys.second.shape() == Shape{4});

  // The index form, and reverse: ys stay in step order, the carry sees the steps last to first.
  auto [total, idx] = scan(
      [](const Tensor& s, const Tensor& i) {
        return std::pair{s * 2.0 + astype(i, DType::f64), s};
      },
      Tensor::scalar(0.0), 4, /*reverse=*/true);
  // Steps i = 3, 2, 1, 0: s = 3, 8, 17, 34; ys[i] is s before step i.
  CHECK(total.item() == 34.0);
  require_close(idx, {17.0, 8.0, 3.0, 0.0}, 0);

  // A scan inside a scan's body, reading the outer body's argument and a captured parameter.
  const Tensor p = Tensor::from_vector({0.7}, {1});
  auto nested = [&](const Tensor& theta) {
    auto outer = [&](const Tensor& c, const Tensor& x) {
      auto inner = [&](const Tensor& d, const Tensor& i) {
        return std::pair{tanh(d * theta + c * astype(i, DType::f64)), std::tuple<>{}};
      };
      const Tensor d = scan(inner, x, 3).first;
      return std::pair{c + d * theta, d};
    };
    auto [c, ys2] = scan(outer, Tensor::from_vector({0.1}, {1}), randn({4, 1}, 18));
    return sum(c) + sum(ys2 * ys2);
  };
  auto nested_unrolled = [&](const Tensor& theta) {
    Tensor c = Tensor::from_vector({0.1}, {1});
    const Tensor xs = randn({4, 1}, 18);
    Tensor ys2;
    std::vector<Tensor> all;
    for (std::int64_t t = 0; t < 4; ++t) {
      Tensor d = reshape(slice(xs, 0, t, t + 1), {1});
      for (std::int64_t i = 0; i < 3; ++i) d = tanh(d * theta + c * static_cast<double>(i));
      c = c + d * theta;
      all.push_back(d);
    }
    return sum(c) + sum(stack(all) * stack(all));
  };
  require_close(nested(p), nested_unrolled(p), 1e-14);
  require_close(grad(nested)(p), grad(nested_unrolled)(p), 1e-12);
  require_close(jit(grad(nested))(p), grad(nested_unrolled)(p), 1e-12);
}

TEST_CASE("fori_loop, while_loop and cond", "[loops]") {
  // fori_loop: Horner's rule for a polynomial with captured coefficients, differentiated in both.
  const Tensor coef = Tensor::from_vector({1.0, -2.0, 0.5, 3.0}, {4});
  auto horner = [](const Tensor& x, const Tensor& c) {
    return fori_loop(
        0, 4, [&](const Tensor& i, const Tensor& acc) { return acc * x + take(c, reshape(i, {1})); }, zeros({1}));
  };
  const Tensor x = Tensor::from_vector({1.5}, {1});
  require_close(horner(x, coef), {((1.0 * 1.5 - 2.0) * 1.5 + 0.5) * 1.5 + 3.0}, 1e-14);
  check_gradients([&](const std::vector<Tensor>& v) { return horner(v[0], v[1]); }, {x, coef});
  CHECK(fori_loop(
            3, 3, [](const Tensor&, const Tensor& v) { return v * 2.0; }, x)
            .item() == 1.5);

  // while_loop: Newton's iteration for sqrt, to a tolerance; batched examples take different
  // numbers of steps, and each stops at its own.
  auto newton = [](const Tensor& a) {
    auto state = std::pair<Tensor, Tensor>{a, a};  // {estimate, target}
    auto done = while_loop(
        [](const std::pair<Tensor, Tensor>& s) { return greater(abs(s.first * s.first - s.second), full({}, 1e-12)); },
        [](const std::pair<Tensor, Tensor>& s) {
          return std::pair{(s.first + s.second / s.first) * 0.5, s.second};
        },
        state);
    return done.first;
  };
  require_close(newton(Tensor::scalar(2.0)), {std::sqrt(2.0)}, 1e-12);
  const Tensor targets = Tensor::from_vector({1.0, 4.0, 1e6, 0.01}, {4});
  const Tensor roots = unbatch(jit(vmap(newton))(as_batch(targets)));
  require_close(roots, {1.0, 2.0, 1000.0, 0.1}, 1e-10);
  const std::string no_grad = error_of([&] { grad([&](const Tensor& a) { return newton(a); })(Tensor::scalar(2.0)); });
  CHECK_THAT(no_grad, Catch::Matchers::Contains("while_loop: cannot be differentiated"));
  // Forward mode needs no stored carries: the tangent iterates with the estimate, to d sqrt(a) / da.
  const auto [root, slope] = jvp(newton, {Tensor::scalar(2.0)}, {Tensor::scalar(1.0)});
  require_close(root, {std::sqrt(2.0)}, 1e-12);
  require_close(slope, {0.5 / std::sqrt(2.0)}, 1e-10);
  // (At a = 1 the loop takes no step: the result is a itself, of slope 1.)
  const Tensor slopes =
      unbatch(jit(vmap([&](const Tensor& a) { return jvp(newton, {a}, {ones({})}).second; }))(as_batch(targets)));
  require_close(slopes, {1.0, 0.25, 0.0005, 5.0}, 1e-9);

  // cond: one branch for a concrete predicate, a selection for a traced or batched one.
  auto branchy = [](const Tensor& v) {
    return cond(
        greater(sum(v), zeros({})), [](const Tensor& u) { return u * 2.0; }, [](const Tensor& u) { return -u; }, v);
  };
  require_close(branchy(Tensor::from_vector({1.0, 2.0}, {2})), {2.0, 4.0}, 0);
  require_close(branchy(Tensor::from_vector({-1.0, -2.0}, {2})), {1.0, 2.0}, 0);
  const Tensor vs = Tensor::from_vector({1.0, 2.0, -1.0, -2.0}, {2, 2});
  require_close(unbatch(vmap(branchy)(vs)), {2.0, 4.0, 1.0, 2.0}, 0);
  require_close(unbatch(jit(vmap(branchy))(as_batch(vs))), {2.0, 4.0, 1.0, 2.0}, 0);
  require_close(jit(grad([&](const Tensor& v) { return sum(branchy(v)); }))(Tensor::from_vector({-1.0, 3.0}, {2})),
                {2.0, 2.0}, 0);
}

TEST_CASE("loops refuse bad bodies with errors that name the loop", "[loops][errors]") {
  const Tensor init = zeros({2});
  CHECK_THAT(error_of([&] {
               scan(
                   [](const Tensor& c, const Tensor& x) {
                     return std::pair{concatenate({c, x}, 0), c};
                   },
                   init, zeros({3, 1}));
             }),
             Catch::Matchers::Contains("scan: the body returns carry 0 of shape [3]; expected [2]"));
  CHECK_THAT(error_of([&] {
               scan([](const Tensor& c, const Tensor&) { return std::pair{c, c}; }, init, -1);
             }),
             Catch::Matchers::Contains("scan: a loop of -1 steps"));
  CHECK_THAT(error_of([&] {
               scan([](const Tensor& c, const Tensor& x) { return std::pair{c, x}; }, init, zeros({3, 1}, DType::f32));
             }),
             Catch::Matchers::Contains("scan: xs 0 is float32"));
  CHECK_THAT(error_of([&] {
               scan(
                   [](const Tensor& c, const std::pair<Tensor, Tensor>& x) {
                     return std::pair{c, x.first};
                   },
                   init, std::pair<Tensor, Tensor>{zeros({3}), zeros({4})});
             }),
             Catch::Matchers::Contains("scan: xs 1 has 4 steps along its leading axis, xs 0 has 3"));
  CHECK_THAT(error_of([&] { while_loop([](const Tensor& c) { return c; }, [](const Tensor& c) { return c; }, init); }),
             Catch::Matchers::Contains("while_loop: the predicate has shape [2]"));
  CHECK_THAT(error_of([&] {
               fori_loop(
                   0, 2, [](const Tensor&, const Tensor& c) { return c; }, Tensor::from_ints({1}, {1}));
             }),
             Catch::Matchers::Contains("fori_loop: the carry's first tensor is int64"));
}
