// Small work per example on a device, against the CPU of the same machine in the same run: a Kalman filter by scan
// with a mixture (a loop under vmap, 2 x 2 products, short reductions) and 64 small Cholesky factors per example
// (tools/bench/small_work.hpp), each as jit(vmap(value_and_grad)) at several batch sizes. tools/gpu-check.sh runs it
// on the GPU; on a machine without one, --device cpu runs both columns on the CPU.
//
//   build/tools/bench_gpu_small [--device cuda] [--batches 8,64,1024] [--reps 5] [--json]
//
// Times are medians of `reps` calls after a warm-up call (the trace), each call ending with the values copied to the
// host; "first" is the first call at that batch size (a new batch size never traces again). Exits 1 when the device's
// values or gradients differ from the CPU's by more than 1e-10 (relative, or absolute below 1).
#include <fmt/core.h>

#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

#include "small_work.hpp"
#include "timing.hpp"

namespace {

struct Row {
  std::string model;
  std::int64_t batch;
  double device_ms, device_first_ms, cpu_ms, max_difference;
};

using Model = std::function<vt::Tensor(const vt::Tensor&)>;

// Values and gradients of jit(vmap(value_and_grad(model))) at thetas on `device`, timed.
struct Timed {
  double first_ms, ms;
  std::vector<double> values;
};

Timed time_on(const Model& model, const vt::Tensor& thetas, vt::Device device, int reps) {
  auto step = vt::jit(vt::vmap(vt::value_and_grad(model)));
  const vt::Tensor x = vt::as_batch(thetas.to(device));
  std::vector<double> values;
  const auto call = [&] {
    const auto [v, g] = step(x);
    values = v.to(vt::Device::cpu()).to_vector<double>();
    const std::vector<double> grads = g.to(vt::Device::cpu()).to_vector<double>();
    values.insert(values.end(), grads.begin(), grads.end());
  };
  const auto start = std::chrono::steady_clock::now();
  call();
  const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double median = vt_bench::median_seconds(reps, call);
  return {first * 1e3, median * 1e3, values};
}

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda";
  std::vector<std::int64_t> batches = {8, 64, 1024};
  int reps = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device_name = argv[++i];
    else if (a == "--batches" && i + 1 < argc) batches = parse_list(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      fmt::print(stderr, "usage: bench_gpu_small [--device cuda] [--batches 8,64,1024] [--reps 5] [--json]\n");
      return 2;
    }
  }
  const vt::Device device = vt::parse_device(device_name);
  const std::vector<std::pair<std::string, Model>> models = {{"kalman_and_mixture", vt_bench::kalman_and_mixture},
                                                             {"small_factors", vt_bench::small_factors}};
  std::vector<Row> rows;
  for (const auto& [name, model] : models)
    for (std::int64_t b : batches) {
      const vt::Tensor thetas = vt::randn({b, 3}, 7) * 0.1;
      const Timed on_device = time_on(model, thetas, device, reps);
      const Timed on_cpu = time_on(model, thetas, vt::Device::cpu(), reps);
      double difference = 0;
      for (std::size_t i = 0; i < on_cpu.values.size(); ++i)
        difference = std::max(
            difference, std::abs(on_device.values[i] - on_cpu.values[i]) / std::max(1.0, std::abs(on_cpu.values[i])));
      rows.push_back({name, b, on_device.ms, on_device.first_ms, on_cpu.ms, difference});
    }
  int status = 0;
  for (const Row& r : rows)
    if (!(r.max_difference <= 1e-10)) status = 1;
  if (json) {
    fmt::print("{{\"device\": \"{}\", \"rows\": [", device_name);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      fmt::print(
          "{}{{\"model\": \"{}\", \"batch\": {}, \"device_ms\": {:.4f}, \"device_first_ms\": {:.4f}, \"cpu_ms\": "
          "{:.4f}, \"max_difference\": {:.3g}}}",
          i ? ",\n " : "", r.model, r.batch, r.device_ms, r.device_first_ms, r.cpu_ms, r.max_difference);
    }
    fmt::print("]}}\n");
    return status;
  }
  fmt::print("jit(vmap(value_and_grad)), median of {} calls; device {} against the CPU of this machine\n", reps,
             device_name);
  fmt::print("  {:<20} {:>6} {:>11} {:>11} {:>11} {:>9} {:>10}\n", "model", "B", "device ms", "first ms", "CPU ms",
             "ratio", "max diff");
  for (const Row& r : rows)
    fmt::print("  {:<20} {:>6} {:>11.3f} {:>11.3f} {:>11.3f} {:>9.3f} {:>10.2g}\n", r.model, r.batch, r.device_ms,
               r.device_first_ms, r.cpu_ms, r.device_ms / r.cpu_ms, r.max_difference);
  return status;
}
