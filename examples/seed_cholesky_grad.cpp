// The program of JAX issue 21313, in vtape: value and gradient of the mean over a batch of
//   func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones))
// with F the nobs x 2ngp Fourier design matrix, jitted once and run at every batch size.
//
//   seed_cholesky_grad [--nbatch 16,32,...] [--nobs 256] [--ngp 64] [--reps 5] [--json]
//                      [--pars FILE.npy [--grad-out FILE.npy]] [--device cpu|cuda|cuda:N]
//   (--help gives the bounds: batch sizes 1..65536, nobs 1..8192, ngp 1..4096, reps 1..1e6)
//
// For each batch size B: a fresh jitted callable, whose trace-and-plan time (no execution) is
// compile_ms; then run_ms, the median over `reps` calls on random parameters [B, 2ngp], and
// run_cpu_ms, the median of those calls' process CPU time (all threads). One more
// jitted callable is reused across all batch sizes; its counters are `shared_cache`. With --device
// cuda, the data and parameters live on the GPU and every kernel of the plan runs there; run_ms
// ends when the value has been copied back to the host, so it covers the whole GPU computation.
//
// Under mpirun (vtape built with its MPI layer), each rank takes its slice of every batch and the
// mean spans all ranks (vt::mpi::global_mean): the value and gradient are the single-process ones.
// Rank 0 prints, with the ranks and the bytes each rank sent per call; --grad-out gathers the
// gradient. Without MPI or mpirun, nothing changes.
#include <fmt/core.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <variant>
#include <vtape/vtape.hpp>

#include "example_cli.hpp"
#include "example_mpi.hpp"

namespace {

struct Options {
  std::vector<std::int64_t> nbatch = {16, 32, 64, 128, 256, 512, 1024, 2048};
  std::int64_t nobs = 256, ngp = 64;
  int reps = 5;
  bool json = false;
  std::string pars, grad_out;
  vt::Device device;
};

// Bounds, so that no size computed from them can overflow: at most 65536 examples a batch and
// nobs <= 8192, 2 ngp <= 8192, so the largest tensor, [B, nobs, nobs] of float64, is at most
// 2^16 * 2^26 * 8 bytes = 32 TiB (more than a machine has: that is an out-of-memory error).
constexpr std::int64_t max_nbatch = 65536, max_nobs = 8192, max_ngp = 4096, max_reps = 1000000;
constexpr std::size_t max_batch_sizes = 64;

// Returns the options, or the exit status when the program should stop (after --help, or a bad
// command line, reported on one line).
std::variant<Options, int> parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "The program of JAX issue 21313: compile and run times of jit(value_and_grad(mean(vmap(func)))) per "
      "batch size,\n  func(p) = mean(cho_solve(cho_factor(F diag(p^2) F^T + I), ones)), F the nobs x 2ngp "
      "Fourier design matrix.",
      "seed_cholesky_grad"};
  cli::configure(app);
  app.footer(
      "The bounds keep every size in range: the largest tensor, [B, nobs, nobs] of float64,\n"
      "is at most 32 TiB. "
      "Asking for more memory than the machine has ends with a one-line out-of-memory error.");
  std::string nbatch = "16,32,64,128,256,512,1024,2048", device = "cpu";
  app.add_option(
         "--nbatch", nbatch,
         fmt::format("batch sizes, comma-separated, each 1..{}, at most {} of them", max_nbatch, max_batch_sizes))
      ->type_name("B1,B2,...")
      ->check(cli::integer_list(1, max_nbatch, max_batch_sizes))
      ->capture_default_str();
  cli::add_integer(app, "--nobs", o.nobs, 1, max_nobs, "N", "observations: F has nobs rows, A is nobs x nobs");
  cli::add_integer(app, "--ngp", o.ngp, 1, max_ngp, "M", "Fourier frequencies: F has 2 ngp columns");
  cli::add_integer(app, "--reps", o.reps, 1, max_reps, "R", "timed calls per batch size, the median is reported");
  app.add_flag("--json", o.json, "print the results as one JSON object");
  CLI::Option* pars =
      app.add_option("--pars", o.pars, "run on the parameters [B, 2 ngp] of this .npy file instead of random ones")
          ->type_name("FILE.npy")
          ->check(CLI::ExistingFile);
  app.add_option("--grad-out", o.grad_out, "write the gradient for --pars to this .npy file")
      ->type_name("FILE.npy")
      ->needs(pars);
  app.add_option("--device", device,
                 "where the data live and the plan runs: cpu, cuda (under mpirun: cuda:local_rank) or cuda:N")
      ->type_name("DEVICE")
      ->check(cli::device())
      ->capture_default_str();
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;
  std::vector<std::int64_t> sizes;
  if (std::string problem = cli::read_int_list(nbatch, 1, max_nbatch, max_batch_sizes, sizes); !problem.empty())
    throw vt::Error("--nbatch: " + problem);
  o.nbatch = sizes;
  o.device = example_mpi::device(device);
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

// CPU time of every thread of the process, in ms.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Run {
  std::int64_t nbatch;
  double compile_ms, run_ms, run_cpu_ms, value, peak_rss_mib;
  double peak_device_mib;  // -1 on the CPU
  vt::PlanSummary plan;
};

}  // namespace

int main(int argc, char** argv) try {
  const example_mpi::Scope mpi(argc, argv);
  const std::variant<Options, int> parsed = parse(argc, argv);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  const Options& o = std::get<Options>(parsed);
  const vt::Tensor F = fourier_basis(o.nobs, o.ngp, o.device);
  const vt::Tensor Ft = F.t();
  const vt::Tensor ones = vt::ones({o.nobs}, vt::DType::f64, o.device);
  const vt::Tensor identity = vt::eye(o.nobs, vt::DType::f64, o.device);

  auto func = [&](const vt::Tensor& p) {  // one example: p is [2 ngp]
    const vt::Tensor A = vt::matmul(F * vt::square(p), Ft) + identity;
    return vt::mean(vt::cho_solve(vt::cho_factor(A), ones));
  };
  auto loss = [&](const vt::Tensor& P) { return example_mpi::batch_mean(vt::vmap(func)(P)); };  // P: a batch of p
  auto make_step = [&] { return vt::jit(vt::value_and_grad(loss)); };

  std::vector<Run> runs;
  long long bytes_per_call = 0;
  auto shared = make_step();
  auto measure = [&](const vt::Tensor& P, std::int64_t nbatch) {  // nbatch: the global batch
    auto step = make_step();
    const auto t0 = std::chrono::steady_clock::now();
    const vt::PlanSummary plan = step.compile(P);
    const double compile_ms = ms_since(t0);
    std::vector<double> times, cpu_times;
    double value = 0;
    for (int r = 0; r < o.reps; ++r) {
      const long long sent = example_mpi::bytes_sent();
      const double c1 = process_cpu_ms();
      const auto t1 = std::chrono::steady_clock::now();
      value = example_mpi::call(step, P).first.item();
      times.push_back(ms_since(t1));
      cpu_times.push_back(process_cpu_ms() - c1);
      // The last call's traffic: from the second call on, a plan's folded constants send nothing more.
      bytes_per_call = example_mpi::bytes_sent() - sent;
    }
    std::sort(times.begin(), times.end());
    std::sort(cpu_times.begin(), cpu_times.end());
    example_mpi::call(shared, P);  // one step for every batch size: traced once (shared_cache)
    const vt::MemoryStats device_memory = vt::memory_stats(P.device());
    const double device_mib = device_memory.known ? static_cast<double>(device_memory.peak) / (1 << 20) : -1.0;
    return Run{nbatch,     compile_ms, times[times.size() / 2], cpu_times[cpu_times.size() / 2], value, peak_rss_mib(),
               device_mib, plan};
  };

  if (!o.pars.empty()) {
    const vt::Tensor P = vt::load_npy(o.pars);
    if (P.ndim() != 2 || P.shape(1) != 2 * o.ngp)
      throw vt::Error(
          fmt::format("--pars: expected parameters of shape [B, {}], got {}", 2 * o.ngp, vt::to_string(P.shape())));
    const vt::Tensor batch = example_mpi::shard(vt::as_batch(P.astype(vt::DType::f64)).to(o.device));
    runs.push_back(measure(batch, P.shape(0)));
    if (!o.grad_out.empty()) {
      const vt::Tensor grad = vt::unbatch(example_mpi::gather(example_mpi::call(shared, batch).second));
      if (mpi.rank() == 0) vt::save_npy(o.grad_out, grad);
    }
  } else {
    for (std::size_t i = 0; i < o.nbatch.size(); ++i) {
      const std::int64_t b = o.nbatch[i];
      if (!o.json && mpi.rank() == 0) fmt::print(stderr, "batch {} ...\n", b);
      runs.push_back(
          measure(example_mpi::shard(vt::as_batch(vt::randn({b, 2 * o.ngp}, 1000 + i, vt::DType::f64, o.device))), b));
    }
  }

  const vt::JitCounters c = shared.counters();
  if (mpi.rank() != 0) return 0;
  // Under mpirun: the ranks, and the bytes each rank sent into collectives per call (the last
  // batch size's, status words included).
  const std::string ranks =
      mpi.on() ? fmt::format("\"ranks\": {}, \"bytes_per_call\": {}, ", mpi.size(), bytes_per_call) : "";
  if (o.json) {
    std::string items;
    for (const Run& r : runs)
      items += fmt::format(
          "{}{{\"nbatch\": {}, \"compile_ms\": {:.4f}, \"run_ms\": {:.3f}, \"run_cpu_ms\": {:.3f}, "
          "\"value\": {:.17g}, \"peak_rss_mib\": {:.1f}, \"peak_device_mib\": {:.1f}, "
          "\"plan_kernels\": {}, \"arena_bytes_per_example\": {}}}",
          items.empty() ? "" : ", ", r.nbatch, r.compile_ms, r.run_ms, r.run_cpu_ms, r.value, r.peak_rss_mib,
          r.peak_device_mib, r.plan.kernels, r.plan.arena_bytes_per_example);
    fmt::print(
        "{{{}\"device\": \"{}\", \"nobs\": {}, \"ngp\": {}, \"runs\": [{}], \"shared_cache\": {{\"traces\": {}, "
        "\"cache_hits\": {}, \"recordings\": {}, \"replays\": {}}}}}\n",
        ranks, vt::to_string(o.device), o.nobs, o.ngp, items, c.traces, c.cache_hits, c.recordings, c.replays);
    return 0;
  }
  fmt::print("jit(value_and_grad(mean(vmap(func)))) on {}: nobs = {}, ngp = {}, median of {} runs\n",
             vt::to_string(o.device), o.nobs, o.ngp, o.reps);
  if (mpi.on())
    fmt::print("sharded over {} MPI ranks (batch = the global batch); {} bytes sent per call and rank\n", mpi.size(),
               bytes_per_call);
  fmt::print("{:>7} {:>12} {:>12} {:>16} {:>12}\n", "nbatch", "compile_ms", "run_ms", "value", "peak MiB");
  for (const Run& r : runs)
    fmt::print("{:>7} {:>12.3f} {:>12.2f} {:>16.10f} {:>12.1f}\n", r.nbatch, r.compile_ms, r.run_ms, r.value,
               r.peak_rss_mib);
  fmt::print(
      "one jitted callable across every batch size: {} trace(s), {} cache hit(s), {} recording(s), {} replay(s)\n",
      c.traces, c.cache_hits, c.recordings, c.replays);
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("seed_cholesky_grad");
}
