// The CUDA backend against the CPU backend: every op and gradient, factorization errors, jit plans
// on the GPU, the sizes people run (the seed program, the CO2 fit, batches past one library
// call), float32, two threads on one device, transfers, and the errors for missing devices and
// exhausted memory.
#include <cmath>
#include <thread>
#include <tuple>

#include "../../examples/gp_model.hpp"
#include "../../tools/bench/small_work.hpp"
#include "../device_suite.hpp"

using namespace vt;
using namespace vt::testing;

namespace {
const Device gpu = Device::cuda(0);

// max |got - want| / max |want|: gradients of a batch mean are tiny, so an element-wise absolute
// tolerance would pass anything.
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  REQUIRE(g.size() == w.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    diff = std::max(diff, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

// The seed program (examples/seed_cholesky_grad.cpp): for each example p, mean((F diag(p^2) F^T + I)^-1 1)
// with F the nobs x 2 ngp sine and cosine basis; the loss is the batch mean.
struct Seed {
  Tensor f, ft, identity, ones;
  Seed(std::int64_t nobs, std::int64_t ngp, DType dtype, Device device) {
    std::vector<double> basis(static_cast<std::size_t>(nobs * 2 * ngp));
    for (std::int64_t i = 0; i < nobs; ++i)
      for (std::int64_t k = 0; k < ngp; ++k) {
        const double angle =
            2 * M_PI * static_cast<double>(k + 1) * static_cast<double>(i) / static_cast<double>(nobs - 1);
        basis[static_cast<std::size_t>(i * 2 * ngp + 2 * k)] = std::sin(angle);
        basis[static_cast<std::size_t>(i * 2 * ngp + 2 * k + 1)] = std::cos(angle);
      }
    f = Tensor::from_vector(basis, {nobs, 2 * ngp}, dtype, device);
    ft = f.t();
    identity = eye(nobs, dtype, device);
    ones = vt::ones({nobs}, dtype, device);
  }
  Tensor operator()(const Tensor& batch) const {
    auto example = [this](const Tensor& p) {
      return mean(cho_solve(cho_factor(matmul(f * square(p), ft) + identity), ones));
    };
    return mean(vmap(example)(batch));
  }
};

// Runs jit(value_and_grad(seed)) at batch B on cuda:0 and on the CPU; returns the relative errors.
std::pair<double, double> seed_errors(std::int64_t nobs, std::int64_t ngp, std::int64_t batch, DType dtype) {
  const Seed on_gpu(nobs, ngp, dtype, gpu), on_cpu(nobs, ngp, dtype, Device::cpu());
  const Tensor p = as_batch(randn({batch, 2 * ngp}, 7, dtype));
  const auto [v_gpu, g_gpu] = jit(value_and_grad(on_gpu))(p.to(gpu));
  const auto [v_cpu, g_cpu] = jit(value_and_grad(on_cpu))(p);
  CHECK(g_gpu.device() == gpu);
  return {relative_error(v_gpu, v_cpu), relative_error(g_gpu, g_cpu)};
}

// A batch of SPD matrices with example `bad` (if any) not positive definite at minor 2.
Tensor spd_batch(std::int64_t batch, std::int64_t n, std::int64_t bad, std::uint64_t seed) {
  const Tensor m = randn({batch, n, n}, seed);
  std::vector<double> v = (matmul(m, swapaxes(m, -1, -2)) / static_cast<double>(n) + eye(n)).to_vector<double>();
  if (bad >= 0) v[static_cast<std::size_t>(bad * n * n + n + 1)] = -1.0;
  return as_batch(Tensor::from_vector(v, {batch, n, n}));
}

// mean over the batch of mean(A^-1 1) + logdet(A): a loss whose every step a failure can reach.
Tensor factor_loss(const Tensor& a) {
  auto example = [](const Tensor& x) {
    const CholeskyFactor c = cho_factor(x);
    return mean(cho_solve(c, ones({x.shape(-1)}, x.dtype(), x.device()))) + logdet(c);
  };
  return mean(vmap(example)(a));
}
}  // namespace

TEST_CASE("every op and gradient on cuda:0 matches the CPU", "[gpu]") { run_device_suite(gpu); }

TEST_CASE("factorization errors on cuda:0 match the CPU's", "[gpu]") { check_factorization_errors(gpu); }

TEST_CASE("qr and eigh errors on cuda:0 match the CPU's", "[gpu]") { check_decomposition_errors(gpu); }

TEST_CASE("an out-of-range index on cuda:0 raises when the op or plan ends", "[gpu]") { check_index_errors(gpu); }

TEST_CASE("a jitted value_and_grad on cuda:0 traces once for every batch size and matches the CPU", "[gpu]") {
  auto loss = [](const Tensor& p) {
    const Tensor f = randn({32, 6}, 3, p.dtype(), p.device());
    const Tensor a = matmul(f * square(p), f.t()) + eye(32, p.dtype(), p.device());
    return mean(cho_solve(cho_factor(a), ones({32}, p.dtype(), p.device())));
  };
  auto batch_loss = [&](const Tensor& p) { return mean(vmap(loss)(p)); };
  auto step = jit(value_and_grad(batch_loss));
  for (std::int64_t b : {1, 7, 64}) {
    const Tensor p = as_batch(randn({b, 6}, 10 + static_cast<std::uint64_t>(b)));
    const auto [v_gpu, g_gpu] = step(p.to(gpu));
    const auto [v_cpu, g_cpu] = value_and_grad(batch_loss)(p);
    CHECK(g_gpu.device() == gpu);
    require_close(v_gpu, v_cpu.to_vector<double>(), 1e-10);
    require_close(g_gpu, g_cpu.to_vector<double>(), 1e-10);
  }
  CHECK(step.counters().traces == 1);
  CHECK(step.counters().cache_hits == 2);
  CHECK(step.counters().recordings == 3);  // a CUDA graph per batch size...
  CHECK(step.counters().replays == 3);     // ...launched by every call
  const auto [v, g] = step(as_batch(randn({7, 6}, 17)).to(gpu));
  const auto [v_cpu, g_cpu] = value_and_grad(batch_loss)(as_batch(randn({7, 6}, 17)));
  require_close(g, g_cpu.to_vector<double>(), 1e-10);
  CHECK(step.counters().replays == 4);
}

TEST_CASE("a Kalman filter by scan and an [N, K] mixture under jit(vmap(value_and_grad)) on cuda:0 match the CPU",
          "[gpu][loops]") {
  using vt_bench::kalman_and_mixture;
  auto step = jit(vmap(value_and_grad(kalman_and_mixture)));
  for (int call = 0; call < 4; ++call) {  // each batch size twice: a loop run again takes over its body's recording
    const std::int64_t b = call % 2 == 0 ? 3 : 64;
    const Tensor thetas = randn({b, 3}, 40 + static_cast<std::uint64_t>(call)) * 0.1;
    const auto [v_gpu, g_gpu] = step(as_batch(thetas).to(gpu));
    const auto [v_cpu, g_cpu] = vmap(value_and_grad(kalman_and_mixture))(as_batch(thetas));
    CHECK(g_gpu.device() == gpu);
    CHECK(relative_error(v_gpu.to(Device::cpu()), v_cpu) < 1e-10);
    CHECK(relative_error(g_gpu.to(Device::cpu()), g_cpu) < 1e-10);
  }
}

TEST_CASE("64 small Cholesky factors per example under jit(vmap(value_and_grad)) on cuda:0 match the CPU",
          "[gpu][small]") {
  using vt_bench::small_factors;
  auto step = jit(vmap(value_and_grad(small_factors)));
  for (const std::int64_t b : {3, 64}) {
    const Tensor thetas = randn({b, 3}, 50 + static_cast<std::uint64_t>(b)) * 0.1;
    const auto [v_gpu, g_gpu] = step(as_batch(thetas).to(gpu));
    const auto [v_cpu, g_cpu] = vmap(value_and_grad(small_factors))(as_batch(thetas));
    CHECK(relative_error(v_gpu.to(Device::cpu()), v_cpu) < 1e-10);
    CHECK(relative_error(g_gpu.to(Device::cpu()), g_cpu) < 1e-10);
  }
}

TEST_CASE("large transfers round-trip exactly", "[gpu]") {
  const Tensor x = randn({1 << 20, 8}, 5);  // 64 MiB
  const Tensor on_gpu = x.to(gpu);
  const MemoryStats held = memory_stats(gpu);
  CHECK(held.known);
  CHECK(held.in_use >= std::size_t{64} << 20);
  CHECK(held.peak >= held.in_use);
  const Tensor back = on_gpu.to(Device::cpu());
  CHECK(back.to_vector<double>() == x.to_vector<double>());
  // 8M terms summed in another order: agreement to ~1e-9 relative is what double rounding allows.
  CHECK(sum(x.to(gpu)).item() == Approx(sum(x).item()).epsilon(1e-8));
}

TEST_CASE("exhausted device memory and absent devices give errors, and the device stays usable", "[gpu]") {
  const std::string oom = error_of([] { (void)Tensor::empty({std::int64_t{1} << 37}, DType::f64, gpu); });  // 1 TiB
  CHECK_THAT(oom, Catch::Contains("cuda:0") && Catch::Contains("out of device memory"));
  CHECK(sum(ones({10}, DType::f64, gpu)).item() == 10.0);
  const Device absent = Device::cuda(cuda_device_count());
  CHECK_THAT(error_of([&] { (void)ones({2}, DType::f64, absent); }), Catch::Contains("is not available"));
}

TEST_CASE("the seed program at its size (B = 2048, n = 256) on cuda:0 matches the CPU", "[gpu]") {
  const auto [value, gradient] = seed_errors(256, 64, 2048, DType::f64);
  CHECK(value <= 1e-10);
  CHECK(gradient <= 1e-10);
}

TEST_CASE("float32 values and gradients on cuda:0 match the CPU's", "[gpu]") {
  const auto [value, gradient] = seed_errors(48, 6, 16, DType::f32);
  CHECK(value <= 1e-5);
  CHECK(gradient <= 1e-3);  // float32 through a factorization of condition ~1e2
}

TEST_CASE("the CO2 likelihood for 8 starts (n = 521) on cuda:0 matches the CPU and scikit-learn", "[gpu]") {
  const gp::Series s = gp::read_csv(VTAPE_CO2_DATA);
  double mean_y = 0;
  for (double v : s.y) mean_y += v / static_cast<double>(s.y.size());
  std::vector<double> centred;
  for (double v : s.y) centred.push_back(v - mean_y);
  const auto n = static_cast<std::int64_t>(centred.size());
  // scikit-learn's optimum, then seven points around it.
  const std::vector<double> optimum = {7.604416279,  3.943521672,  1.941557834, 4.516338972,
                                       0.3920420878, -1.247242236, 1.061256502, -0.03252319171,
                                       -3.342626632, -2.103734234, -3.304978524};
  std::vector<double> thetas;
  const std::vector<double> noise = (randn({8, gp::n_theta}, 3) * 0.05).to_vector<double>();
  for (std::size_t b = 0; b < 8; ++b)
    for (std::size_t k = 0; k < optimum.size(); ++k)
      thetas.push_back(optimum[k] + (b == 0 ? 0.0 : noise[b * optimum.size() + k]));
  const Tensor theta = as_batch(Tensor::from_vector(thetas, {8, gp::n_theta}));
  auto evaluate = [&](Device device) {
    const gp::Inputs inputs(s.t, device);
    const Tensor y = Tensor::from_vector(centred, {n}, DType::f64, device);
    auto lml = [&](const Tensor& t) { return gp::log_marginal_likelihood(t, inputs, y); };
    return jit(vmap(value_and_grad(lml)))(theta.to(device));
  };
  const auto [v_gpu, g_gpu] = evaluate(gpu);
  const auto [v_cpu, g_cpu] = evaluate(Device::cpu());
  // The kernel matrix's condition number is ~1e6: the summation order moves the tenth digit.
  CHECK(relative_error(v_gpu, v_cpu) <= 1e-9);
  CHECK(relative_error(g_gpu, g_cpu) <= 1e-8);
  CHECK(v_gpu.to_vector<double>()[0] == Approx(-115.0516348).epsilon(1e-9));  // scikit-learn's value
}

TEST_CASE("more matrices than one batched library call takes (B = 70000, n = 4) on cuda:0", "[gpu]") {
  const Tensor a = spd_batch(70000, 4, -1, 11);
  const Tensor b = as_batch(randn({70000, 4, 2}, 12));
  auto loss = [](const Tensor& x, const Tensor& rhs) {
    auto example = [](const Tensor& m, const Tensor& r) {
      const CholeskyFactor c = cho_factor(m);
      return sum(cho_solve(c, r)) + sum(cho_solve(c, reshape(slice(r, 1, 0, 1), {4}))) + sum(matmul(m, r));
    };
    return mean(vmap(example)(x, rhs));
  };
  const auto [v_gpu, g_gpu] = value_and_grad(loss)(a.to(gpu), b.to(gpu));
  const auto [v_cpu, g_cpu] = value_and_grad(loss)(a, b);
  CHECK(relative_error(v_gpu, v_cpu) <= 1e-10);
  CHECK(relative_error(g_gpu, g_cpu) <= 1e-10);
  // The last example's factor: chunks must not skip or repeat matrices.
  CHECK(relative_error(cholesky(a.to(gpu)), cholesky(a)) <= 1e-12);
}

TEST_CASE("a failure inside a jitted plan on cuda:0 raises at its end, naming the example, and leaves nothing stale",
          "[gpu]") {
  auto step = jit(value_and_grad(factor_loss));
  try {
    (void)step(spd_batch(8, 6, 5, 21).to(gpu));
    FAIL("no error");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 5);
    CHECK(e.minor == 2);
    CHECK_THAT(std::string(e.what()), Catch::Contains("example 5 of the batch of 8"));
  }
  const Tensor good = spd_batch(8, 6, -1, 22);
  const auto [v, g] = step(good.to(gpu));  // the same plan, no error left over from the last call
  const auto [v_cpu, g_cpu] = value_and_grad(factor_loss)(good);
  CHECK(relative_error(v, v_cpu) <= 1e-12);
  CHECK(relative_error(g, g_cpu) <= 1e-10);
  CHECK(step.counters().traces == 1);
}

TEST_CASE("two threads sharing cuda:0 each get their own results and errors", "[gpu]") {
  const Tensor good = spd_batch(32, 16, -1, 31), bad = spd_batch(32, 16, 9, 32);
  const auto [v_want, g_want] = value_and_grad(factor_loss)(good);
  const double v_expected = v_want.item();
  const std::vector<double> g_expected = g_want.to_vector<double>();
  std::atomic<int> good_ok{0}, bad_ok{0};
  std::thread failing([&] {
    auto step = jit(value_and_grad(factor_loss));
    const Tensor x = bad.to(gpu);
    for (int i = 0; i < 50; ++i) try {
        (void)step(x);
      } catch (const NotPositiveDefinite& e) {
        if (e.batch_index == 9) ++bad_ok;
      }
  });
  std::thread passing([&] {
    auto step = jit(value_and_grad(factor_loss));
    const Tensor x = good.to(gpu);
    for (int i = 0; i < 50; ++i) try {
        const auto [v, g] = step(x);
        const std::vector<double> gv = g.to_vector<double>();
        bool same = std::abs(v.item() - v_expected) <= 1e-12 * std::abs(v_expected);
        for (std::size_t k = 0; k < gv.size(); ++k) same &= std::abs(gv[k] - g_expected[k]) <= 1e-10;
        good_ok += same;
      } catch (const Error&) {
      }
  });
  failing.join();
  passing.join();
  CHECK(bad_ok == 50);
  CHECK(good_ok == 50);
}
