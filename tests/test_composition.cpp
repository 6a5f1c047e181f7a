// Transforms composed where a function closes over values of an enclosing transform: loop bodies that take
// gradients of closures, vmaps inside loop bodies, bodies returning captured values, cond's branches. Each case is a
// defect found by porting JAX's tests or by random programs (issue 45), checked against the same program unrolled by
// hand, against central differences, and eager against jit.
#include <cmath>
#include <string>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::require_close;

namespace {

// x_{t+1} = x_t - 0.1 * grad_x(sum(x * p))(x_t) = x_t - 0.1 p: a body whose gradient closes over the parameter.
Tensor descend(const Tensor& p, const Tensor& x) {
  return x - 0.1 * grad([&](const Tensor& y) { return sum(y * p); })(x);
}

Tensor loop_loss(const Tensor& p, std::int64_t steps) {
  const Tensor x0 = Tensor::from_vector({1, 2, 3}, {3});
  const Tensor x = fori_loop(
      0, steps, [&](const Tensor&, const Tensor& x) { return descend(p, x); }, x0);
  return sum(sin(1.0 - x));
}

Tensor unrolled_loss(const Tensor& p, std::int64_t steps) {
  Tensor x = Tensor::from_vector({1, 2, 3}, {3});
  for (std::int64_t t = 0; t < steps; ++t) x = descend(p, x);
  return sum(sin(1.0 - x));
}

double central_difference(const std::function<Tensor(const Tensor&)>& f, double x) {
  const double h = 1e-6;
  return (f(Tensor::scalar(x + h)).item() - f(Tensor::scalar(x - h)).item()) / (2 * h);
}

}  // namespace

TEST_CASE("a loop body that takes the gradient of a closure over the parameter (JAX's testIssue711)",
          "[composition][loops]") {
  const Tensor p = Tensor::scalar(0.25);
  const auto loop = [](const Tensor& q) { return loop_loss(q, 75); };
  const auto unrolled = [](const Tensor& q) { return unrolled_loss(q, 75); };
  const double reference = central_difference(unrolled, 0.25);
  CHECK(reference == Approx(10.0024576).epsilon(1e-6));  // JAX's figure
  require_close(grad(loop)(p), grad(unrolled)(p), 1e-12);
  CHECK(grad(loop)(p).item() == Approx(reference).epsilon(1e-7));
  CHECK(jit(grad(loop))(p).item() == Approx(reference).epsilon(1e-7));
  CHECK(grad(jit(loop))(p).item() == Approx(reference).epsilon(1e-7));
  // Forward mode, and forward over reverse.
  const auto [value, tangent] = jvp(loop, {p}, {Tensor::scalar(1.0)});
  require_close(value, loop(p), 1e-15);
  CHECK(tangent.item() == Approx(reference).epsilon(1e-7));
  require_close(hessian(loop)(p), hessian(unrolled)(p), 1e-10);
  // The one-step scan of the issue, with a vector parameter: -0.1 each.
  const auto one_step = [](const Tensor& q) {
    const auto [x, ys] = scan(
        [&](const Tensor& c, const Tensor&) {
          return std::pair{descend(q, c), std::tuple<>{}};
        },
        ones({3}), std::int64_t{1});
    return sum(x);
  };
  require_close(grad(one_step)(Tensor::from_vector({1, 2, 3}, {3})), std::vector<double>{-0.1, -0.1, -0.1}, 1e-15);
}

TEST_CASE("a loop body that returns a value it closes over as its y", "[composition][loops]") {
  // ys = [w, w], c = [2, 2]: d/dp0 of sum(ys) + sum(c) = 2 * 2.
  const auto G = [](const Tensor& p) {
    const Tensor w = slice(p, 0, 0, 1) * 2.0;
    const auto [c, ys] = scan(
        [&](const Tensor& c, const Tensor&) {
          return std::pair{c + 1.0, w};
        },
        zeros({2}), std::int64_t{2});
    return sum(ys) + sum(c);
  };
  const Tensor p = Tensor::from_vector({0.3, -0.7, 0.2}, {3});
  require_close(grad(G)(p), std::vector<double>{4, 0, 0}, 1e-15);
  require_close(jit(grad(G))(p), std::vector<double>{4, 0, 0}, 1e-15);
  require_close(jit(G)(p), G(p), 1e-15);
}

TEST_CASE("vmap inside a loop body: its batch stays inside", "[composition][loops][vmap]") {
  const Tensor p = Tensor::from_vector({0.3, -0.7, 0.2, 0.9}, {4});
  SECTION("a dead vmap of a value that ignores the batch does not batch the loop") {
    const auto H = [](const Tensor& q) {
      const auto [c, ys] = scan(
          [&](const Tensor& c, const Tensor&) {
            (void)vmap([&](const Tensor&) { return reshape(slice(q, 0, 1, 2), {1, 1}); }, {0}, 0)(q);
            return std::pair{c + 1.0, std::tuple<>{}};
          },
          zeros({3}), std::int64_t{1});
      return c;
    };
    const Tensor c = H(p);
    CHECK_FALSE(c.is_batched());
    require_close(c, std::vector<double>{1, 1, 1}, 0);
    require_close(jit(H)(p), std::vector<double>{1, 1, 1}, 0);
  }
  SECTION("a vmap over a reshaped parameter, with an unused read of the parameter, under grad and jvp") {
    const auto F = [](const Tensor& q) {
      const Tensor v = reshape(q, {4, 1});
      const auto [c, ys] = scan(
          [&](const Tensor& c, const Tensor&) {
            const Tensor mapped = vmap(
                [&](const Tensor& a) {
                  (void)slice(q, 0, 0, 2);
                  return a;
                },
                {0}, 0)(v);
            return std::pair{c, reshape(mapped, {4})};
          },
          q, std::int64_t{3});
      return sum(q) + 0.0 * sum(c) + sum(ys) * 0.5;
    };
    // d/dq: 1 + 0.5 * 3 per element.
    require_close(grad(F)(p), std::vector<double>{2.5, 2.5, 2.5, 2.5}, 1e-15);
    require_close(jvp(F, {p}, {ones({4})}).second, std::vector<double>{10.0}, 1e-14);
    require_close(jit(grad(F))(p), std::vector<double>{2.5, 2.5, 2.5, 2.5}, 1e-15);
  }
}

TEST_CASE("cond: no derivative through the branch not taken, eager, jitted and vmapped (JAX's testCondGradVmapNan)",
          "[composition][cond]") {
  const Tensor eps = Tensor::scalar(1e-3);
  // The branch not taken at 0 is sqrt, whose derivative there is infinite.
  const auto f = [eps](const Tensor& x) {
    return cond(
        less(x, eps), [](const Tensor& y) { return 1e-3 * y; }, [](const Tensor& y) { return sqrt(y); }, x);
  };
  const Tensor zero = Tensor::scalar(0.0);
  CHECK(grad(f)(zero).item() == 1e-3);
  CHECK(jit(grad(f))(zero).item() == 1e-3);
  CHECK(grad(jit(f))(zero).item() == 1e-3);
  CHECK(jvp(jit(f), {zero}, {Tensor::scalar(1.0)}).second.item() == 1e-3);
  // Where the other branch is taken, its derivative: 1 / (2 sqrt(4)).
  CHECK(jit(grad(f))(Tensor::scalar(4.0)).item() == 0.25);
  // Under vmap, the predicate batched: the branches close over x rather than take it as an operand.
  const auto safe = [eps](const Tensor& x) {
    return cond(
        less(x, eps), [&] { return eps + 0.0 * x; }, [&] { return sqrt(x); });
  };
  const auto total = [&](const Tensor& xs) { return sum(vmap(safe)(xs)); };
  const Tensor xs = Tensor::from_vector({0, 0, 4, 0, 9}, {5});
  const std::vector<double> expected{0, 0, 0.25, 0, 1.0 / 6};
  require_close(grad(total)(xs), expected, 1e-15);
  require_close(jit(grad(total))(xs), expected, 1e-15);
  require_close(vmap(grad(safe))(xs), expected, 1e-15);
  // Second derivatives stay finite too: d2/dx2 sqrt(x) = -1 / (4 x^1.5).
  const Tensor h = hessian([&](const Tensor& x) { return sum(vmap(safe)(x)); })(xs);
  for (const double v : h.to_vector<double>()) CHECK(std::isfinite(v));
  CHECK(h.to_vector<double>()[2 * 5 + 2] == Approx(-1.0 / 32));
}

TEST_CASE("cond: a tensor both branches return unchanged is the result as it is (JAX's forwarding)",
          "[composition][cond]") {
  // Under vmap the predicate is batched; the unmapped y stays unbatched, where a select would batch it.
  const Tensor y = Tensor::scalar(3.0), one = Tensor::scalar(1.0);
  const auto f = [&](const Tensor& x) {
    const auto [a, b] = cond(
        greater(x, one),
        [&] {
          return std::pair{x * 2.0, y};
        },
        [&] {
          return std::pair{x * 3.0, y};
        });
    CHECK(!b.is_batched());
    CHECK(b.impl_ptr() == y.impl_ptr());
    return a + b;
  };
  require_close(unbatch(vmap(f)(Tensor::from_vector({0, 1, 2}, {3}))), std::vector<double>{3, 6, 7}, 1e-15);
  // Different tensors of equal values are selected, as before.
  const auto g = [&](const Tensor& x) {
    return cond(
        greater(x, one), [&] { return x * 1.0; }, [&] { return x * 1.0; });
  };
  const Tensor picked = unbatch(vmap(g)(Tensor::from_vector({0, 2}, {2})));
  require_close(picked, std::vector<double>{0, 2}, 0.0);
}

TEST_CASE("cond: a branch reading an outer parameter gets its gradient only where taken", "[composition][cond]") {
  // f(p) = sum over examples of cond(x > 0, p0 * x, log(p1 - x)): the false branch is NaN where x >= p1 (not taken).
  const Tensor xs = Tensor::from_vector({-1, 2, 3, -0.5}, {4});
  const auto loss = [&](const Tensor& p) {
    const Tensor p0 = slice(p, 0, 0, 1), p1 = slice(p, 0, 1, 2);
    return sum(vmap([&](const Tensor& x) {
      return cond(
          greater(x, zeros({})), [&] { return reshape(p0 * x, {}); }, [&] { return reshape(log(p1 - x), {}); });
    })(xs));
  };
  const Tensor p = Tensor::from_vector({1.5, 0.5}, {2});
  // d/dp0 = 2 + 3, d/dp1 = 1 / (0.5 + 1) + 1 / (0.5 + 0.5).
  const std::vector<double> expected{5, 1 / 1.5 + 1};
  require_close(grad(loss)(p), expected, 1e-14);
  require_close(jit(grad(loss))(p), expected, 1e-14);
  CHECK(std::isfinite(loss(p).item()));
}

TEST_CASE("jit of a function with two vmaps over plain tensors of different sizes equals eager", "[composition][jit]") {
  const Tensor C43 = reshape(linspace(0, 11, 12), {4, 3});
  const auto K = [&](const Tensor& p) {
    const Tensor s = sum(p);
    const Tensor a = vmap([&](const Tensor& r) { return maximum(r, s); }, {0}, 0)(C43);
    const Tensor b = vmap([](const Tensor& r) { return r * 2.0; }, {0}, 0)(reshape(slice(p, 0, 0, 3), {3, 1}));
    return sum(a) + sum(b);
  };
  const Tensor p = Tensor::from_vector({0.3, -0.7, 0.2, 0.9}, {4});
  auto jk = jit(K);
  require_close(jk(p), K(p), 1e-15);
  require_close(jk(p), K(p), 1e-15);  // the cached entry
  require_close(jit(grad(K))(p), grad(K)(p), 1e-15);
  CHECK_THAT(jk.explain(p), Catch::Contains("op by op") && Catch::Contains("(4 and 3)"));
}

TEST_CASE("jit of jacrev through vmaps of sizes 2 and 1 equals eager (the composition fuzzer's seed 6692)",
          "[composition][jit]") {
  // The pullbacks of the two vmaps leave batched constants of both sizes in jacrev's plan, which jit refused at the
  // call; a plan has one batch size, so it runs op by op.
  const Tensor K21 = Tensor::from_vector({-0.65, -0.6, -0.89, 0.24, -0.02, 0.25}, {2, 3});
  const Tensor K22 = Tensor::from_vector({0.18, 0.24, -0.54, -0.83, -0.59, 0.08}, {2, 3});
  const auto F = [&](const Tensor& p) {
    const Tensor v13 = take(p, Tensor::from_ints({0, 2}, {2})), v14 = slice(p, 0, 0, 2);
    const Tensor v19 = vmap([&](const Tensor&, const Tensor&) { return mean(p); }, {0, not_mapped}, 0)(v14, v14);
    return vmap(
        [&](const Tensor& r) {
          return matmul(v19, K21) - (matmul(r, K22) - slice(concatenate({v14, v14}), 0, 0, 3));
        },
        {0}, 0)(reshape(v13, {1, 2}));
  };
  const Tensor x = Tensor::from_vector({0.614122, 0.834586, 0.232768}, {3});
  const Tensor expected = jacrev(F)(x);
  REQUIRE(expected.shape() == Shape{1, 3, 3});
  require_close(jit(jacrev(F))(x), expected.to_vector<double>(), 1e-14);
  // F is linear in p: its Jacobian's column j is F's change along the unit vector e_j.
  const std::vector<double> e = expected.to_vector<double>();
  for (std::int64_t j = 0; j < 3; ++j) {
    std::vector<double> step(3, 0.0);
    step[static_cast<std::size_t>(j)] = 1;
    const std::vector<double> change = (F(x + Tensor::from_vector(step, {3})) - F(x)).to_vector<double>();
    for (std::size_t i = 0; i < 3; ++i) CHECK(std::abs(e[i * 3 + static_cast<std::size_t>(j)] - change[i]) < 1e-12);
  }
}

TEST_CASE(
    "a scan of no steps gives the carry and no ys, eager, jitted and differentiated (JAX's testForiLoopIssue8152)",
    "[composition][loops]") {
  const auto run = [](const Tensor& c0, const Tensor& xs) {
    return scan([](const Tensor& c, const Tensor& x) { return std::pair{c + sum(x), x * 2.0}; }, c0, xs);
  };
  const Tensor c0 = Tensor::scalar(1.5), xs = zeros({0, 3});
  const auto [carry, ys] = run(c0, xs);
  CHECK(carry.item() == 1.5);
  CHECK(ys.shape() == Shape{0, 3});
  const auto [jc, jys] = jit(run)(c0, xs);
  CHECK(jc.item() == 1.5);
  CHECK(jys.shape() == Shape{0, 3});
  CHECK(grad([&](const Tensor& c) { return run(c, xs).first * 3.0; })(c0).item() == 3.0);
  // Batched carries give batched (empty) ys.
  const auto [bc, bys] = vmap([&](const Tensor& c) { return run(c, xs); })(Tensor::from_vector({1, 2}, {2}));
  CHECK(bys.is_batched());
  require_close(unbatch(bc), std::vector<double>{1, 2}, 0);
  const auto [index_carry, none] = scan(
      [](const Tensor& c, const Tensor& i) {
        return std::pair{c + astype(i, DType::f64), std::tuple<>{}};
      },
      c0, std::int64_t{0});
  CHECK(index_carry.item() == 1.5);
}

TEST_CASE("vmap's out_axes counts a negative axis from the end of the plain result", "[composition][vmap]") {
  const Tensor x = reshape(linspace(0, 59, 60), {3, 4, 5});
  const Tensor last = vmap([](const Tensor& t) { return t * 2.0; }, {0}, -1)(x);
  CHECK_FALSE(last.is_batched());
  CHECK(last.shape() == Shape{4, 5, 3});
  CHECK(last.at({1, 2, 0}) == 2.0 * x.at({0, 1, 2}));
  CHECK(last.at({3, 4, 2}) == 2.0 * x.at({2, 3, 4}));
  CHECK(vmap([](const Tensor& t) { return t; }, {0}, -2)(x).shape() == Shape{4, 3, 5});
  CHECK(vmap([](const Tensor& t) { return t; })(x).is_batched());  // the default keeps the batch
}

TEST_CASE("while_loop never runs its body on the state it exits with", "[composition][loops]") {
  // The body reads table[i], out of range at the exit state i = 5: a take there would raise.
  const Tensor table = linspace(0, 4, 5);
  const auto sum_table = [&](const Tensor& start) {
    const auto [i, s] = while_loop([](const std::pair<Tensor, Tensor>& c) { return less(c.first, full({}, 5.0)); },
                                   [&](const std::pair<Tensor, Tensor>& c) {
                                     const Tensor at = take(table, reshape(astype(c.first, DType::i64), {1}));
                                     return std::pair{c.first + 1.0, c.second + sum(at)};
                                   },
                                   std::pair{start, zeros({})});
    return s;
  };
  CHECK(sum_table(Tensor::scalar(0.0)).item() == 10.0);
  CHECK(jit(sum_table)(Tensor::scalar(2.0)).item() == 9.0);
  CHECK(sum_table(Tensor::scalar(7.0)).item() == 0.0);  // no step at all
  CHECK(jvp(sum_table, {Tensor::scalar(0.0)}, {Tensor::scalar(1.0)}).second.item() == 0.0);
}

TEST_CASE("a jitted function under grad, jvp and hessian runs as one op whose derivatives are traced once",
          "[composition][jit]") {
  const Tensor F = randn({6, 3}, 5);
  int traced = 0;  // runs of the jitted function's code: traces only, once a call is one op
  const auto model = [&F](const Tensor& p) {
    const Tensor K = matmul(F * square(p), F.t()) + 2.0 * eye(6);
    return logdet(cho_factor(K)) + sum(sin(p));
  };
  auto jm = jit([&](const Tensor& p) {
    ++traced;
    return model(p);
  });
  const Tensor p0 = Tensor::from_vector({0.3, -0.2, 0.5}, {3});
  for (int i = 0; i < 4; ++i) {
    const Tensor p = p0 * (1.0 + 0.1 * i);
    require_close(grad(jm)(p), grad(model)(p), 1e-12);
  }
  CHECK(traced == 2);  // the function's plan, and its pullback's
  CHECK(jm.counters().traces == 1);
  const Tensor v = Tensor::from_vector({1.0, 0.5, -2.0}, {3});
  for (int i = 0; i < 3; ++i)
    require_close(jvp(jm, {p0}, {v * double(i)}).second, jvp(model, {p0}, {v * double(i)}).second, 1e-12);
  CHECK(traced == 3);  // and its jvp's
  for (int i = 0; i < 2; ++i) require_close(hessian(jm)(p0), hessian(model)(p0), 1e-10);
  const int after_hessian = traced;
  require_close(hessian(jm)(p0 * 1.5), hessian(model)(p0 * 1.5), 1e-10);
  CHECK(traced == after_hessian);
  // Under vmap: the plan of batched arguments, as one op; several results, packed and unpacked.
  auto both = jit([&](const Tensor& p) { return std::pair{model(p), p * 3.0}; });
  const Tensor P = as_batch(randn({4, 3}, 6) * 0.3);
  const auto loss = [&](const Tensor& p) {
    const auto [value, scaled] = both(p);
    return value + sum(scaled * scaled);
  };
  const auto plain = [&](const Tensor& p) { return model(p) + sum(9.0 * p * p); };
  require_close(unbatch(vmap(grad(loss))(P)), unbatch(vmap(grad(plain))(P)), 1e-12);
  require_close(grad([&](const Tensor& q) { return batch_sum(vmap(loss)(q)); })(P),
                grad([&](const Tensor& q) { return batch_sum(vmap(plain)(q)); })(P), 1e-12);
  // A jitted function closing over the variable of the enclosing grad runs op by op: the gradient reaches it.
  const auto outer = [&](const Tensor& q) {
    auto inner = jit([&](const Tensor& x) { return sum(x * q); });
    return inner(square(q));
  };
  require_close(grad(outer)(p0), grad([](const Tensor& q) { return sum(square(q) * q); })(p0), 1e-14);
}

TEST_CASE(
    "a loop's carry and ys that nothing reads get no derivative, even where the body's is infinite (JAX drops "
    "them)",
    "[composition][loops]") {
  // The carry (a, b): a' = a p, b' = sqrt(b) p from b = 0 p, where sqrt' is infinite; the ys sqrt(b) p. Only a is
  // read: d/dp sum(a_3) = 3 p^2. A zero cotangent for b (or the ys) would give 0 x inf = NaN, and NaN for p through
  // b's start (the fuzzer's seeds 50899 and 87192).
  const auto carry_and_ys = [](const Tensor& q) {
    return scan(
        [&](const std::pair<Tensor, Tensor>& carry, const Tensor&) {
          const auto& [a, b] = carry;
          return std::pair{std::pair{a * q, sqrt(b) * q}, sqrt(b) * q};
        },
        std::pair{ones({2}), q * 0.0}, std::int64_t{3});
  };
  const auto F = [&](const Tensor& q) { return sum(carry_and_ys(q).first.first); };
  const Tensor p = Tensor::from_vector({0.5, -1.5}, {2});
  const std::vector<double> expected{3 * 0.25, 3 * 2.25};
  require_close(grad(F)(p), expected, 1e-15);
  require_close(jit(grad(F))(p), expected, 1e-15);
  require_close(grad(jit(F))(p), expected, 1e-15);
  const Tensor ps = Tensor::from_vector({0.5, -1.5, 2.0, 0.25}, {2, 2});
  require_close(vmap(grad(F))(ps), std::vector<double>{0.75, 6.75, 12.0, 0.1875}, 1e-15);
  // Reversed over xs, and a reading only a[0] (a carry read in part is read whole).
  const auto reversed_part = [](const Tensor& q) {
    const auto [c, ys] = scan(
        [&](const std::pair<Tensor, Tensor>& carry, const Tensor& x) {
          const auto& [a, b] = carry;
          return std::pair{std::pair{a * q * x, sqrt(b) * q}, sqrt(b) * q};
        },
        std::pair{ones({2}), q * 0.0}, Tensor::from_vector({1.0, 2.0, 3.0}, {3}), true);
    return slice(c.first, 0, 0, 1);
  };
  require_close(grad([&](const Tensor& q) { return sum(reversed_part(q)); })(p), std::vector<double>{6 * 3 * 0.25, 0},
                1e-14);
  // The ys read, b is read through them: JAX gives NaN there too.
  const auto reads_ys = [&](const Tensor& q) {
    const auto [c, ys] = carry_and_ys(q);
    return sum(c.first) + sum(ys);
  };
  CHECK(std::isnan(grad(reads_ys)(p).to_vector<double>()[0]));
}

TEST_CASE("a loop's carry that nothing reads still carries the derivative of the carries it feeds",
          "[composition][loops]") {
  // a' = a p + b, b' = b p, only a read: b feeds a, so b's path counts. Against the loop unrolled by hand.
  const auto body = [](const Tensor& q, const Tensor& a, const Tensor& b) { return std::pair{a * q + b, b * q}; };
  const auto looped = [&](const Tensor& q) {
    const auto [c, ys] = scan(
        [&](const std::pair<Tensor, Tensor>& carry, const Tensor&) {
          return std::pair{body(q, carry.first, carry.second), std::tuple<>{}};
        },
        std::pair{ones({2}), q * 2.0}, std::int64_t{4});
    return sum(c.first);
  };
  const auto unrolled = [&](const Tensor& q) {
    std::pair<Tensor, Tensor> c{ones({2}), q * 2.0};
    for (int t = 0; t < 4; ++t) c = body(q, c.first, c.second);
    return sum(c.first);
  };
  const Tensor p = Tensor::from_vector({0.5, -1.5}, {2});
  require_close(grad(looped)(p), grad(unrolled)(p), 1e-13);
  require_close(jit(grad(looped))(p), grad(unrolled)(p), 1e-13);
  require_close(hessian([&](const Tensor& q) { return looped(q); })(p), hessian(unrolled)(p), 1e-12);
  // The carry unread but returned as the y, which is read (the fuzzer's seed 285): all of it counts.
  const auto carry_as_y = [](const Tensor& q) {
    const auto [c, ys] = scan(
        [&](const Tensor& c, const Tensor&) {
          return std::pair{c * q, c};
        },
        q * 2.0, std::int64_t{3});
    return sum(ys);
  };
  const auto carry_as_y_unrolled = [](const Tensor& q) {
    return sum(q * 2.0) + sum(q * q * 2.0) + sum(q * q * q * 2.0);
  };
  require_close(grad(carry_as_y)(p), grad(carry_as_y_unrolled)(p), 1e-13);
  require_close(jit(grad(carry_as_y))(p), grad(carry_as_y_unrolled)(p), 1e-13);
}
