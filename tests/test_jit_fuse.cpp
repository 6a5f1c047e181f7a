// jit's fused elementwise runs (autodiff/jit/fuse.cpp): a run of elementwise steps executed tile by
// tile must give bitwise what the same ops give eagerly, one whole op after another, whatever the
// broadcasting, batching, dtype, thread count, and whichever of its values are results or read
// after the run.

#include <cstring>
#include <functional>
#include <random>

#include "gradcheck.hpp"
#include "threads.hpp"

using namespace vt;
using vt::testing::on_threads;

namespace {

template <class T>
void require_bitwise(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.is_batched() == want.is_batched());
  const std::vector<T> g = got.to_vector<T>(), w = want.to_vector<T>();
  REQUIRE(g.size() == w.size());
  CHECK(std::memcmp(g.data(), w.data(), g.size() * sizeof(T)) == 0);
}

void require_bitwise(const Tensor& got, const Tensor& want) {
  switch (want.dtype()) {
    case DType::f32: return require_bitwise<float>(got, want);
    case DType::f64: return require_bitwise<double>(got, want);
    case DType::i32: return require_bitwise<std::int32_t>(got, want);
    default: return require_bitwise<std::int64_t>(got, want);
  }
}

// A chain of maps over a large x, with lower-rank operands broadcast into it.
Tensor chain(const Tensor& x, const Tensor& row, const Tensor& col) {
  const Tensor a = x * 0.5 - row;
  const Tensor b = exp(neg(square(a))) * sin(x) + col;
  const Tensor c = where(greater(a, b), a, b) / (1.0 + square(row));
  return pow(1.0 + square(c), Tensor::scalar(-1.7, x.dtype())) + tanh(b) * sqrt(abs(c));
}

std::int64_t fused_steps(const PlanSummary& s) { return s.fused; }

}  // namespace

TEST_CASE(
    "a fused run of maps gives bitwise the eager result, broadcasting "
    "lower-rank inputs",
    "[jit][fuse]") {
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(name_of(dtype));
    const Tensor x = randn({300, 70}, 1, dtype), row = randn({70}, 2, dtype), col = randn({300, 1}, 3, dtype);
    auto f = jit([](const Tensor& a, const Tensor& r, const Tensor& c) { return chain(a, r, c); });
    CHECK(fused_steps(f.compile(x, row, col)) >= 10);
    require_bitwise(f(x, row, col), chain(x, row, col));
    // Shapes of every size around the tile's, and one too small to be cut.
    for (Shape s :
         {Shape{5, 7}, Shape{4097}, Shape{8193}, Shape{3, 4099}, Shape{2, 2, 2049}, Shape{9000, 1}, Shape{1, 9001}}) {
      INFO(to_string(s));
      const Tensor y = randn(s, 4, dtype), r = randn({s.back()}, 5, dtype), c = randn({1}, 6, dtype);
      require_bitwise(f(y, r, c), chain(y, r, c));
    }
  }
}

TEST_CASE(
    "fused runs in batched plans: vmap and as_batch, batched and "
    "broadcast operands",
    "[jit][fuse]") {
  const Tensor xs = randn({3, 120, 80}, 7), row = randn({80}, 8), cols = randn({3, 120, 1}, 9);
  auto body = [](const Tensor& x, const Tensor& r, const Tensor& c) { return chain(x, r, c); };
  // A plain row broadcast over the batch, a batched column.
  auto f = jit(vmap([&](const Tensor& x, const Tensor& c) { return body(x, row, c); }));
  require_bitwise(f(xs, cols), vmap([&](const Tensor& x, const Tensor& c) { return body(x, row, c); })(xs, cols));
  auto g = jit([&](const Tensor& x, const Tensor& c) { return body(x, row, c); });
  CHECK(fused_steps(g.compile(as_batch(xs), as_batch(cols))) >= 10);
  for (std::int64_t b : {1, 3}) {
    const Tensor xb = as_batch(slice(xs, 0, 0, b)), cb = as_batch(slice(cols, 0, 0, b));
    require_bitwise(g(xb, cb), body(xb, row, cb));
  }
  // A per-example scalar exponent broadcast over each example (the GP's pow).
  auto h = jit([](const Tensor& x, const Tensor& e) { return pow(1.0 + square(x), neg(e)) * 2.0 + x; });
  const Tensor e = as_batch(Tensor::from_vector({0.5, 2.89, 3.0}, {3}));
  require_bitwise(h(as_batch(xs), e), pow(1.0 + square(as_batch(xs)), neg(e)) * 2.0 + as_batch(xs));
}

TEST_CASE("fused runs on integers", "[jit][fuse]") {
  for (DType dtype : {DType::i64, DType::i32}) {
    INFO(name_of(dtype));
    const Tensor x = astype(randn({200, 90}, 10) * 1000.0, dtype), r = astype(randn({90}, 11) * 1000.0, dtype);
    auto fn = [](const Tensor& a, const Tensor& b) {
      const Tensor c = a * b - abs(a) + 7;
      return where(greater(c, b), maximum(c, neg(a)), minimum(c, b)) * sign(a - b) + equal(a, b);
    };
    auto f = jit(fn);
    CHECK(fused_steps(f.compile(x, r)) >= 5);
    require_bitwise(f(x, r), fn(x, r));
  }
}

TEST_CASE(
    "values of a fused run that are results, or read after the run, are "
    "all written",
    "[jit][fuse]") {
  const Tensor x = randn({256, 64}, 12), w = randn({64, 8}, 13);
  auto fn = [&](const Tensor& a) {
    const Tensor t = exp(a * 0.25) + 1.0;  // read after the run (by matmul) and a result
    const Tensor u = log(t) * a;
    const Tensor v = square(u) - t;
    const Tensor m = matmul(t, w);  // ends the run
    const Tensor s = sum(u, {1}, true);
    return std::vector<Tensor>{t, v, m, s * v + u};
  };
  auto f = jit(fn);
  CHECK(fused_steps(f.compile(x)) >= 4);
  const std::vector<Tensor> got = f(x), want = fn(x);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("result " << i);
    require_bitwise(got[i], want[i]);
  }
}

TEST_CASE("fused runs next to steps that alias and values that die inside the run", "[jit][fuse]") {
  const Tensor x = randn({128, 96}, 14);
  auto fn = [](const Tensor& a) {
    const Tensor r = sum(exp(a), {0}, true);            // [1, 96]: read broadcast, dies inside the run
    const Tensor b = (a * r + 1.0).reshape({96, 128});  // an alias between runs
    const Tensor c = tanh(b) * 3.0 - b;
    const Tensor t = swapaxes(c, 0, 1);  // the same elements in another order
    const Tensor d = exp(t * 0.01) + a * sum(r);
    return stop_gradient(d * d + t).reshape({128 * 96});
  };
  auto f = jit(fn);
  (void)f.compile(x);
  require_bitwise(f(x), fn(x));
}

TEST_CASE("fused runs give the same bits at any thread count", "[jit][fuse]") {
  const Tensor x = randn({700, 300}, 15), row = randn({300}, 16), col = randn({700, 1}, 17);
  auto f = jit([](const Tensor& a, const Tensor& r, const Tensor& c) { return chain(a, r, c); });
  const Tensor one = on_threads(1, [&] { return f(x, row, col); });
  const Tensor four = on_threads(4, [&] { return f(x, row, col); });
  require_bitwise(one, four);
  require_bitwise(one, chain(x, row, col));
}

TEST_CASE("random chains of maps: jit with fused runs equals eager bitwise", "[jit][fuse]") {
  std::mt19937 rng(2026);
  const std::vector<Shape> operand_shapes = {{}, {1}, {50}, {70, 1}, {70, 50}, {3, 70, 50}, {3, 1, 50}};
  for (int trial = 0; trial < 30; ++trial) {
    const int steps = 3 + static_cast<int>(rng() % 12);
    std::vector<int> ops, picks;
    for (int i = 0; i < 3 * steps; ++i) {
      ops.push_back(static_cast<int>(rng() % 9));
      picks.push_back(static_cast<int>(rng() % 1000));
    }
    std::vector<Tensor> args;
    for (int i = 0; i < 3; ++i)
      args.push_back(randn(operand_shapes[rng() % operand_shapes.size()], 100 + trial * 3 + i));
    args[0] = randn({3, 70, 50}, 99 + trial);  // 10500 elements: several tiles
    auto fn = [&](const Tensor& a0, const Tensor& a1, const Tensor& a2) {
      std::vector<Tensor> vals = {a0, a1, a2};
      for (int i = 0; i < steps; ++i) {
        const Tensor& p = vals[static_cast<std::size_t>(picks[static_cast<std::size_t>(3 * i)]) % vals.size()];
        const Tensor& q = vals[static_cast<std::size_t>(picks[static_cast<std::size_t>(3 * i + 1)]) % vals.size()];
        Tensor r;
        switch (ops[static_cast<std::size_t>(i)]) {
          case 0: r = p + q; break;
          case 1: r = p * q; break;
          case 2: r = tanh(p) - q; break;
          case 3: r = where(greater(p, q), p, q * 0.5); break;
          case 4: r = exp(neg(square(p))); break;
          case 5: r = sum(p * q, {-1}, true); break;  // a reduction between runs
          case 6: r = pow(abs(p) + 0.5, Tensor::scalar(-1.5)); break;
          case 7: r = maximum(p, q) / (1.0 + abs(q)); break;
          default: r = (p - q).astype(DType::f32).astype(DType::f64); break;
        }
        vals.push_back(r);
      }
      return vals.back() + vals[vals.size() / 2];
    };
    INFO("trial " << trial);
    auto f = jit(fn);
    require_bitwise(f(args[0], args[1], args[2]), fn(args[0], args[1], args[2]));
  }
}

TEST_CASE("a gradient through fused runs matches the unfused gradient", "[jit][fuse][grad]") {
  const Tensor x = randn({200, 60}, 18), row = randn({60}, 19), col = randn({200, 1}, 20);
  auto loss = [](const Tensor& a, const Tensor& r, const Tensor& c) { return sum(chain(a, r, c)); };
  const std::vector<Tensor> want = grad(loss, {0, 1, 2})(x, row, col);
  auto g = jit(grad(loss, {0, 1, 2}));
  CHECK(fused_steps(g.compile(x, row, col)) >= 10);
  const std::vector<Tensor> got = g(x, row, col);
  for (std::size_t i = 0; i < 3; ++i) vt::testing::require_close(got[i], want[i], 1e-12);
}

// ------------------------------------------------------------------ runs that end in sums

namespace {

// Runs fn's jitted plan at 1 and 4 threads: both must be bitwise the eager result.
template <class F, class... Args>
void require_bitwise_at_any_thread_count(F&& fn, const Args&... args) {
  auto f = jit(fn);
  const auto one = on_threads(1, [&] { return f(args...); });
  const auto four = on_threads(4, [&] { return f(args...); });
  const auto want = fn(args...);
  require_bitwise(one, want);
  require_bitwise(four, want);
}

}  // namespace

TEST_CASE("a fused run that ends in a sum gives bitwise the eager sum, at any thread count", "[jit][fuse]") {
  // Sizes around a tile (4096), a reduce segment (32768) and neither; a scalar and a row broadcast.
  for (DType dtype : {DType::f64, DType::f32}) {
    for (Shape s : {Shape{5, 7}, Shape{4097}, Shape{8193}, Shape{2 * 32768 + 77}, Shape{3, 40000}, Shape{521, 521}}) {
      INFO(name_of(dtype) << " " << to_string(s));
      const Tensor x = randn(s, 21, dtype), r = randn({s.back()}, 22, dtype), c = randn({1}, 23, dtype);
      auto fn = [](const Tensor& a, const Tensor& row, const Tensor& k) {
        return sum(exp(a * 0.1) * row - a / (1.0 + square(k)));
      };
      require_bitwise_at_any_thread_count(fn, x, r, c);
      if (numel(s) >= 8192) CHECK(fused_steps(jit(fn).compile(x, r, c)) >= 6);  // the sum included
    }
  }
  for (DType dtype : {DType::i64, DType::i32}) {
    INFO(name_of(dtype));
    const Tensor x = astype(randn({300, 170}, 24) * 1000.0, dtype), r = astype(randn({170}, 25) * 1000.0, dtype);
    require_bitwise_at_any_thread_count([](const Tensor& a, const Tensor& b) { return sum(a * b - abs(a) + 3); }, x, r);
  }
}

TEST_CASE("fused sums per example: vmap and as_batch", "[jit][fuse]") {
  const Tensor xs = randn({3, 300, 200}, 26), w = randn({300, 200}, 27), p = randn({3}, 28);
  auto body = [&](const Tensor& x, const Tensor& q) { return sum(square(x) * w * exp(q)) + sum(x * q); };
  const Tensor want = vmap(body)(xs, p);
  require_bitwise(jit(vmap(body))(xs, p), want);
  for (std::int64_t b : {1, 3}) {
    INFO("batch " << b);
    const Tensor xb = as_batch(slice(xs, 0, 0, b)), pb = as_batch(slice(p, 0, 0, b));
    require_bitwise_at_any_thread_count([&](const Tensor& x, const Tensor& q) { return body(x, q); }, xb, pb);
  }
}

TEST_CASE("contractions of one matrix against several, with steps between them, merge and stay bitwise eager",
          "[jit][fuse]") {
  // The shape of a GP gradient: sum(G * dK_i) for several dK_i, each followed by scalar steps.
  const Tensor g = randn({400, 300}, 29), a = randn({400, 300}, 30), t = randn({4}, 31);
  auto fn = [](const Tensor& gm, const Tensor& am, const Tensor& th) {
    auto p = [&](int i) { return exp(slice(th, 0, i, i + 1)); };
    const Tensor k1 = exp(am * (-0.5) / square(p(0)));
    Tensor out = concatenate({sum(gm * k1) * p(1), sum(gm * k1 * am / square(p(0))) * p(2)}, 0);
    out = concatenate({out, reshape(sum(gm * pow(1.0 + square(am), neg(p(3)))), {1}) + 1.0}, 0);
    return concatenate({out, reshape(sum(gm * am), {1}) * p(1)}, 0);
  };
  require_bitwise_at_any_thread_count(fn, g, a, t);
  // Where a value the run makes is read after it (k1 here), it is still written.
  auto both = [&](const Tensor& gm, const Tensor& am, const Tensor& th) {
    const Tensor k1 = exp(am * slice(th, 0, 0, 1));
    return std::vector<Tensor>{sum(gm * k1), k1 * 2.0, sum(gm * k1 * am)};
  };
  const std::vector<Tensor> got = jit(both)(g, a, t), want = both(g, a, t);
  for (std::size_t i = 0; i < 3; ++i) require_bitwise(got[i], want[i]);
}

TEST_CASE("random chains of maps that end in sums: jit equals eager bitwise", "[jit][fuse]") {
  std::mt19937 rng(2027);
  const std::vector<Shape> operand_shapes = {{}, {1}, {60}, {90, 60}, {90, 1}};
  for (int trial = 0; trial < 25; ++trial) {
    const int steps = 2 + static_cast<int>(rng() % 8);
    std::vector<int> ops;
    for (int i = 0; i < 2 * steps; ++i) ops.push_back(static_cast<int>(rng() % 7));
    const Tensor x = randn({2, 90, 60}, 200 + trial),
                 y = randn(operand_shapes[rng() % operand_shapes.size()], 300 + trial);
    auto fn = [&](const Tensor& a, const Tensor& b) {
      std::vector<Tensor> sums;
      Tensor v = a;
      for (int i = 0; i < steps; ++i) {
        switch (ops[static_cast<std::size_t>(i)]) {
          case 0: v = v * b; break;
          case 1: v = exp(neg(square(v))) + b; break;
          case 2: v = where(greater(v, b), v, b * 0.25); break;
          case 3: v = v / (1.0 + abs(b)); break;
          case 4: v = pow(abs(v) + 0.5, Tensor::scalar(-0.7)); break;
          case 5: sums.push_back(sum(v * a)); break;  // a contraction in the middle of the chain
          default: v = tanh(v) - a; break;
        }
      }
      sums.push_back(sum(v));
      Tensor total = sums[0];
      for (std::size_t i = 1; i < sums.size(); ++i) total = total * 0.5 + sums[i];
      return total;
    };
    INFO("trial " << trial);
    require_bitwise_at_any_thread_count(fn, x, y);
  }
}

TEST_CASE("gradients through fused contractions match central differences and the eager gradient",
          "[jit][fuse][grad]") {
  // A kernel of scalar hyperparameters over a large matrix, as in the GP example: each gradient
  // entry is a fused contraction sum(K_bar * dK/dtheta_i).
  const Tensor sq = square(randn({150, 120}, 32)), w = randn({150, 120}, 33);
  const Tensor theta = Tensor::from_vector({0.3, -0.2, 0.5, 0.1}, {4});
  auto loss = [&](const Tensor& th) {
    auto p = [&](int i) { return exp(slice(th, 0, i, i + 1)); };
    const Tensor k = p(0) * exp(sq * (-0.5) / square(p(1))) + p(2) * pow(1.0 + sq / (p(3) * 2.0), neg(p(3)));
    return sum(k * w) + sum(square(k)) * 0.01;
  };
  auto g = jit(grad(loss));
  const Tensor got = g(theta);
  vt::testing::require_close(got, grad(loss)(theta), 1e-12);
  const std::vector<double> fd =
      vt::testing::numeric_gradient([&](const std::vector<Tensor>& a) { return loss(a[0]); }, {theta}, 0);
  const std::vector<double> ad = got.to_vector<double>();
  for (std::size_t j = 0; j < fd.size(); ++j) {
    INFO("theta " << j << ": reverse " << ad[j] << ", finite differences " << fd[j]);
    CHECK(std::abs(ad[j] - fd[j]) <= 1e-6 * std::max(1.0, std::abs(fd[j])));
  }
}

TEST_CASE("a sum of many elements is the same at any thread count and close to an exact sum", "[fuse][reduce]") {
  const Tensor x = randn({3, 70001}, 34);
  const auto [one, rows] = on_threads(1, [&] { return std::pair{sum(x), sum(x, {1})}; });
  const auto [one_on_four, rows_on_four] = on_threads(4, [&] { return std::pair{sum(x), sum(x, {1})}; });
  require_bitwise(one_on_four, one);
  require_bitwise(rows_on_four, rows);
  const std::vector<double> v = x.to_vector<double>();
  long double exact = 0;
  for (double e : v) exact += e;
  CHECK(std::abs(one.item() - static_cast<double>(exact)) <= 1e-12 * static_cast<double>(v.size()));
}

namespace {

// Squared distances (t_i - t_j)^2 of n points: exactly symmetric (t_j - t_i is -(t_i - t_j), bit for bit).
Tensor squared_distances(std::int64_t n, std::uint64_t seed, DType dtype) {
  const Tensor t = randn({n}, seed, dtype);
  return square(reshape(t, {n, 1}) - reshape(t, {1, n}));
}

// A kernel matrix of a captured symmetric S and hyperparameters theta [4], in the manner of a GP's.
Tensor kernel_of(const Tensor& s, const Tensor& theta) {
  auto p = [&](int i) { return exp(slice(theta, 0, i, i + 1)); };
  return p(0) * exp(s * -0.5 / square(p(1))) + p(2) * pow(1.0 + s / p(3), neg(p(3)));
}

}  // namespace

TEST_CASE("runs on symmetric matrices compute the lower triangle: matrices bitwise eager, sums close, any thread count",
          "[jit][fuse]") {
  // 200: strips of one piece; 521 (16 k + 9) and 600 (16 k + 8): strips past column 512 of two pieces, the
  // second straddling the diagonal, and a last strip of fewer rows.
  for (DType dtype : {DType::f64, DType::f32}) {
    for (std::int64_t n : {200, 521, 600}) {
      INFO(name_of(dtype) << " n = " << n);
      const Tensor s = squared_distances(n, 40 + static_cast<std::uint64_t>(n), dtype);
      const Tensor thetas = randn({3, 4}, 41, dtype) * 0.3, v = randn({n, 2}, 42, dtype);
      // Results whole: k itself, and k read by a product, which reads above the diagonal too.
      auto matrices = [&](const Tensor& theta) {
        const Tensor k = kernel_of(s, theta);
        return std::vector<Tensor>{k * s + 1.0, matmul(k, v)};
      };
      const auto fm = jit(vmap(matrices));
      CHECK(fm.compile(as_batch(thetas)).fused_lower >= 8);
      for (int threads : {1, 3}) {
        // Eager too at this thread count: Eigen blocks a large product by its thread count.
        const auto [got, want] = on_threads(threads, [&] { return std::pair{fm(thetas), vmap(matrices)(thetas)}; });
        require_bitwise(got[0], want[0]);
        require_bitwise(got[1], want[1]);
      }
      // Sums: the entries below the diagonal counted twice, so equal to eager's up to rounding, and the same bits at
      // any thread count.
      auto sums = [&](const Tensor& theta) {
        const Tensor k = kernel_of(s, theta);
        return sum(k * s) - sum(k / (1.0 + s)) * 0.25;
      };
      const auto fs = jit(vmap(sums));
      CHECK(fs.compile(as_batch(thetas)).fused_lower >= 8);
      const Tensor one = on_threads(1, [&] { return fs(thetas); });
      const Tensor four = on_threads(4, [&] { return fs(thetas); });
      require_bitwise(one, four);
      const std::vector<double> got = astype(one, DType::f64).to_vector<double>();
      const std::vector<double> exact = astype(vmap(sums)(thetas), DType::f64).to_vector<double>();
      const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - exact[i]) <= tol * std::abs(exact[i]));
    }
  }
}

TEST_CASE("a matrix that differs from its transpose in one entry runs whole and bitwise eager", "[jit][fuse]") {
  // The comparison reads tiles on and above the diagonal: the entry changed lies below it and above it, in a tile on
  // the diagonal, and in the last, partial tiles.
  const std::int64_t n = 200;
  const std::vector<std::pair<std::int64_t, std::int64_t>> entries = {{150, 3}, {3, 150}, {5, 2}, {199, 190}, {0, 199}};
  for (const auto& [row, column] : entries) {
    INFO("changed entry (" << row << ", " << column << ")");
    std::vector<double> values = squared_distances(n, 43, DType::f64).to_vector<double>();
    values[static_cast<std::size_t>(row * n + column)] += 1e-9;  // its mirror keeps its value
    const Tensor s = Tensor::from_vector(values, {n, n}), theta = randn({4}, 44) * 0.3;
    auto fn = [&](const Tensor& th) {
      const Tensor k = kernel_of(s, th);
      return std::vector<Tensor>{sum(k * s), k};
    };
    CHECK(jit(fn).compile(theta).fused_lower == 0);
    CHECK(jit(fn).compile(theta).fused >= 10);
    const std::vector<Tensor> got = jit(fn)(theta), want = fn(theta);
    require_bitwise(got[0], want[0]);
    require_bitwise(got[1], want[1]);
  }
}

TEST_CASE("a transpose of an exactly symmetric matrix is read as the matrix itself; of a near-symmetric one, copied",
          "[jit][fuse]") {
  const std::int64_t n = 200;
  for (const bool symmetric : {true, false}) {
    INFO((symmetric ? "symmetric" : "one entry changed"));
    std::vector<double> values = squared_distances(n, 45, DType::f64).to_vector<double>();
    if (!symmetric) values[static_cast<std::size_t>(150 * n + 3)] += 1e-9;
    const Tensor s = Tensor::from_vector(values, {n, n}), theta = randn({4}, 46) * 0.3, v = randn({n, 3}, 47);
    // The symmetric part a tangent rule takes, a transpose read by a sum, and one read by a product.
    auto fn = [&](const Tensor& th) {
      const Tensor k = kernel_of(s, th);
      return std::vector<Tensor>{(k + k.t()) * 0.5, sum(k.t() * s), matmul(k.t() * 2.0, v)};
    };
    const PlanSummary summary = jit(fn).compile(theta);
    CHECK(summary.rewrites_by("fold_transposes_into_matmuls") == (symmetric ? 3 : 0));
    const std::vector<Tensor> got = jit(fn)(theta), want = fn(theta);
    require_bitwise(got[0], want[0]);
    require_bitwise(got[2], want[2]);
    // The sum over a symmetric matrix runs over its lower triangle when it is proved symmetric: equal up to rounding.
    if (!symmetric) require_bitwise(got[1], want[1]);
    CHECK(std::abs(got[1].item() - want[1].item()) <= 1e-12 * std::abs(want[1].item()));
  }
}

TEST_CASE("a GP likelihood's gradient by lower-triangle runs matches eager and central differences",
          "[jit][fuse][grad]") {
  // The covariance read only by its factorization (never mirrored), the cotangent of cho_solve's A a product
  // marked symmetric, the kernel's contractions run over the lower triangle.
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 45, DType::f64), y = randn({n}, 46), eye_n = eye(n);
  auto lml = [&](const Tensor& theta) {
    const Tensor k = kernel_of(s, theta) + eye_n * 0.1;
    const CholeskyFactor f = cho_factor(k);
    return sum(y * cho_solve(f, y)) + logdet(f);
  };
  const Tensor thetas = randn({2, 4}, 47) * 0.3;
  const auto vg = jit(vmap(value_and_grad(lml)));
  const PlanSummary summary = vg.compile(as_batch(thetas));
  CHECK(summary.fused_lower >= 20);
  // Two passes over n x n memory: the kernel's, and one for K_bar and all its contractions (the scalar steps between
  // the contractions run before or after its tiles; small values never share a buffer with large ones).
  CHECK(summary.fused_runs == 2);
  const auto [value, gradient] = vg(thetas);
  const auto [eager_value, eager_gradient] = vmap(value_and_grad(lml))(thetas);
  const std::vector<double> v = value.to_vector<double>(), ev = eager_value.to_vector<double>();
  const std::vector<double> g = gradient.to_vector<double>(), eg = eager_gradient.to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(std::abs(v[i] - ev[i]) <= 1e-12 * std::abs(ev[i]));
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - eg[i]) <= 1e-9 * (1.0 + std::abs(eg[i])));
  // Central differences of the jitted value, example 0.
  const double h = 1e-6;
  const std::vector<double> t0 = thetas.to_vector<double>();
  auto jitted = jit(lml);
  for (std::size_t j = 0; j < 4; ++j) {
    std::vector<double> up(t0.begin(), t0.begin() + 4), down = up;
    up[j] += h;
    down[j] -= h;
    const double fd =
        (jitted(Tensor::from_vector(up, {4})).item() - jitted(Tensor::from_vector(down, {4})).item()) / (2 * h);
    CHECK(std::abs(fd - g[j]) <= 1e-5 * (1.0 + std::abs(g[j])));
  }
}

TEST_CASE("products jit marks symmetric come out exactly symmetric at every order", "[jit][linalg]") {
  // X D X^T: below and above the order where the CPU backend computes one triangle and mirrors it; fused runs
  // reading the product rely on its exact symmetry.
  for (std::int64_t n : {50, 250}) {
    INFO("n = " << n);
    const Tensor x = randn({n, 30}, 48), d = randn({30}, 49);
    auto f = [](const Tensor& a, const Tensor& w) { return matmul(a * w, a, false, true); };
    const Tensor got = jit(f)(x, d), want = f(x, d);
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    double scale = 0;
    for (double e : w) scale = std::max(scale, std::abs(e));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const auto ij = static_cast<std::size_t>(i * n + j), ji = static_cast<std::size_t>(j * n + i);
        REQUIRE(std::memcmp(&g[ij], &g[ji], sizeof(double)) == 0);
        REQUIRE(std::abs(g[ij] - w[ij]) <= 1e-13 * scale);
      }
  }
}

TEST_CASE("scalings of a symmetric matrix move out of its sums; other sums keep their bits", "[jit][fuse]") {
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 50, DType::f64), w = squared_distances(n, 51, DType::f64) * 0.1;
  const Tensor thetas = randn({3, 4}, 52) * 0.3;
  // c (k / s) w summed, and -(k / t) summed: the scalings by c, s, t and the negation move out of both sums.
  auto fn = [](const Tensor& k, const Tensor& other, const Tensor& theta) {
    auto p = [&](int i) { return exp(slice(theta, 0, i, i + 1)); };
    const Tensor kernel = exp(k * -0.5 / square(p(0)));
    return sum(p(1) * (kernel / p(2)) * other) + sum(neg(kernel * other / p(3)));
  };
  auto symmetric = [&](const Tensor& theta) { return fn(s, w, theta); };
  const PlanSummary summary = jit(vmap(symmetric)).compile(as_batch(thetas));
  CHECK(summary.rewrites_by("move_scalings_out_of_symmetric_sums") >= 4);
  const Tensor one = on_threads(1, [&] { return jit(vmap(symmetric))(thetas); });
  const Tensor three = on_threads(3, [&] { return jit(vmap(symmetric))(thetas); });
  require_bitwise(one, three);
  const std::vector<double> got = one.to_vector<double>(), want = vmap(symmetric)(thetas).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-12 * std::abs(want[i]));
  // The same function of a matrix that is not symmetric: nothing moves, the sums are bitwise eager.
  const Tensor a = randn({n, n}, 53);
  auto plain = [&](const Tensor& theta) { return fn(a, w, theta); };
  CHECK(jit(vmap(plain)).compile(as_batch(thetas)).rewrites_by("move_scalings_out_of_symmetric_sums") == 0);
  require_bitwise(jit(vmap(plain))(thetas), vmap(plain)(thetas));
}

TEST_CASE("a captured symmetric matrix scaled per example under vmap: its sums stay per example", "[jit][fuse]") {
  // S is unbatched and S / p batched: not a scaling of one value, so nothing moves; each example keeps its own sum.
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 54, DType::f64), w = squared_distances(n, 55, DType::f64);
  const Tensor ps = exp(randn({4, 1}, 56));
  auto fn = [&](const Tensor& p) { return sum(neg(s / p)) + sum(w * s / p) * 0.5; };
  const Tensor got = jit(vmap(fn))(ps), want = vmap(fn)(ps);
  const std::vector<double> g = got.to_vector<double>(), e = want.to_vector<double>();
  REQUIRE(g.size() == 4);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - e[i]) <= 1e-12 * std::abs(e[i]));
}

TEST_CASE("jit merges steps that equal captured numbers or its own rewrites make equal", "[jit]") {
  const Tensor x = randn({300}, 57);
  const Tensor half = Tensor::scalar(0.5), also_half = Tensor::scalar(0.5);
  const Tensor not_half = Tensor::scalar(std::nextafter(0.5, 1.0));
  auto twice = [](const Tensor& c, const Tensor& d) {
    return [c, d](const Tensor& a) { return exp(a * c) + exp(a * d) * 2.0; };
  };
  // Two captured 0.5s are one value: exp(x * 0.5) runs once, as when the function shares one tensor.
  const PlanSummary shared = jit(twice(half, half)).compile(x);
  const PlanSummary equal = jit(twice(half, also_half)).compile(x);
  CHECK(equal.merged == shared.merged + 1);  // the constant too; the product and exp as the trace merges them
  CHECK(equal.kernels == shared.kernels);
  require_bitwise(jit(twice(half, also_half))(x), twice(half, also_half)(x));
  // One ulp apart: two values, two exps, each bitwise eager.
  const PlanSummary apart = jit(twice(half, not_half)).compile(x);
  CHECK(apart.kernels == shared.kernels + 2);
  require_bitwise(jit(twice(half, not_half))(x), twice(half, not_half)(x));

  // A scaling moved out of a sum over a symmetric matrix leaves w * k, which the second sum reads too: one product.
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 58, DType::f64), w = squared_distances(n, 59, DType::f64) * 0.1;
  const Tensor thetas = randn({3, 2}, 60) * 0.3;
  auto moved = [&](const Tensor& theta) {
    const Tensor k = exp(s * -0.5 / square(exp(slice(theta, 0, 0, 1)))), p = exp(slice(theta, 0, 1, 2));
    return sum(w * (p * k)) + sum(w * k * s);
  };
  auto by_hand = [&](const Tensor& theta) {
    const Tensor k = exp(s * -0.5 / square(exp(slice(theta, 0, 0, 1)))), p = exp(slice(theta, 0, 1, 2));
    const Tensor wk = w * k;
    return p * sum(wk) + sum(wk * s);
  };
  const PlanSummary rewritten = jit(vmap(moved)).compile(as_batch(thetas));
  CHECK(rewritten.rewrites_by("move_scalings_out_of_symmetric_sums") >= 1);
  CHECK(rewritten.kernels <= jit(vmap(by_hand)).compile(as_batch(thetas)).kernels);
  const Tensor one = on_threads(1, [&] { return jit(vmap(moved))(thetas); });
  const Tensor three = on_threads(3, [&] { return jit(vmap(moved))(thetas); });
  require_bitwise(one, three);
  const std::vector<double> got = one.to_vector<double>(), want = vmap(moved)(thetas).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-12 * std::abs(want[i]));
}

TEST_CASE("results that merged steps compute stay separate results", "[jit]") {
  const Tensor x = randn({4, 5}, 61);
  const Tensor c = Tensor::scalar(3.0), d = Tensor::scalar(3.0);
  auto both = [&](const Tensor& a) { return std::make_tuple(a * c, a * d, exp(a * d)); };
  const auto [p, q, r] = jit(both)(x);
  const auto [ep, eq, er] = both(x);
  CHECK(p.raw_data() != q.raw_data());  // two results, two buffers
  require_bitwise(p, ep);
  require_bitwise(q, eq);
  require_bitwise(r, er);
}

TEST_CASE("sums over rows of a low-rank product times a matrix take the thin product first", "[jit][matmul]") {
  const std::int64_t n = 40, m = 7;
  const Tensor u = randn({n, 2}, 62), ut = randn({2, n}, 63), w = randn({2, m}, 64), c = randn({n, m}, 65);
  const Tensor u5 = randn({n, 5}, 66), w5 = randn({5, m}, 67);
  auto close = [](const Tensor& got, const Tensor& want) {
    const std::vector<double> g = got.to_vector<double>(), e = want.to_vector<double>();
    REQUIRE(g.size() == e.size());
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - e[i]) <= 1e-12 * (1.0 + std::abs(e[i])));
  };
  using F = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<F, std::vector<Tensor>>> contracted = {
      {[](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(matmul(a, b) * d, {0}); }, {u, w, c}},
      {[](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(d * matmul(a, b), {0}); }, {u, w, c}},
      {[](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(matmul(a, b, true, false) * d, {0}); },
       {ut, w, c}},
      {[](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(matmul(a, b) * d, {0}, true); }, {u, w, c}},
  };
  for (const auto& [f, in] : contracted) {
    auto g = [&](const Tensor& a, const Tensor& b, const Tensor& d) { return f(a, b, d); };
    const auto step = jit(g);
    CHECK(step.compile(in[0], in[1], in[2]).rewrites_by("contract_low_rank_row_sums") == 1);
    close(step(in[0], in[1], in[2]), g(in[0], in[1], in[2]));
  }
  // Any rank below the rows' count contracts; a rank of n or more does not (the flops would not shrink).
  auto any_rank = [](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(matmul(a, b) * d, {0}); };
  CHECK(jit(any_rank).compile(u5, w5, c).rewrites_by("contract_low_rank_row_sums") == 1);
  close(jit(any_rank)(u5, w5, c), any_rank(u5, w5, c));
  const Tensor u_wide = randn({4, 6}, 70), w_wide = randn({6, m}, 71), c_short = randn({4, m}, 72);
  CHECK(jit(any_rank).compile(u_wide, w_wide, c_short).rewrites_by("contract_low_rank_row_sums") == 0);
  // Left as they are: W read transposed, a sum over columns, a product something else reads too.
  auto w_read_transposed = [](const Tensor& a, const Tensor& b, const Tensor& d) {
    return sum(matmul(a, b, false, true) * d, {0});
  };
  CHECK(jit(w_read_transposed).compile(u, w.t(), c).rewrites_by("contract_low_rank_row_sums") == 0);
  auto columns = [](const Tensor& a, const Tensor& b, const Tensor& d) { return sum(matmul(a, b) * d, {1}); };
  CHECK(jit(columns).compile(u, w, c).rewrites_by("contract_low_rank_row_sums") == 0);
  auto shared = [](const Tensor& a, const Tensor& b, const Tensor& d) {
    const Tensor p = matmul(a, b);
    return sum(p * d, {0}) + sum(p, {0});
  };
  CHECK(jit(shared).compile(u, w, c).rewrites_by("contract_low_rank_row_sums") == 0);
  require_bitwise(jit(shared)(u, w, c), shared(u, w, c));

  // The seed program's gradient has it (the cotangent of F diag(p^2) F^T is rank 2): batched, close to eager.
  const Tensor big_f = randn({30, 6}, 68), ps = randn({5, 6}, 69), ones_n = ones({30}), eye_n = eye(30);
  auto loss = [&](const Tensor& p) {
    return mean(cho_solve(cho_factor(matmul(big_f * square(p), big_f.t()) + eye_n), ones_n));
  };
  const auto step = jit(vmap(value_and_grad(loss)));
  CHECK(step.compile(as_batch(ps)).rewrites_by("contract_low_rank_row_sums") == 1);
  const auto [value, gradient] = step(ps);
  const auto [eager_value, eager_gradient] = vmap(value_and_grad(loss))(ps);
  close(value, eager_value);
  close(gradient, eager_gradient);
}

TEST_CASE("a lone elementwise step between two runs by the lower triangle leaves them one run", "[jit][fuse]") {
  // m = a * p is not symmetric: a one-step run that cannot take in the run after it, so it stays a step between them,
  // as do max(m) and the scalar steps (whose buffers no other value reuses).
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 70, DType::f64), a = randn({n, n}, 71), thetas = randn({3, 2}, 72) * 0.3;
  auto fn = [&](const Tensor& theta) {
    const Tensor k = exp(s * -0.5 / square(exp(slice(theta, 0, 0, 1))));
    const Tensor m = a * exp(slice(theta, 0, 1, 2));
    return sum(k * s + exp(k) * max(m));
  };
  const auto step = jit(vmap(fn));
  const PlanSummary summary = step.compile(as_batch(thetas));
  CHECK(summary.fused_runs == 1);
  CHECK(summary.fused_lower >= 5);
  const std::vector<double> got = step(thetas).to_vector<double>(), want = vmap(fn)(thetas).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-12 * std::abs(want[i]));
}

TEST_CASE("runs on symmetric matrices that make or read masks: one-byte bools mirrored and compared as bits",
          "[jit][fuse][bool]") {
  const std::int64_t n = 200;
  const Tensor s = squared_distances(n, 48, DType::f64), theta = randn({4}, 49) * 0.3;
  // A mask made by the run and needed whole: its lower triangle is computed, then mirrored byte by byte.
  auto made = [&](const Tensor& th) {
    const Tensor k = kernel_of(s, th);
    const Tensor near = greater(k, full({}, 0.5));
    return std::vector<Tensor>{near, where(near, k, zeros({})) * s};
  };
  CHECK(jit(made).compile(theta).fused_lower >= 1);
  const std::vector<Tensor> got = jit(made)(theta), want = made(theta);
  CHECK(got[0].to_vector<bool>() == want[0].to_vector<bool>());
  require_bitwise(got[1], want[1]);
  // A captured mask, symmetric (the selection may run by the lower triangle) or not in one entry (it must not).
  std::int64_t lower[2] = {};
  for (const bool symmetric : {true, false}) {
    INFO((symmetric ? "symmetric mask" : "one entry changed"));
    std::vector<double> values = squared_distances(n, 48, DType::f64).to_vector<double>();
    if (!symmetric) values[static_cast<std::size_t>(150 * n + 3)] = -1.0;
    const Tensor captured = less(Tensor::from_vector(values, {n, n}), full({}, 0.0));  // one true entry or none
    auto read = [&](const Tensor& th) {
      const Tensor k = kernel_of(s, th);
      return std::vector<Tensor>{where(captured, s, k) * 2.0 + 1.0};
    };
    lower[symmetric ? 0 : 1] = jit(read).compile(theta).fused_lower;
    require_bitwise(jit(read)(theta)[0], read(theta)[0]);
  }
  CHECK(lower[0] > lower[1]);
}
