#pragma once
// Every op and every gradient on a device against the same computation on the CPU backend.
// Shared by the GPU tests (tests/gpu/, the real CUDA device) and by test_device.cpp, which runs it
// on CPU-only machines through a stand-in device whose memory the host cannot read.
#include <functional>
#include <string>
#include <vector>

#include "gradcheck.hpp"

namespace vt::testing {

enum class Input { general, positive, spd, lower, upper };

struct DeviceCase {
  std::string name;
  std::vector<Shape> shapes;  // per example
  std::vector<Input> kinds;   // one per input
  Fn fn;
  bool differentiable = true;
  bool needs_batch = false;  // batch-family ops: only run with batched inputs
};

// A test input on the CPU: [batch, ...shape] marked batched when batch > 0.
inline Tensor make_input(Input kind, const Shape& shape, std::int64_t batch, std::uint64_t seed, DType dtype) {
  Shape full = shape;
  if (batch > 0) full.insert(full.begin(), batch);
  Tensor x = randn(full, seed);
  switch (kind) {
    case Input::general: break;
    case Input::positive: x = rand(full, seed) + 0.5; break;
    case Input::spd: {
      const double n = static_cast<double>(shape.back());
      x = matmul(x, swapaxes(x, -1, -2)) / n + eye(shape.back());
      break;
    }
    case Input::lower: x = tril(x) * 0.3 + eye(shape.back()) * 2.0; break;
    case Input::upper: x = triu(x) * 0.3 + eye(shape.back()) * 2.0; break;
  }
  x = x.astype(dtype);
  return batch > 0 ? as_batch(x) : x;
}

inline std::vector<DeviceCase> device_cases() {
  using V = const std::vector<Tensor>&;
  const Input G = Input::general, P = Input::positive, S = Input::spd, L = Input::lower, U = Input::upper;
  std::vector<DeviceCase> c;
  auto add = [&](std::string name, std::vector<Shape> shapes, std::vector<Input> kinds, Fn fn, bool diff = true,
                 bool needs_batch = false) {
    c.push_back({std::move(name), std::move(shapes), std::move(kinds), std::move(fn), diff, needs_batch});
  };
  // elementwise
  add("neg", {{3, 4}}, {G}, [](V a) { return neg(a[0]); });
  add("exp", {{3, 4}}, {G}, [](V a) { return exp(a[0]); });
  add("log", {{3, 4}}, {P}, [](V a) { return log(a[0]); });
  add("log1p", {{7}}, {P}, [](V a) { return log1p(a[0]); });
  add("sqrt", {{3, 4}}, {P}, [](V a) { return sqrt(a[0]); });
  add("square", {{3, 4}}, {G}, [](V a) { return square(a[0]); });
  add("sin cos", {{3, 4}}, {G}, [](V a) { return sin(a[0]) * cos(a[0]); });
  add("tanh", {{5}}, {G}, [](V a) { return tanh(a[0]); });
  add("abs", {{3, 4}}, {G}, [](V a) { return abs(a[0]); });
  add(
      "sign", {{3, 4}}, {G}, [](V a) { return sign(a[0]); }, false);
  add("add broadcast", {{3, 4}, {4}}, {G, G}, [](V a) { return a[0] + a[1]; });
  add("sub outer broadcast", {{3, 1}, {1, 4}}, {G, G}, [](V a) { return a[0] - a[1]; });
  add("mul", {{3, 4}, {3, 4}}, {G, G}, [](V a) { return a[0] * a[1]; });
  add("div", {{3, 4}, {4}}, {G, P}, [](V a) { return a[0] / a[1]; });
  add("pow", {{3, 4}, {3, 4}}, {P, G}, [](V a) { return pow(a[0], a[1]); });
  add("maximum", {{3, 4}, {3, 4}}, {G, G}, [](V a) { return maximum(a[0], a[1]); });
  add(
      "comparisons", {{3, 4}, {4}}, {G, G},
      [](V a) { return less(a[0], a[1]) + greater(a[0], a[1]) * 2.0 + equal(a[0], a[0]) * 4.0; }, false);
  add("where", {{3, 4}, {3, 4}}, {G, G}, [](V a) { return where(greater(a[0], a[1]), a[0] * a[1], a[1]); });
  add("scalars", {{6}}, {P}, [](V a) { return 2.0 / a[0] + a[0] * 2.5 - 1.0 + pow(a[0], 1.5); });
  add("astype round trip", {{3, 4}}, {G}, [](V a) {
    const DType other = a[0].dtype() == DType::f64 ? DType::f32 : DType::f64;
    return a[0].astype(other).astype(a[0].dtype()) * a[0];
  });
  // integers: float inputs converted (truncated), integer maps, comparisons, where, reductions and
  // layout ops in int64 and int32, converted back (the float part keeps a gradient to compare)
  add("integer maps", {{3, 40}}, {G}, [](V a) {
    const Tensor k = (a[0] * 4.0).astype(DType::i64), j = k.astype(DType::i32);
    const Tensor zero = zeros({}, DType::i64, k.device()), seven = full({}, 7, DType::i64, k.device());
    const Tensor m = maximum(abs(k) - 1, -k) * sign(k) + (k * 3 - 2);
    const Tensor mask = less(k, j.astype(DType::i64) + 1) + greater(k, zero) * 2 + equal(k, zero) * 4;
    const Tensor picked = where(greater(k, zero), m, -m) + where(a[0], k, seven);  // a float condition too
    const Tensor ints = sum(picked, {-1}) + max(mask, {-1}) + sum(j * j - j, {-1}).astype(DType::i64);
    return ints.astype(a[0].dtype()) + sum(a[0] * k.astype(a[0].dtype()), {-1});
  });
  add(
      "integer sums past the two-pass size", {{64, 1100}}, {G},
      [](V a) {
        const Tensor k = (a[0] * 100.0).astype(DType::i32);
        return (sum(k) + sum(k.astype(DType::i64)) * 2 + max(k) + max(-k.astype(DType::i64))).astype(a[0].dtype());
      },
      false);
  add(
      "integer layout", {{3, 4}}, {G},
      [](V a) {
        const Tensor k = (a[0] * 4.0).astype(DType::i32);
        const Tensor parts =
            concatenate({slice(transpose(k), 0, 1, 4), broadcast_to(max(k, {1}).reshape({1, 3}), {2, 3})});
        return stack({parts, tril(parts.reshape({3, 5}).t().reshape({5, 3}))}).astype(a[0].dtype());
      },
      false);
  add(
      "integer batch ops", {{3, 4}}, {G},
      [](V a) {
        const Tensor k = (a[0] * 4.0).astype(DType::i64);
        return (batch_sum(k) * 2 + batch_max(k)).astype(a[0].dtype()) + batch_mean(k).astype(a[0].dtype());
      },
      false, true);
  // special functions, minimum, clip; trigamma has no gradient
  add("log10 log2", {{3, 4}}, {P}, [](V a) { return log10(a[0]) + log2(a[0]) * 2.0; });
  add("exp2 exp10 expm1", {{3, 4}}, {G}, [](V a) { return exp2(a[0]) + exp10(a[0]) * 0.5 + expm1(a[0]); });
  add("erf erfc", {{3, 4}}, {G}, [](V a) { return erf(a[0]) + erfc(a[0] * 2.0) * 3.0; });
  add("lgamma digamma", {{3, 4}}, {P}, [](V a) { return lgamma(a[0]) + digamma(a[0] - 2.0); });
  add(
      "digamma trigamma large and reflected", {{3, 4}}, {G},
      [](V a) { return digamma(a[0] * 20.0) + trigamma(a[0] * 20.0 + 0.5); }, false);
  add("sigmoid softplus", {{3, 4}}, {G}, [](V a) { return sigmoid(a[0] * 30.0) + softplus(a[0] * 300.0) * 0.01; });
  add("pow scalar base", {{3, 4}}, {G}, [](V a) { return pow(2.5, a[0]); });
  add("minimum", {{3, 4}, {4}}, {G, G}, [](V a) { return minimum(a[0], a[1]); });
  add("clip", {{3, 4}}, {G}, [](V a) { return clip(a[0], -0.5, 0.7); });
  // reductions
  add("sum all", {{3, 4}}, {G}, [](V a) { return sum(a[0]); });
  add("sum large", {{64, 513}}, {G}, [](V a) { return sum(a[0], {1}) + sum(square(a[0])); });
  add("sum axis 0", {{5, 3, 4}}, {G}, [](V a) { return sum(a[0], {0}); });
  add("mean keepdims", {{3, 40}}, {G}, [](V a) { return mean(a[0], {1}, true); });
  add("max", {{3, 50}}, {G}, [](V a) { return max(a[0], {-1}); });
  add("max all", {{3, 4}}, {G}, [](V a) { return max(a[0]); });
  add("sum_to", {{3, 4}}, {G}, [](V a) { return sum_to(a[0], {1, 4}); });
  add("logsumexp", {{3, 50}}, {G}, [](V a) { return logsumexp(a[0] * 10.0, {-1}); });
  add("logsumexp all keepdims", {{3, 4}}, {G}, [](V a) { return logsumexp(a[0], {}, true); });
  add("cumsum", {{3, 4, 5}}, {G}, [](V a) { return cumsum(a[0], 1) + cumsum(a[0], -1); });
  add("cumsum transposed long", {{300, 7}}, {G}, [](V a) { return cumsum(transpose(a[0]), -1); });
  // layout and indexing
  add("reshape transpose", {{2, 3, 4}}, {G}, [](V a) { return transpose(a[0].reshape({4, 6}) * 1.0); });
  add("transpose perm", {{2, 3, 4}}, {G}, [](V a) { return transpose(a[0], {2, 0, 1}) * 1.0; });
  add("swapaxes", {{2, 3, 4}}, {G}, [](V a) { return swapaxes(a[0], 0, 2) * 1.0; });
  add("broadcast_to", {{3, 1}}, {G}, [](V a) { return broadcast_to(a[0], {2, 3, 5}) * 1.0; });
  add("slice", {{7, 4}}, {G}, [](V a) { return slice(a[0], 0, 1, 7, 2) * 1.0; });
  add("concatenate stack", {{3, 4}, {2, 4}}, {G, G}, [](V a) {
    return stack({concatenate({a[0], a[1]}, 0), concatenate({a[1], a[0]}, 0)}, 1);
  });
  add("diag vector", {{5}}, {G}, [](V a) { return diag(a[0]); });
  add("diagonal", {{2, 5, 5}}, {G}, [](V a) { return diagonal(a[0]); });
  add("tril triu", {{5, 6}}, {G}, [](V a) { return tril(a[0]) + triu(a[0], 1) * 3.0; });
  // gather family: the index tensors are made here and moved to the inputs' device
  auto on = [](const Tensor& like, const std::vector<std::int64_t>& v, const Shape& s) {
    return Tensor::from_ints(v, s, DType::i64).to(like.device());
  };
  add("take axis 1", {{4, 5}}, {G}, [on](V a) { return take(a[0], on(a[0], {4, 0, -1, 2, 4, 1}, {2, 3}), 1); });
  add("take per-example indices", {{4, 3}, {5}}, {G, G},  // indices 0 or 2, batched with the inputs
      [](V a) { return take(a[0], astype(sign(a[1]) + 1.0, DType::i64)); });
  add("scatter_add repeated indices", {{5, 3}, {4, 3}}, {G, G}, [on](V a) {
    return scatter_add(a[0], on(a[0], {1, 4, 1, -5}, {4}), a[1]);
  });
  add("at set repeated indices", {{5, 3}, {4, 3}}, {G, G}, [on](V a) {
    return at(a[0], on(a[0], {3, 0, 3, 3}, {4})).set(a[1]);
  });
  add("segment_sum segment_mean", {{7, 3}}, {G}, [on](V a) {
    const Tensor ids = on(a[0], {2, 0, 2, 4, 0, 2, 1}, {7});  // segment 3 is empty
    return segment_sum(a[0], ids, 5) + segment_mean(a[0], ids, 5) * 2.0;
  });
  add("segment_max", {{7, 3}}, {G}, [on](V a) { return segment_max(a[0], on(a[0], {2, 0, 2, 1, 0, 2, 1}, {7}), 3); });
  // matmul
  add("matmul", {{3, 4}, {4, 5}}, {G, G}, [](V a) { return matmul(a[0], a[1]); });
  add("matmul transposed", {{4, 3}, {5, 4}}, {G, G}, [](V a) { return matmul(a[0].t(), a[1].t()); });
  add("matmul broadcast batch", {{2, 3, 4}, {4, 5}}, {G, G}, [](V a) { return matmul(a[0], a[1]); });
  add("matvec dot", {{3, 4}, {4}}, {G, G}, [](V a) { return sum(matmul(a[0], a[1])) + matmul(a[1], a[1]); });
  add("matmul large", {{70, 90}, {90, 33}}, {G, G}, [](V a) { return matmul(a[0], a[1]); });
  // A batch sharing one operand (one GEMM over the batch): the shared operand is the batch mean of
  // its batched input, so that its cotangent is the sum over the batch, as for a captured weight.
  const auto shared = [](const Tensor& x) { return x.is_batched() ? batch_mean(x) : x; };
  add("matmul vectors by a shared matrix", {{40}, {40, 9}}, {G, G},
      [=](V a) { return matmul(a[0], shared(a[1])) + matmul(a[0], shared(a[1]).t() * 1.0, false, true); });
  add("matmul matrices by a shared matrix", {{3, 40}, {9, 40}}, {G, G},
      [=](V a) { return matmul(a[0], shared(a[1]), false, true); });
  add("matmul a shared matrix by vectors", {{9, 40}, {40}}, {G, G},
      [=](V a) { return matmul(shared(a[0]), a[1]) + matmul(shared(a[0]).t() * 1.0, a[1], true, false); });
  add("matmul a shared matrix by matrices", {{9, 40}, {40, 3}}, {G, G},
      [=](V a) { return matmul(shared(a[0]), a[1]); });
  // batch family (batched inputs only)
  add(
      "batch_sum", {{3, 4}}, {G}, [](V a) { return batch_sum(a[0]); }, true, true);
  add(
      "batch_mean", {{3, 4}}, {G}, [](V a) { return batch_mean(a[0]); }, true, true);
  add(
      "batch_max", {{3, 4}}, {G}, [](V a) { return batch_max(a[0]); }, true, true);
  // linear algebra, at a tiny size, a small one and one past the CPU's blocking size
  for (std::int64_t n : {1, 5, 70}) {
    const std::string sz = " n=" + std::to_string(n);
    add("cholesky" + sz, {{n, n}}, {S}, [](V a) { return cholesky(a[0]); });
    add("cho_solve matrix" + sz, {{n, n}, {n, 3}}, {S, G}, [](V a) { return cho_solve(cho_factor(a[0]), a[1]); });
    add("cho_solve vector" + sz, {{n, n}, {n}}, {S, G}, [](V a) { return cho_solve(cho_factor(a[0]), a[1]); });
    add("logdet" + sz, {{n, n}}, {S}, [](V a) { return logdet(a[0]); });
    add("solve" + sz, {{n, n}, {n, 2}}, {S, G}, [](V a) { return solve(a[0], a[1]); });
  }
  for (bool lower : {true, false})
    for (bool transpose : {false, true})
      for (bool left : {true, false}) {
        const std::string name = std::string("triangular_solve ") + (lower ? "lower" : "upper") +
                                 (transpose ? " transposed" : "") + (left ? " left" : " right");
        const Shape b = left ? Shape{6, 3} : Shape{3, 6};
        add(name, {{6, 6}, b}, {lower ? L : U, G},
            [=](V a) { return triangular_solve(a[0], a[1], lower, transpose, left); });
      }
  // One right-hand side (a fused kernel on the GPU), at a size past one block of threads; the
  // off-diagonal scaled by 1/sqrt(n) keeps the triangular matrix well conditioned.
  for (bool lower : {true, false})
    for (bool transpose : {false, true}) {
      const std::string name = std::string("triangular_solve vector ") + (lower ? "lower" : "upper") +
                               (transpose ? " transposed" : "") + " n=300";
      add(name, {{300, 300}, {300}}, {G, G}, [=](V a) {
        const Tensor part = lower ? tril(a[0]) : triu(a[0]);
        const Tensor t = part * (0.3 / std::sqrt(300.0)) + eye(300, a[0].dtype(), a[0].device()) * 2.0;
        return triangular_solve(t, a[1], lower, transpose);
      });
    }
  add(
      "cholesky adjoint with an infinite cotangent above the diagonal", {{5, 5}}, {S},
      [](V a) {
        // As a downstream sqrt would give at L's structural zeros: it must not reach Abar.
        auto [l, pullback] = vjp([](const Tensor& y) { return cholesky(y); }, a[0]);
        const Tensor w = randn({5, 5}, 23, l.dtype(), l.device());
        return pullback(
            where(tril(ones({5, 5}, l.dtype(), l.device())), w, full({5, 5}, INFINITY, l.dtype(), l.device())))[0];
      },
      false);
  add("cholesky_checked", {{6, 6}}, {S}, [](V a) {
    const CheckedCholesky c = cholesky_checked(a[0]);
    return c.l + sum(c.info);
  });
  add("grad of grad through cholesky", {{4, 4}}, {S}, [](V a) {
    const Tensor g = grad([](const Tensor& x) { return sum(cholesky(x)) * 1.0; })(a[0]);
    return g * g;
  });
  // qr and eigh: tall, wide and larger; eigh at both sides of the GPU's syevjBatched limit (n = 32).
  // Eigenvectors' signs are the solver's, so eigh is compared through what does not depend on them.
  for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{6, 4}, {4, 6}, {70, 50}})
    add("qr " + std::to_string(m) + "x" + std::to_string(n), {{m, n}}, {G}, [](V a) {
      const QR f = qr(a[0]);
      return concatenate({reshape(f.q, {-1}), reshape(f.r, {-1})});
    });
  for (std::int64_t n : {1, 5, 40})
    add("eigh n=" + std::to_string(n), {{n, n}}, {S}, [n](V a) {
      const Eigh e = eigh(a[0]);
      const Tensor v = e.eigenvectors, c = linspace(-1.0, 2.0, n, v.dtype(), v.device());
      return concatenate({e.eigenvalues, reshape(matmul(v * c, v.t()), {-1}), reshape(v * v, {-1})});
    });
  add("seed loss", {{8, 6}, {6}}, {G, G}, [](V a) {
    const Tensor A = matmul(a[0] * square(a[1]), a[0].t()) + eye(8, a[0].dtype(), a[0].device());
    return mean(cho_solve(cho_factor(A), ones({8}, a[0].dtype(), a[0].device())));
  });
  return c;
}

// Runs `c` on the CPU and on `device` (values and the reverse-mode gradient of a random weighting
// of the output) and compares them. batch: 0 for unbatched inputs, else B (every input batched).
inline void compare_on_device(const DeviceCase& c, Device device, std::int64_t batch, DType dtype, double tol) {
  std::vector<Tensor> cpu_args, dev_args;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    cpu_args.push_back(make_input(c.kinds[i], c.shapes[i], batch, 17 + i, dtype));
    dev_args.push_back(to_device(cpu_args.back(), device));
    REQUIRE(dev_args.back().device() == device);
  }
  const Tensor want = c.fn(cpu_args);
  const Tensor got = c.fn(dev_args);
  REQUIRE(got.device() == device);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.is_batched() == want.is_batched());
  {
    INFO("value");
    require_close(got, want.to_vector<double>(), tol);
  }
  if (!c.differentiable || dtype != DType::f64) return;
  // Reductions over all axes of a batched output include the batch, so the loss is a scalar.
  const Fn loss = [&](const std::vector<Tensor>& a) {
    const Tensor out = c.fn(a);
    return sum(out * randn(out.shape(), 99, out.dtype(), out.device()));
  };
  const std::vector<Tensor> gw = reverse_gradients(loss, cpu_args);
  const std::vector<Tensor> gd = reverse_gradients(loss, dev_args);
  for (std::size_t i = 0; i < gw.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(gd[i].device() == device);
    REQUIRE(gd[i].shape() == gw[i].shape());
    require_close(gd[i], gw[i].to_vector<double>(), tol);
  }
}

// The whole suite on `device`: unbatched, B = 1 and B = 3, float64 (values and gradients) and
// float32 (values).
inline void run_device_suite(Device device) {
  for (const DeviceCase& c : device_cases()) {
    for (std::int64_t batch : {0, 1, 3}) {
      if (c.needs_batch && batch == 0) continue;
      for (DType dtype : {DType::f64, DType::f32}) {
        // float32 rounds differently on another backend; the larger factorizations amplify it.
        const double tol = dtype == DType::f64 ? 1e-9 : 2e-3;
        DYNAMIC_SECTION(c.name << ", batch " << batch << ", " << name_of(dtype)) {
          compare_on_device(c, device, batch, dtype, tol);
        }
      }
    }
  }
}

// Factorizations on `device` fail as on the CPU: the same exception, batch index and minor, and
// the same per-example info from cholesky_checked; a NaN in the input is reported, not propagated.
inline void check_factorization_errors(Device device) {
  Tensor a = make_input(Input::spd, {4, 4}, 3, 1, DType::f64);
  std::vector<double> v = unbatch(a).to_vector<double>();
  v[2 * 16 + 2 * 4 + 2] = -5.0;  // example 2: its leading minor of order 3 is negative
  a = as_batch(Tensor::from_vector(v, {3, 4, 4}));
  for (const Tensor& x : {a, a.to(device)}) {
    INFO("on " << to_string(x.device()));
    try {
      (void)cholesky(x);
      FAIL("no error");
    } catch (const NotPositiveDefinite& e) {
      CHECK(e.batch_index == 2);
      CHECK(e.minor == 3);
      CHECK_THAT(std::string(e.what()), Catch::Contains("cholesky") && Catch::Contains("example 2 of the batch of 3"));
    }
    const CheckedCholesky c = cholesky_checked(x);
    CHECK(c.info.to_vector<double>() == std::vector<double>{0, 0, 3});
    CHECK(std::isnan(unbatch(c.l).to_vector<double>()[2 * 16 + 2 * 4 + 2]));
    CHECK(unbatch(c.l).to_vector<double>()[0] > 0);  // example 0 factored
  }
  std::vector<double> w = make_input(Input::spd, {5, 5}, 0, 2, DType::f64).to_vector<double>();
  w[3 * 5 + 1] = std::nan("");
  const Tensor bad = Tensor::from_vector(w, {5, 5}).to(device);
  CHECK_THAT(error_of([&] { (void)logdet(bad); }), Catch::Contains("not positive definite"));
}

// An out-of-range index on `device` raises when the op or the plan ends, naming the index and its
// position, eagerly and in a jitted plan (recorded once, then replayed: each call checks anew).
inline void check_index_errors(Device device) {
  const Tensor x = randn({5, 3}, 24).to(device);
  const Tensor bad = Tensor::from_ints({1, 2, 6}, {3}, DType::i64, device);
  const Tensor good = Tensor::from_ints({4, -5}, {2}, DType::i32, device);
  CHECK_THAT(error_of([&] { (void)take(x, bad); }),
             Catch::Contains("take") && Catch::Contains("index 6") && Catch::Contains("position [2]"));
  CHECK_THAT(error_of([&] {
               (void)segment_sum(x, Tensor::from_ints({0, 0, 1, 9, 1}, {5}, DType::i64, device), 2);
             }),
             Catch::Contains("segment id 9") && Catch::Contains("position [3]"));
  CHECK_THAT(error_of([&] {
               (void)scatter_add(x, bad, ones({3, 3}, DType::f64, device));
             }),
             Catch::Contains("index 6") && Catch::Contains("position [2]"));
  auto f = jit([](const Tensor& a, const Tensor& idx) { return exp(take(a, idx)) + 1.0; });
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    CHECK_THAT(error_of([&] { (void)f(x, bad); }), Catch::Contains("index 6"));
    require_close(f(x, good), exp(take(x.to(Device::cpu()), Tensor::from_ints({4, -5}, {2}, DType::i32))) + 1.0, 1e-15);
  }
}

// qr and eigh on `device` fail as on the CPU: a NaN where they read names its example, eagerly and
// under jit; eigh ignores what lies above the diagonal; both of eigh's solver paths on a GPU.
inline void check_decomposition_errors(Device device) {
  std::vector<double> v = unbatch(make_input(Input::spd, {4, 4}, 3, 3, DType::f64)).to_vector<double>();
  v[2 * 16 + 3 * 4 + 1] = std::nan("");  // example 2, below the diagonal
  const Tensor bad = as_batch(Tensor::from_vector(v, {3, 4, 4}));
  auto jitted = jit([](const Tensor& a) { return eigh(a).eigenvalues; });
  for (const Tensor& x : {bad, bad.to(device)}) {
    INFO("on " << to_string(x.device()));
    CHECK_THAT(error_of([&] { (void)qr(x); }), Catch::Contains("qr: example 2 of the batch of 3 (4 x 4)"));
    CHECK_THAT(error_of([&] { (void)eigh(x); }), Catch::Contains("eigh: example 2 of the batch of 3 (4 x 4)"));
    CHECK_THAT(error_of([&] { (void)jitted(x); }), Catch::Contains("eigh: example 2 of the batch of 3"));
  }
  v[2 * 16 + 3 * 4 + 1] = v[2 * 16 + 1 * 4 + 3];
  v[2 * 16 + 1 * 4 + 3] = std::nan("");  // above the diagonal: eigh does not read it
  const Tensor upper = as_batch(Tensor::from_vector(v, {3, 4, 4}));
  const std::vector<double> want = eigh(upper).eigenvalues.to_vector<double>();
  require_close(eigh(upper.to(device)).eigenvalues, want, 1e-12);
  CHECK_THAT(error_of([&] { (void)qr(upper.to(device)); }), Catch::Contains("qr: example 2 of the batch of 3"));
  std::vector<double> large = unbatch(make_input(Input::spd, {40, 40}, 2, 4, DType::f64)).to_vector<double>();
  large[1600 + 40 * 39] = INFINITY;  // example 1, row 39, column 0
  const Tensor big = as_batch(Tensor::from_vector(large, {2, 40, 40})).to(device);
  CHECK_THAT(error_of([&] { (void)eigh(big); }), Catch::Contains("eigh: example 1 of the batch of 2 (40 x 40)"));
}

}  // namespace vt::testing
