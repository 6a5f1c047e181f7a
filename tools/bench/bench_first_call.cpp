// What the first call of a jitted plan at a new batch size costs against later calls, and what
// compiling costs when the function captures a large constant.
//
//   build/tools/bench_first_call [--program seed|constant] [--nbatch 1,7,64,256,1024] [--reps 7]
//                                [--compiles 9] [--json]
//
// Programs (both jit(value_and_grad(mean(vmap(f)))), one jitted callable reused across every
// batch size, as a user would):
//   seed      the program of JAX issue 21313 (examples/seed_cholesky_grad.cpp): nobs 256, ngp 64;
//   constant  f(p) = mean((F p - y)^2) with a captured F of 8000 x 400 (whose adjoint needs F^T).
// For each batch size, in the order given: first_ms is the first call at that B (the plan already
// compiled: the first B is compiled beforehand by `compile`), later_ms the median of `reps` more
// calls, ratio = first / later; the minor page faults of the first call and of a later one. compile_ms: the fastest of
// `compiles` fresh jitted callables' trace and plan (no execution) at the first batch size.
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

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

vt::Tensor fourier_basis(std::int64_t nobs, std::int64_t ngp) {
  std::vector<double> f(static_cast<std::size_t>(nobs * 2 * ngp));
  for (std::int64_t i = 0; i < nobs; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(nobs - 1);
    for (std::int64_t j = 0; j < ngp; ++j) {
      const double w = 2.0 * std::numbers::pi * static_cast<double>(j + 1) * t;
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j)] = std::sin(w);
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j + 1)] = std::cos(w);
    }
  }
  return vt::Tensor::from_vector(f, {nobs, 2 * ngp});
}

struct Row {
  std::int64_t nbatch;
  double first_ms, later_ms;
  long first_faults, later_faults;  // minor page faults: the first call's, the last later call's
};

template <class MakeStep>
void run(const std::string& program, std::int64_t width, MakeStep make_step, const std::vector<std::int64_t>& nbatch,
         int reps, int compiles, bool json) {
  auto batch_of = [&](std::int64_t b, std::uint64_t seed) { return vt::as_batch(vt::randn({b, width}, seed)); };
  double compile_ms = 1e300;
  for (int i = 0; i < compiles; ++i) {
    auto fresh = make_step();
    const vt::Tensor P = batch_of(nbatch.front(), 1);
    const auto t0 = std::chrono::steady_clock::now();
    fresh.compile(P);
    compile_ms = std::min(compile_ms, ms_since(t0));
  }
  auto step = make_step();
  step.compile(batch_of(nbatch.front(), 1));
  std::vector<Row> rows;
  for (std::size_t i = 0; i < nbatch.size(); ++i) {
    const vt::Tensor P = batch_of(nbatch[i], 100 + i);
    long faults = minor_faults();
    auto t0 = std::chrono::steady_clock::now();
    (void)step(P).first.item();
    const double first = ms_since(t0);
    const long first_faults = minor_faults() - faults;
    std::vector<double> later;
    long later_faults = 0;
    for (int r = 0; r < reps; ++r) {
      faults = minor_faults();
      t0 = std::chrono::steady_clock::now();
      (void)step(P).first.item();
      later.push_back(ms_since(t0));
      later_faults = minor_faults() - faults;
    }
    std::sort(later.begin(), later.end());
    rows.push_back({nbatch[i], first, later[later.size() / 2], first_faults, later_faults});
  }
  const vt::JitCounters c = step.counters();
  if (json) {
    std::string items;
    for (const Row& r : rows)
      items += fmt::format(
          "{}{{\"nbatch\": {}, \"first_ms\": {:.3f}, \"later_ms\": {:.3f}, \"ratio\": {:.3f}, "
          "\"first_faults\": {}, \"later_faults\": {}}}",
          items.empty() ? "" : ", ", r.nbatch, r.first_ms, r.later_ms, r.first_ms / r.later_ms, r.first_faults,
          r.later_faults);
    fmt::print("{{\"program\": \"{}\", \"compile_ms\": {:.4f}, \"traces\": {}, \"runs\": [{}]}}\n", program, compile_ms,
               c.traces, items);
    return;
  }
  fmt::print("{}: compile {:.3f} ms (fastest of {}), {} trace(s) for every batch size\n", program, compile_ms, compiles,
             c.traces);
  fmt::print("{:>7} {:>12} {:>12} {:>8} {:>13} {:>13}\n", "nbatch", "first_ms", "later_ms", "ratio", "first_faults",
             "later_faults");
  for (const Row& r : rows)
    fmt::print("{:>7} {:>12.3f} {:>12.3f} {:>8.2f} {:>13} {:>13}\n", r.nbatch, r.first_ms, r.later_ms,
               r.first_ms / r.later_ms, r.first_faults, r.later_faults);
}

}  // namespace

int main(int argc, char** argv) {
  std::string program = "seed";
  std::vector<std::int64_t> nbatch = {1, 7, 64, 256, 1024};
  int reps = 7, compiles = 9;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--program" && i + 1 < argc) {
      program = argv[++i];
    } else if (a == "--nbatch" && i + 1 < argc) {
      nbatch.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) nbatch.push_back(std::stoll(item));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--compiles" && i + 1 < argc) {
      compiles = std::stoi(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else {
      fmt::print(stderr,
                 "usage: bench_first_call [--program seed|constant] [--nbatch B1,B2,...] [--reps R] "
                 "[--compiles C] [--json]\n");
      return 2;
    }
  }
  if (nbatch.empty() || reps < 1 || compiles < 1 || (program != "seed" && program != "constant")) {
    fmt::print(stderr, "bench_first_call: bad arguments\n");
    return 2;
  }
  if (program == "seed") {
    const std::int64_t nobs = 256, ngp = 64;
    const vt::Tensor F = fourier_basis(nobs, ngp), Ft = F.t(), ones = vt::ones({nobs}), identity = vt::eye(nobs);
    auto func = [&](const vt::Tensor& p) {
      const vt::Tensor A = vt::matmul(F * vt::square(p), Ft) + identity;
      return vt::mean(vt::cho_solve(vt::cho_factor(A), ones));
    };
    auto loss = [&](const vt::Tensor& P) { return vt::mean(vt::vmap(func)(P)); };
    run(
        program, 2 * ngp, [&] { return vt::jit(vt::value_and_grad(loss)); }, nbatch, reps, compiles, json);
  } else {
    const std::int64_t rows = 8000, cols = 400;
    const vt::Tensor F = vt::randn({rows, cols}, 7) / std::sqrt(static_cast<double>(cols)), y = vt::randn({rows}, 8);
    auto func = [&](const vt::Tensor& p) { return vt::mean(vt::square(vt::matmul(F, p) - y)); };
    auto loss = [&](const vt::Tensor& P) { return vt::mean(vt::vmap(func)(P)); };
    run(
        program, cols, [&] { return vt::jit(vt::value_and_grad(loss)); }, nbatch, reps, compiles, json);
  }
  return 0;
}
