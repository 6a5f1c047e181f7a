// Device placement without a GPU: the same op suite as the GPU tests, run on a stand-in device
// whose memory the host cannot read and whose kernels run asynchronously, plus transfers, mixed-device
// errors, jit's per-device cache, and the ordering of reads, frees and deferred errors.
#include "device_suite.hpp"
#include "opaque_device.hpp"

#include <cmath>
#include <latch>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace vt;
using namespace vt::testing;

namespace {
const Device stand_in = Device::cuda(5);
}

TEST_CASE("every op and gradient on a stand-in device matches the CPU", "[device]") {
  OpaqueDevice device(stand_in);
  run_device_suite(stand_in);
}

TEST_CASE("transfers keep values, dtype and batching, and reading goes through the backend", "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor x = as_batch(randn({3, 2, 4}, 1));
  const Tensor d = x.to(stand_in);
  CHECK(d.device() == stand_in);
  CHECK(d.is_batched());
  CHECK(d.batch_size() == 3);
  CHECK(d.shape() == Shape{2, 4});
  require_close(to_device(d, Device::cpu()), x.to_vector<double>(), 0.0);
  CHECK(to_device(d, stand_in).impl_ptr() == d.impl_ptr());  // already there: no copy

  const Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32, stand_in);
  CHECK(m.at<double>({1, 2}) == 6.0);
  CHECK(m.at<float>({0, 1}) == 2.0f);
  CHECK(sum(m).item() == 21.0);
  CHECK(fmt::format("{}", m) == "Tensor([[1., 2., 3.],\n        [4., 5., 6.]], dtype=float32)");
  CHECK(eye(3, DType::f64, stand_in).to_vector<double>() == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(arange(0, 3, 1, DType::f64, stand_in).to_vector<double>() == std::vector<double>{0, 1, 2});
  CHECK(randn({4}, 3, DType::f64, stand_in).to_vector<double>() == randn({4}, 3).to_vector<double>());
}

TEST_CASE("ops refuse inputs on different devices, naming both", "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor a = ones({2}), b = ones({2}, DType::f64, stand_in);
  const std::string message = error_of([&] { (void)(a + b); });
  CHECK_THAT(message, Catch::Contains("add") && Catch::Contains("cpu") && Catch::Contains("cuda:5"));
  CHECK_THAT(error_of([&] { (void)matmul(eye(2, DType::f64, stand_in), eye(2)); }), Catch::Contains("matmul"));
}

TEST_CASE("unavailable devices give errors that name them", "[device]") {
  CHECK_THAT(error_of([] { (void)ones({2}, DType::f64, Device::cuda(9)); }), Catch::Contains("cuda:9"));
  CHECK_THAT(error_of([] { (void)ones({2}).to(Device::cuda(9)); }), Catch::Contains("cuda:9"));
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:3") == Device::cuda(3));
  CHECK_THAT(error_of([] { (void)parse_device("gpu"); }), Catch::Contains("'gpu' is not a device"));
  CHECK_THAT(error_of([] { (void)parse_device("cuda:-1"); }), Catch::Contains("not a device"));
  if (!built_with_cuda()) CHECK(cuda_device_count() == 0);
  // A build with the CUDA backend loads its module even without a GPU (the module then reports
  // the missing driver or device): a module that cannot load is found here, not on a GPU machine.
  if (built_with_cuda() && cuda_device_count() == 0)
    CHECK_THAT(error_of([] { (void)ones({2}, DType::f64, Device::cuda(0)); }),
               Catch::Contains("cuda:0 is not available") && !Catch::Contains("could not be loaded"));
  CHECK_FALSE(memory_stats(Device::cpu()).known);  // the CPU backend does not count its bytes
}

TEST_CASE("gradients flow back across a transfer", "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor x = randn({5}, 2);
  const Tensor g = grad([](const Tensor& v) { return sum(square(v.to(stand_in)) * 3.0); })(x);
  CHECK(g.device() == Device::cpu());
  require_close(g, (x * 6.0).to_vector<double>(), 1e-14);
  // and from the device back to the CPU
  const Tensor xd = x.to(stand_in);
  const Tensor gd = grad([](const Tensor& v) { return sum(exp(v.to(Device::cpu()))); })(xd);
  CHECK(gd.device() == stand_in);
  require_close(gd, exp(x).to_vector<double>(), 1e-14);
}

TEST_CASE("jit compiles once per device and never per batch size", "[device]") {
  OpaqueDevice device(stand_in);
  auto f = jit([](const Tensor& p) {
    const Tensor a = matmul(p.reshape({2, 2}), p.reshape({2, 2}).t()) + eye(2, p.dtype(), p.device());
    return logdet(a);
  });
  const Tensor p = randn({7, 4}, 4);
  const Tensor on_cpu = f(as_batch(p));
  const Tensor on_dev = f(as_batch(p).to(stand_in));
  CHECK(on_dev.device() == stand_in);
  require_close(on_dev, on_cpu.to_vector<double>(), 1e-12);
  CHECK(f.counters().traces == 2);
  (void)f(as_batch(randn({13, 4}, 5)).to(stand_in));
  CHECK(f.counters().traces == 2);
  CHECK(f.counters().cache_hits == 1);
  // value_and_grad under jit on the device matches eager on the CPU
  auto vg = jit(
      value_and_grad([](const Tensor& q) { return sum(logdet(matmul(q, q.t()) + eye(3, q.dtype(), q.device()))); }));
  const Tensor q = randn({3, 3}, 6);
  const auto [v_dev, g_dev] = vg(q.to(stand_in));
  const auto [v_cpu, g_cpu] = value_and_grad([](const Tensor& r) { return sum(logdet(matmul(r, r.t()) + eye(3))); })(q);
  CHECK(g_dev.device() == stand_in);
  require_close(v_dev, v_cpu.to_vector<double>(), 1e-12);
  require_close(g_dev, g_cpu.to_vector<double>(), 1e-12);
}

TEST_CASE("a jitted function cannot move traced values between devices", "[device]") {
  OpaqueDevice device(stand_in);
  auto f = jit([](const Tensor& p) { return sum(p.to(stand_in)); });
  CHECK_THAT(error_of([&] { (void)f(ones({3})); }), Catch::Contains("to_device") && Catch::Contains("one device"));
}

TEST_CASE("a jitted function whose arguments are on two devices is refused, not run on one", "[device]") {
  OpaqueDevice device(stand_in);
  auto f = jit([](const Tensor& x, const Tensor& y) { return std::pair{x * 2.0, y * 2.0}; });
  const std::string message = error_of([&] { (void)f(ones({2}), ones({2}, DType::f64, stand_in)); });
  CHECK_THAT(message, Catch::Contains("jit") && Catch::Contains("one device") && Catch::Contains("cuda:5"));
  // A function of no arguments runs where the tensors it captures live.
  const Tensor c = ones({3}, DType::f64, stand_in);
  auto g = jit([&c]() { return sum(c * 2.0); });
  const Tensor r = g();
  CHECK(r.device() == stand_in);
  CHECK(r.item() == 6.0);
}

TEST_CASE("vmap runs on the device", "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor x = randn({4, 3, 3}, 8);
  auto f = [](const Tensor& m) { return logdet(matmul(m, m.t()) + eye(3, m.dtype(), m.device())); };
  const Tensor on_dev = vmap(f)(x.to(stand_in));
  CHECK(on_dev.device() == stand_in);
  require_close(on_dev, vmap(f)(x).to_vector<double>(), 1e-12);
}

TEST_CASE("not positive definite on a device: the same error and batch index as on the CPU", "[device]") {
  OpaqueDevice device(stand_in);
  check_factorization_errors(stand_in);
}

TEST_CASE("qr and eigh on a device: the same errors and batch index as on the CPU", "[device][qr][eigh]") {
  OpaqueDevice device(stand_in);
  check_decomposition_errors(stand_in);
}

// The stand-in device runs its kernels asynchronously, on a worker thread, as a GPU stream does:
// the tests below fail when an op reads, frees or raises out of order.

namespace {

// `count` SPD 4 x 4 matrices, batched, where the examples in `bad` have a leading minor of order 3
// that is negative.
Tensor spd_batch(std::int64_t count, const std::vector<std::int64_t>& bad, std::uint64_t seed) {
  std::vector<double> v = unbatch(make_input(Input::spd, {4, 4}, count, seed, DType::f64)).to_vector<double>();
  for (std::int64_t i : bad) v[static_cast<std::size_t>(i * 16 + 2 * 4 + 2)] = -5.0;
  return as_batch(Tensor::from_vector(v, {count, 4, 4}));
}

// Runs f, which must raise NotPositiveDefinite for example `index` (minor 3) of a batch.
template <class F>
void require_failure(F&& f, long index) {
  try {
    f();
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == index);
    CHECK(e.minor == 3);
    CHECK_THAT(std::string(e.what()), Catch::Contains("example " + std::to_string(index) + " of the batch"));
  }
}

}  // namespace

TEST_CASE("a long chain of eager ops on the asynchronous device gives the CPU's values", "[device]") {
  OpaqueDevice device(stand_in);
  // Every step frees temporaries that queued kernels still read, and hands over a host buffer
  // that is gone before the kernels reading it run.
  auto chain = [](Tensor x, Device where) {
    const Tensor a = make_input(Input::spd, {6, 6}, 0, 3, DType::f64).to(where);
    for (int i = 0; i < 60; ++i) {
      const Tensor shift = Tensor::from_vector(std::vector<double>(6, 0.01 * i), {6, 1}, DType::f64, where);
      x = tanh(matmul(a, x) * 0.1 + shift) + sin(x) * 0.5;
      if (i % 10 == 0) x = cho_solve(cho_factor(a), x) + x - mean(x, {0}, true);
    }
    return x;
  };
  const Tensor x = randn({6, 3}, 4);
  const Tensor got = chain(x.to(stand_in), stand_in);
  CHECK(got.device() == stand_in);
  require_close(got, chain(x, Device::cpu()).to_vector<double>(), 1e-12);
}

TEST_CASE("a jitted value_and_grad through Cholesky on the asynchronous device matches the CPU", "[device]") {
  OpaqueDevice device(stand_in);
  auto loss = [](const Tensor& p) {
    const Tensor f = randn({12, 6}, 3, p.dtype(), p.device());
    const Tensor a = matmul(f * square(p), f.t()) + eye(12, p.dtype(), p.device());
    return mean(cho_solve(cho_factor(a), ones({12}, p.dtype(), p.device()))) + logdet(a);
  };
  auto batch_loss = [&](const Tensor& p) { return mean(vmap(loss)(p)); };
  auto step = jit(value_and_grad(batch_loss));
  for (std::int64_t b : {1, 7, 64}) {
    INFO("batch " << b);
    const Tensor p = as_batch(randn({b, 6}, 10 + static_cast<std::uint64_t>(b)));
    const auto [v_dev, g_dev] = step(p.to(stand_in));
    const auto [v_cpu, g_cpu] = value_and_grad(batch_loss)(p);
    CHECK(g_dev.device() == stand_in);
    require_close(v_dev, v_cpu.to_vector<double>(), 1e-12);
    require_close(g_dev, g_cpu.to_vector<double>(), 1e-12);
  }
  CHECK(step.counters().traces == 1);
}

TEST_CASE("not positive definite on the asynchronous device raises the batch index, and the device recovers",
          "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor bad = spd_batch(9, {5, 7}, 1);  // the first failure is reported
  const Tensor good = spd_batch(9, {}, 1);
  const Tensor bad_dev = bad.to(stand_in), good_dev = good.to(stand_in);
  auto batch_logdet = [](const Tensor& a) { return sum(vmap([](const Tensor& m) { return logdet(m); })(a)); };
  auto factor = jit([](const Tensor& a) { return cholesky(a) * 2.0; });
  auto step = jit(value_and_grad(batch_logdet));

  require_failure([&] { (void)cholesky(bad_dev); }, 5);
  require_failure([&] { (void)sum(exp(cholesky(bad_dev))).item(); }, 5);
  require_failure([&] { (void)factor(bad_dev); }, 5);  // raised at the end of the plan, steps queued after it
  require_failure([&] { (void)step(bad_dev); }, 5);
  require_failure([&] { (void)value_and_grad(batch_logdet)(bad_dev); }, 5);

  // Nothing stale is left: later calls, eager and jitted, give the CPU's values and raise nothing.
  CHECK_NOTHROW(device.raise_deferred());
  require_close(cholesky(good_dev), cholesky(good).to_vector<double>(), 1e-12);
  require_close(factor(good_dev), (cholesky(good) * 2.0).to_vector<double>(), 1e-12);
  const auto [v_dev, g_dev] = step(good_dev);
  const auto [v_cpu, g_cpu] = value_and_grad(batch_logdet)(good);
  require_close(v_dev, v_cpu.to_vector<double>(), 1e-12);
  require_close(g_dev, g_cpu.to_vector<double>(), 1e-12);
  CHECK(sum(ones({5}, DType::f64, stand_in)).item() == 5.0);
  CHECK(factor.counters().traces == 1);
}

TEST_CASE("cholesky_checked on the asynchronous device gives NaN rows and failure counts, and raises nothing",
          "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor a = spd_batch(6, {1, 4}, 2);
  auto eager = [](const Tensor& x) {
    const CheckedCholesky c = cholesky_checked(x);
    return std::pair{c.l, c.info};
  };
  auto jitted = jit(eager);
  const std::vector<double> want = cholesky(spd_batch(6, {}, 2)).to_vector<double>();
  for (bool use_jit : {false, true}) {
    INFO((use_jit ? "jit" : "eager"));
    std::pair<Tensor, Tensor> result;
    REQUIRE_NOTHROW(result = use_jit ? jitted(a.to(stand_in)) : eager(a.to(stand_in)));
    const auto& [l, info] = result;
    CHECK_NOTHROW(device.raise_deferred());
    CHECK(info.to_vector<double>() == std::vector<double>{0, 3, 0, 0, 3, 0});
    CHECK(sum(sign(info)).item() == 2.0);  // the number of failures
    const std::vector<double> got = unbatch(l).to_vector<double>();
    for (std::size_t e = 0; e < 6; ++e)
      for (std::size_t j = 0; j < 16; ++j) {
        INFO("example " << e << ", element " << j);
        const double x = got[e * 16 + j];
        if (e != 1 && e != 4) CHECK(std::abs(x - want[e * 16 + j]) <= 1e-12);
        else if (j >= 2 * 4) CHECK(std::isnan(x));  // rows 2 and 3: from the failing minor on
        else CHECK(std::isfinite(x));
      }
  }
}

TEST_CASE("threads sharing the asynchronous device each get their own factorization errors", "[device]") {
  OpaqueDevice device(stand_in);
  const Tensor good = spd_batch(8, {}, 3);
  const double want = sum(logdet(good)).item();
  // Per thread, per call: the batch index raised, or -1 and the value. Catch's assertions are not
  // thread-safe, so the threads only record.
  struct Outcome {
    std::vector<long> raised;
    std::vector<double> values;
    std::string unexpected;
  };
  constexpr int calls = 60;
  auto fails = [](int thread, int call) { return thread == 0 ? call % 2 == 0 : call % 3 == 1; };
  std::latch start(2);
  auto run = [&](int thread, Outcome& out) {
    try {
      // Steps queued after the factorization keep its failure pending while the other thread's
      // plans end and look for theirs.
      auto f = jit([](const Tensor& a) {
        Tensor x = logdet(a);
        for (int i = 0; i < 8; ++i) x = x + sin(x) * 0.0;
        return sum(x);
      });
      const Tensor bad_dev = spd_batch(8, {thread == 0 ? 2 : 6}, 3).to(stand_in), good_dev = good.to(stand_in);
      start.arrive_and_wait();
      for (int call = 0; call < calls; ++call) {
        try {
          out.values.push_back(f(fails(thread, call) ? bad_dev : good_dev).item());
          out.raised.push_back(-1);
        } catch (const NotPositiveDefinite& e) {
          out.raised.push_back(e.batch_index);
          out.values.push_back(0.0);
        }
      }
    } catch (const std::exception& e) {
      out.unexpected = e.what();
    }
  };
  Outcome outcomes[2];
  std::thread first(run, 0, std::ref(outcomes[0])), second(run, 1, std::ref(outcomes[1]));
  first.join();
  second.join();
  for (int thread = 0; thread < 2; ++thread) {
    INFO("thread " << thread);
    const Outcome& out = outcomes[thread];
    CHECK(out.unexpected == "");
    REQUIRE(out.raised.size() == calls);
    for (int call = 0; call < calls; ++call) {
      INFO("call " << call);
      CHECK(out.raised[call] == (fails(thread, call) ? (thread == 0 ? 2 : 6) : -1));
      if (!fails(thread, call)) CHECK(std::abs(out.values[call] - want) <= 1e-12 * std::abs(want));
    }
  }
  CHECK_NOTHROW(device.raise_deferred());
}

// Recording: jit records a plan once per batch size on a device that records (the GPU: a CUDA
// graph) and replays it. The stand-in device keeps its kernels instead of running them while it
// records, so a plan that ran while being recorded, or a replay that read stale arguments or handed
// out buffers the next replay overwrites, fails here.

namespace {

// The batch mean of mean(A^-1 1) + logdet(A) over 4 x 4 matrices, and its gradient.
auto recorded_step() {
  auto loss = [](const Tensor& a) {
    auto example = [](const Tensor& x) {
      const CholeskyFactor c = cho_factor(x);
      return mean(cho_solve(c, ones({4}, x.dtype(), x.device()))) + logdet(c);
    };
    return mean(vmap(example)(a));
  };
  return std::make_pair(jit(value_and_grad(loss)), value_and_grad(loss));
}

}  // namespace

TEST_CASE("a recorded plan replays per batch size with fresh arguments and results of their own", "[device]") {
  for (auto mode : {OpaqueDevice::Recording::replays, OpaqueDevice::Recording::off, OpaqueDevice::Recording::fails}) {
    INFO("recording mode " << static_cast<int>(mode));
    OpaqueDevice device(stand_in, mode);
    auto [step, eager] = recorded_step();
    std::vector<std::pair<Tensor, Tensor>> kept;  // every call's results, checked after all calls
    std::vector<Tensor> inputs;
    for (std::int64_t b : {3, 5, 3, 5, 3, 1}) {
      inputs.push_back(spd_batch(b, {}, 40 + inputs.size()));
      kept.push_back(step(inputs.back().to(stand_in)));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      INFO("call " << i);
      const auto [v, g] = eager(inputs[i]);
      require_close(kept[i].first, v.to_vector<double>(), 1e-12);
      require_close(kept[i].second, g.to_vector<double>(), 1e-12);
    }
    const bool replays = mode == OpaqueDevice::Recording::replays;
    CHECK(step.counters().traces == 1);
    CHECK(step.counters().recordings == (replays ? 3 : 0));  // B = 3, 5 and 1
    CHECK(step.counters().replays == (replays ? 6 : 0));
    CHECK(device.replays() == (replays ? 6u : 0u));
  }
}

TEST_CASE("a replayed plan raises each call's own factorization failure", "[device]") {
  OpaqueDevice device(stand_in);
  auto [step, eager] = recorded_step();
  const Tensor good = spd_batch(6, {}, 51), bad = spd_batch(6, {4}, 52), worse = spd_batch(6, {1, 4}, 53);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    require_failure([&] { (void)step(bad.to(stand_in)); }, 4);
    const auto [v, g] = step(good.to(stand_in));
    require_close(g, eager(good).second.to_vector<double>(), 1e-12);
    require_failure([&] { (void)step(worse.to(stand_in)); }, 1);
  }
  CHECK(device.replays() == 9);
  device.raise_deferred();  // nothing left over
}

TEST_CASE("threads replaying one plan at one batch size each get their own results", "[device]") {
  OpaqueDevice device(stand_in);
  auto [step, eager] = recorded_step();
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> want;
  for (std::uint64_t t = 0; t < 4; ++t) {
    inputs.push_back(spd_batch(8, {}, 60 + t));
    want.push_back(eager(inputs.back()).second.to_vector<double>());
  }
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < inputs.size(); ++t)
    threads.emplace_back([&, t] {
      const Tensor x = inputs[t].to(stand_in);
      for (int i = 0; i < 25; ++i) {
        const std::vector<double> g = step(x).second.to_vector<double>();
        bool same = g.size() == want[t].size();
        for (std::size_t k = 0; same && k < g.size(); ++k) same = std::abs(g[k] - want[t][k]) <= 1e-12;
        right += same;
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(right == 100);
  CHECK(step.counters().traces == 1);
}
