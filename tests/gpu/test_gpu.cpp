// The CUDA backend against the CPU backend: every op and gradient, factorization errors, jit plans
// on the GPU, transfers, and the errors for missing devices and exhausted memory.
#include "../device_suite.hpp"

using namespace vt;
using namespace vt::testing;

namespace {
const Device gpu = Device::cuda(0);
}

TEST_CASE("every op and gradient on cuda:0 matches the CPU", "[gpu]") { run_device_suite(gpu); }

TEST_CASE("factorization errors on cuda:0 match the CPU's", "[gpu]") { check_factorization_errors(gpu); }

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
