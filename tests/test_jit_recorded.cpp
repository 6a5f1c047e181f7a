// Small jit plans on the CPU are recorded once per batch size and replayed (backends/cpu/recording.cpp): a replay
// gives the bits a direct run gives, with each call's own arguments and results, raises each call's own failure,
// and large plans are not recorded.
#include <thread>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::require_close;

namespace {

// Bit for bit (no NaN here).
void require_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.is_batched() == want.is_batched());
  CHECK(got.to_vector<double>() == want.to_vector<double>());
}

// Every compiled path and some that call their kernels: broadcasting arithmetic, strided copies (a transpose, a
// slice), fills (zeros), float32, a reduction, a unary map, a matrix product and a Cholesky solve.
Tensor small_program(const Tensor& x) {
  const Tensor row = reshape(x, {1, 3}), column = reshape(x, {3, 1});
  const Tensor outer = row * column - column / (square(row) + 1.0);     // [3, 3], broadcast
  const Tensor A = matmul(outer, outer.t()) + eye(3, x.dtype()) * 4.0;  // SPD
  const Tensor s = cho_solve(cho_factor(A), x) + sum(slice(outer.t(), 0, 1, 3)) * exp(x);
  return concatenate({s, zeros({2}, x.dtype()), astype(astype(x, DType::f32) * 2.0f, x.dtype())}, 0);
}

// The same plan run directly: a forced chunk of every example runs without recording.
template <class F>
Tensor direct(const F& f, const Tensor& x) {
  const JitChunkExamples whole(std::int64_t{1} << 40);
  return f(x);
}

}  // namespace

TEST_CASE("a small CPU plan is recorded per batch size and replays the bits of a direct run", "[jit][recorded]") {
  auto f = jit(small_program);
  auto g = jit(vmap(small_program));
  auto h = jit(grad([](const Tensor& x) { return sum(square(small_program(x))); }));
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    const Tensor x = Tensor::from_vector({0.3 + call, -0.7, 1.1 * call}, {3});
    const Tensor xb = randn({4, 3}, 70 + static_cast<std::uint64_t>(call));
    const Tensor y = f(x), yb = g(xb), dx = h(x);
    require_same(y, direct(f, x));
    require_same(yb, direct(g, xb));
    require_same(dx, direct(h, x));
    require_close(y, small_program(x).to_vector<double>(), 1e-12);
    require_close(dx, grad([](const Tensor& v) { return sum(square(small_program(v))); })(x).to_vector<double>(),
                  1e-12);
  }
  CHECK(f.counters().traces == 1);
  CHECK(f.counters().recordings == 1);
  CHECK(f.counters().replays == 3);  // the direct runs are not replays
  CHECK(g.counters().recordings == 1);
  CHECK(h.counters().recordings == 1);
  // Another batch size is another recording.
  (void)g(randn({6, 3}, 80));
  CHECK(g.counters().recordings == 2);
}

TEST_CASE("results of replays are each call's own", "[jit][recorded]") {
  auto f = jit([](const Tensor& x) { return std::make_pair(x * 2.0, exp(x)); });
  const auto [a, b] = f(Tensor::from_vector({1, 2}, {2}));
  const auto [c, d] = f(Tensor::from_vector({3, 4}, {2}));
  CHECK(a.to_vector<double>() == std::vector<double>{2, 4});
  CHECK(c.to_vector<double>() == std::vector<double>{6, 8});
  CHECK(b.to_vector<double>()[0] == std::exp(1.0));
  CHECK(d.to_vector<double>()[1] == std::exp(4.0));
  CHECK(f.counters().replays == 2);
}

TEST_CASE("a replayed CPU plan raises each call's own factorization failure", "[jit][recorded]") {
  auto step = jit(vmap([](const Tensor& A) { return logdet(cho_factor(A)); }));
  const Tensor r = randn({3, 4, 4}, 90);
  const Tensor good = matmul(r, r.t()) + eye(4) * 0.5;
  std::vector<double> values = good.to_vector<double>();
  values[16] = -1.0;  // example 1's first pivot
  const Tensor bad = Tensor::from_vector(values, {3, 4, 4});
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    try {
      (void)step(bad);
      FAIL("no error");
    } catch (const NotPositiveDefinite& e) {
      CHECK(e.batch_index == 1);
    }
    require_close(step(good), vmap([](const Tensor& A) { return logdet(cho_factor(A)); })(good).to_vector<double>(),
                  1e-12);
  }
  CHECK(step.counters().recordings == 1);
}

TEST_CASE("a plan larger than the recorded size runs directly", "[jit][recorded]") {
  auto f = jit([](const Tensor& x) { return exp(x) * 2.0; });
  const Tensor large = f(as_batch(ones({8192, 8})));  // 512 KiB each way
  const Tensor small = f(as_batch(ones({2, 8})));
  CHECK(large.to_vector<double>()[12345] == std::exp(1.0) * 2.0);
  CHECK(small.to_vector<double>()[15] == std::exp(1.0) * 2.0);
  CHECK(f.counters().traces == 1);
  CHECK(f.counters().recordings == 1);  // the small batch only
  CHECK(f.counters().replays == 1);
}

TEST_CASE("threads replaying one small plan each get their own results", "[jit][recorded]") {
  auto f = jit([](const Tensor& x) { return sum(exp(x) * x); });
  std::vector<double> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) got[static_cast<std::size_t>(t)] = f(full({5}, 0.1 * t)).item<double>();
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) CHECK(got[static_cast<std::size_t>(t)] == Approx(5 * 0.1 * t * std::exp(0.1 * t)));
}

TEST_CASE("a recorded plan runs its fused elementwise runs step by step", "[jit][recorded]") {
  // float32 values of 8192 elements are tiled when run directly (a fused run with a sum in it); the call itself
  // stays under the recorded size, as the captured C is not the call's. A recording keeps backend calls only:
  // a fused run's sums and tiles are host work, so it records the run's steps one by one.
  const Tensor C = astype(randn({8192}, 100), DType::f32);
  auto f = jit([&](const Tensor& x) { return sum(C * x); });
  auto g = jit([&](const Tensor& x) { return slice(exp(C * x) * 2.0f, 0, 0, 4); });
  Tensor from_thread;
  std::thread([&] { from_thread = g(Tensor::from_vector({0.5}, {}, DType::f32)); }).join();  // recorded there
  for (int call = 1; call <= 3; ++call) {
    INFO("call " << call);
    const Tensor x = Tensor::from_vector({0.5 * call}, {}, DType::f32);
    require_close(f(x), (sum(astype(C, DType::f64)) * (0.5 * call)).to_vector<double>(), 1e-3);
    require_same(g(x), direct(g, x));  // replayed on this thread, after the recording's thread ended
  }
  require_same(from_thread, direct(g, Tensor::from_vector({0.5}, {}, DType::f32)));
  CHECK(f.counters().recordings == 1);
  CHECK(g.counters().recordings == 1);
}

TEST_CASE("a loop's body is recorded whatever its size, and its steps give the bits of a direct run",
          "[jit][recorded]") {
  Backend& cpu = backend_for(Device{});
  CHECK(cpu.records(1024, false));
  CHECK_FALSE(cpu.records(std::int64_t{1} << 30, false));  // a large plan runs by chunks instead
  CHECK(cpu.records(std::int64_t{1} << 30, true));         // a loop body at every step: replayed
  // A body of 2 x 12000 elements a step (far above the recorded size), under vmap: the loop over its recorded body
  // gives the bits of the same steps taken one by one, each a direct run of the body's ops.
  const auto step = [](const Tensor& c, const Tensor& x) {
    return std::pair<Tensor, Tensor>{exp(-square(c)) * x + sin(c) * 0.5, sum(c)};
  };
  const Tensor xs = randn({5, 12000}, 3), init = randn({2, 12000}, 4);
  const auto [carry, ys] = jit(vmap([&](const Tensor& c) { return scan(step, c, xs); }))(as_batch(init));
  std::vector<double> want_ys;
  for (std::int64_t b = 0; b < 2; ++b) {
    Tensor c = reshape(slice(init, 0, b, b + 1), {12000});
    for (std::int64_t t = 0; t < 5; ++t) {
      const auto [next, y] = step(c, reshape(slice(xs, 0, t, t + 1), {12000}));
      c = next;
      want_ys.push_back(y.item<double>());
    }
    CHECK(reshape(slice(unbatch(carry), 0, b, b + 1), {12000}).to_vector<double>() == c.to_vector<double>());
  }
  const std::vector<double> got_ys = unbatch(ys).to_vector<double>();
  REQUIRE(got_ys.size() == want_ys.size());
  for (std::size_t i = 0; i < got_ys.size(); ++i) CHECK(got_ys[i] == want_ys[i]);
}

TEST_CASE("a loop run again takes over its body's recording with each run's own inputs", "[jit][recorded][loops]") {
  // The body closes over theta (a lifted input, written into the recording's buffers at each run) and reads xs.
  const Tensor xs = randn({30, 4}, 5);
  const auto f = [&](const Tensor& theta) {
    const auto step = [&](const Tensor& c, const Tensor& x) {
      const Tensor next = tanh(c * theta + x);
      return std::pair<Tensor, Tensor>{next, sum(next * theta)};
    };
    const auto [carry, ys] = scan(step, theta * 0.5, xs);
    return sum(carry) + sum(ys);
  };
  auto g = jit(vmap(value_and_grad(f)));
  for (int call = 0; call < 6; ++call) {
    const std::int64_t batch = call % 3 == 2 ? 5 : 3;  // batch sizes in turn: recordings of each kept side by side
    const Tensor thetas = randn({batch, 4}, 90 + static_cast<std::uint64_t>(call));
    const auto [values, grads] = g(as_batch(thetas));
    INFO("call " << call);
    for (std::int64_t b = 0; b < batch; ++b) {
      const Tensor theta = reshape(slice(thetas, 0, b, b + 1), {4});
      const auto [v, d] = value_and_grad(f)(theta);
      require_close(reshape(slice(unbatch(values), 0, b, b + 1), {}), {v.item<double>()}, 1e-12);
      require_close(reshape(slice(unbatch(grads), 0, b, b + 1), {4}), d.to_vector<double>(), 1e-12);
    }
  }
}
