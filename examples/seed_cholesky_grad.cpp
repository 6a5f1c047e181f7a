// The program of JAX issue 21313, in vtape: value and gradient of the mean over a batch of
//   func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones))
// with F the nobs x 2ngp Fourier design matrix, jitted once and run at every batch size.
//
//   seed_cholesky_grad [--nbatch 16,32,...] [--nobs 256] [--ngp 64] [--reps 5] [--json]
//                      [--pars FILE.npy [--grad-out FILE.npy]] [--device cpu|cuda|cuda:N]
//
// For each batch size B: a fresh jitted callable, whose trace-and-plan time (no execution) is
// compile_ms; then run_ms, the median over `reps` calls on random parameters [B, 2ngp]. One more
// jitted callable is reused across all batch sizes; its counters are `shared_cache`. With --device
// cuda, the data and parameters live on the GPU and every kernel of the plan runs there; run_ms
// ends when the value has been copied back to the host, so it covers the whole GPU computation.
#include <fmt/core.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <sstream>
#include <string>
#include <vtape/vtape.hpp>

namespace {

struct Options {
  std::vector<std::int64_t> nbatch = {16, 32, 64, 128, 256, 512, 1024, 2048};
  std::int64_t nobs = 256, ngp = 64;
  int reps = 5;
  bool json = false;
  std::string pars, grad_out;
  vt::Device device;
};

constexpr const char* usage_text =
    "usage: seed_cholesky_grad [--nbatch 16,32,...] [--nobs N] [--ngp M] [--reps R] [--json]\n"
    "                          [--pars FILE.npy [--grad-out FILE.npy]] [--device cpu|cuda|cuda:N]\n";

[[noreturn]] void usage(const std::string& problem) {
  fmt::print(stderr, "seed_cholesky_grad: {}\n{}", problem, usage_text);
  std::exit(2);
}

std::int64_t positive(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  usage(fmt::format("{} needs a positive integer, got '{}'", flag, text));
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      fmt::print("{}", usage_text);
      std::exit(0);
    } else if (a == "--nbatch") {
      o.nbatch.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) o.nbatch.push_back(positive("--nbatch", item));
    } else if (a == "--nobs") {
      o.nobs = positive(a, value());
    } else if (a == "--ngp") {
      o.ngp = positive(a, value());
    } else if (a == "--reps") {
      o.reps = static_cast<int>(positive(a, value()));
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--pars") {
      o.pars = value();
    } else if (a == "--grad-out") {
      o.grad_out = value();
    } else if (a == "--device") {
      const std::string name = value();
      try {
        o.device = vt::parse_device(name);
      } catch (const vt::Error& e) {
        usage(e.what());
      }
    } else {
      usage("unknown argument " + a);
    }
  }
  if (!o.grad_out.empty() && o.pars.empty()) usage("--grad-out needs --pars");
  return o;
}

// F[:, 2j] = sin(2 pi (j+1) t), F[:, 2j+1] = cos(2 pi (j+1) t), t = linspace(0, 1, nobs).
vt::Tensor fourier_basis(std::int64_t nobs, std::int64_t ngp, vt::Device device) {
  std::vector<double> f(static_cast<std::size_t>(nobs * 2 * ngp));
  for (std::int64_t i = 0; i < nobs; ++i) {
    const double t = nobs == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(nobs - 1);
    for (std::int64_t j = 0; j < ngp; ++j) {
      const double w = 2.0 * std::numbers::pi * static_cast<double>(j + 1) * t;
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j)] = std::sin(w);
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j + 1)] = std::cos(w);
    }
  }
  return vt::Tensor::from_vector(f, {nobs, 2 * ngp}, vt::DType::f64, device);
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Run {
  std::int64_t nbatch;
  double compile_ms, run_ms, value, peak_rss_mib;
  double peak_device_mib;  // -1 on the CPU
  vt::PlanSummary plan;
};

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const vt::Tensor F = fourier_basis(o.nobs, o.ngp, o.device);
  const vt::Tensor Ft = F.t();
  const vt::Tensor ones = vt::ones({o.nobs}, vt::DType::f64, o.device);
  const vt::Tensor identity = vt::eye(o.nobs, vt::DType::f64, o.device);

  auto func = [&](const vt::Tensor& p) {  // one example: p is [2 ngp]
    const vt::Tensor A = vt::matmul(F * vt::square(p), Ft) + identity;
    return vt::mean(vt::cho_solve(vt::cho_factor(A), ones));
  };
  auto loss = [&](const vt::Tensor& P) { return vt::mean(vt::vmap(func)(P)); };  // P: a batch of p
  auto make_step = [&] { return vt::jit(vt::value_and_grad(loss)); };

  std::vector<Run> runs;
  auto shared = make_step();
  auto measure = [&](const vt::Tensor& P) {
    auto step = make_step();
    const auto t0 = std::chrono::steady_clock::now();
    const vt::PlanSummary plan = step.compile(P);
    const double compile_ms = ms_since(t0);
    std::vector<double> times;
    double value = 0;
    for (int r = 0; r < o.reps; ++r) {
      const auto t1 = std::chrono::steady_clock::now();
      value = step(P).first.item();
      times.push_back(ms_since(t1));
    }
    std::sort(times.begin(), times.end());
    shared(P);
    const vt::MemoryStats device_memory = vt::memory_stats(P.device());
    const double device_mib = device_memory.known ? static_cast<double>(device_memory.peak) / (1 << 20) : -1.0;
    return Run{P.batch_size(), compile_ms, times[times.size() / 2], value, peak_rss_mib(), device_mib, plan};
  };

  if (!o.pars.empty()) {
    const vt::Tensor P = vt::load_npy(o.pars);
    if (P.ndim() != 2 || P.shape(1) != 2 * o.ngp)
      throw vt::Error(fmt::format("--pars: expected parameters of shape [B, {}], got {}", 2 * o.ngp, vt::to_string(P.shape())));
    const vt::Tensor batch = vt::as_batch(P.astype(vt::DType::f64)).to(o.device);
    runs.push_back(measure(batch));
    if (!o.grad_out.empty()) vt::save_npy(o.grad_out, vt::unbatch(shared(batch).second));
  } else {
    for (std::size_t i = 0; i < o.nbatch.size(); ++i) {
      const std::int64_t b = o.nbatch[i];
      if (!o.json) fmt::print(stderr, "batch {} ...\n", b);
      runs.push_back(measure(vt::as_batch(vt::randn({b, 2 * o.ngp}, 1000 + i, vt::DType::f64, o.device))));
    }
  }

  const vt::JitCounters c = shared.counters();
  if (o.json) {
    std::string items;
    for (const Run& r : runs)
      items += fmt::format("{}{{\"nbatch\": {}, \"compile_ms\": {:.4f}, \"run_ms\": {:.3f}, \"value\": {:.17g}, "
                           "\"peak_rss_mib\": {:.1f}, \"peak_device_mib\": {:.1f}, \"plan_kernels\": {}, "
                           "\"arena_bytes_per_example\": {}}}",
                           items.empty() ? "" : ", ", r.nbatch, r.compile_ms, r.run_ms, r.value, r.peak_rss_mib,
                           r.peak_device_mib,
                           r.plan.kernels, r.plan.arena_bytes_per_example);
    fmt::print("{{\"device\": \"{}\", \"nobs\": {}, \"ngp\": {}, \"runs\": [{}], \"shared_cache\": {{\"traces\": {}, "
               "\"cache_hits\": {}, \"recordings\": {}, \"replays\": {}}}}}\n",
               vt::to_string(o.device), o.nobs, o.ngp, items, c.traces, c.cache_hits, c.recordings, c.replays);
    return 0;
  }
  fmt::print("jit(value_and_grad(mean(vmap(func)))) on {}: nobs = {}, ngp = {}, median of {} runs\n", vt::to_string(o.device), o.nobs,
             o.ngp, o.reps);
  fmt::print("{:>7} {:>12} {:>12} {:>16} {:>12}\n", "nbatch", "compile_ms", "run_ms", "value", "peak MiB");
  for (const Run& r : runs)
    fmt::print("{:>7} {:>12.3f} {:>12.2f} {:>16.10f} {:>12.1f}\n", r.nbatch, r.compile_ms, r.run_ms, r.value,
               r.peak_rss_mib);
  fmt::print("one jitted callable across every batch size: {} trace(s), {} cache hit(s), {} recording(s), {} replay(s)\n",
             c.traces, c.cache_hits, c.recordings, c.replays);
  return 0;
} catch (const vt::Error& e) {
  fmt::print(stderr, "seed_cholesky_grad: {}\n", e.what());
  return 1;
}
