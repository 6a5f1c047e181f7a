// Device placement without a GPU: the same op suite as the GPU tests, run on a stand-in device
// whose memory the host cannot read, plus transfers, mixed-device errors and jit's per-device cache.
#include "device_suite.hpp"
#include "opaque_device.hpp"

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
  CHECK(fmt::format("{}", m) == "Tensor([[1, 2, 3], [4, 5, 6]], dtype=float32)");
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
  auto vg = jit(value_and_grad([](const Tensor& q) { return sum(logdet(matmul(q, q.t()) + eye(3, q.dtype(), q.device()))); }));
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
