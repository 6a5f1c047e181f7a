// The model zoo, timed: per model and batch size, vtape's jit(vmap(value_and_grad(log_density))) and
// the model's hand-fused limit, called alternately in one process (the ratio is taken under the same
// conditions), with the first call at each new batch size, the compile time, and the largest
// differences between vtape's values and gradients and the limit's (two derivations of the same
// mathematics). tools/bench/zoo/run_zoo.py runs it with the JAX twins and writes docs/zoo.md.
//
//   build/tools/bench_zoo [--models seed,co2,...] [--batches 1,8,64,1024] [--reps 5] [--data ../shared/data]
//                         [--max-call-ms 20000] [--json] [--check] [--chunks] [--explain] [--soak CALLS]
//                         [--compiles 5]
//
// --check: the batch sizes 1 and 3, one call each; exits 1 where a model's vtape and limit values or
// gradients differ by more than 1e-8 relative to the largest entry (the ctest zoo_limits_match_vtape).
// --chunks: also the steady time with chunks forced to one example and to the whole batch (JitChunkExamples),
// against which the planner's chunk size is judged (docs/performance.md, "Chunk sizes").
// --explain: also the plan at each batch size (Jitted::explain), to see what the planner chose.
// --soak CALLS: instead of timing, CALLS calls of each model's jitted step at batch sizes drawn at random from
// --batches (a fixed seed), with the process's resident memory after the first tenth of them (every batch size's
// plan memory and recordings exist by then) and at every further tenth: memory that grows with the calls is a leak.
// --compiles N: how many later compiles (new jits of the model over the same data) compile_again_ms is the median of.
// A model whose data is missing is reported as skipped, and so is a batch size whose call would take
// over --max-call-ms by the previous size's time per example (co2 at B = 1024 is about a minute).
#include <fmt/core.h>
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "zoo.hpp"

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Medians of `reps` calls of a and b, alternating, after one warm-up call of each.
std::pair<double, double> time_alternately(int reps, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    auto t = std::chrono::steady_clock::now();
    a();
    ta.push_back(ms_since(t));
    t = std::chrono::steady_clock::now();
    b();
    tb.push_back(ms_since(t));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

// max |x - y| over max |y|: gradients span orders of magnitude, so errors count against the largest.
double rel_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// The process's resident memory in MiB (/proc/self/statm), 0 where that cannot be read.
double resident_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20) : 0;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream list(s);
  for (std::string item; std::getline(list, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> names{"seed",         "co2",      "grouped", "pta_segment", "pta_shared",    "woodbury",
                                 "hierarchical", "logistic", "kalman",  "mixture",     "eight_schools", "kepler"};
  std::vector<std::int64_t> batches{1, 8, 64, 1024};
  std::string data = "../shared/data";
  int reps = 5, compiles = 5;
  double max_call_ms = 20000;
  bool json = false, check = false, chunks = false, explain = false;
  long soak = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--models" && more) names = split(argv[++i]);
    else if (a == "--batches" && more) {
      batches.clear();
      for (const std::string& b : split(argv[++i])) batches.push_back(std::stoll(b));
    } else if (a == "--reps" && more) reps = std::stoi(argv[++i]);
    else if (a == "--data" && more) data = argv[++i];
    else if (a == "--max-call-ms" && more) max_call_ms = std::stod(argv[++i]);
    else if (a == "--json") json = true;
    else if (a == "--check") check = true;
    else if (a == "--chunks") chunks = true;
    else if (a == "--explain") explain = true;
    else if (a == "--soak" && more) soak = std::stol(argv[++i]);
    else if (a == "--compiles" && more) compiles = std::max(1, std::stoi(argv[++i]));
    else {
      fmt::print(stderr,
                 "usage: bench_zoo [--models a,b] [--batches 1,8,...] [--reps R] [--data DIR] [--max-call-ms MS] "
                 "[--json] [--check] [--chunks] [--explain] [--soak CALLS] [--compiles N]\n");
      return 2;
    }
  }
  if (check) batches = {1, 3}, reps = 1;
  const std::vector<std::pair<std::string, std::function<zoo::Model()>>> known{
      {"seed", zoo::seed},
      {"co2", zoo::co2},
      {"grouped", zoo::grouped},
      {"pta_segment", [&] { return zoo::pta_segment(data); }},
      {"pta_shared", [&] { return zoo::pta_shared(data); }},
      {"woodbury", zoo::woodbury},
      {"hierarchical", zoo::hierarchical},
      {"logistic", zoo::logistic},
      {"kalman", zoo::kalman},
      {"mixture", zoo::mixture},
      {"eight_schools", zoo::eight_schools},
      {"kepler", zoo::kepler},
  };
  const int threads = omp_get_max_threads();
  bool ok = true;
  for (const std::string& name : names) {
    const auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == name; });
    if (it == known.end()) throw std::runtime_error("unknown model " + name);
    zoo::Model m;
    try {
      m = it->second();
    } catch (const std::exception& e) {
      if (json) fmt::print("{{\"model\": \"{}\", \"skipped\": \"{}\"}}\n", name, e.what());
      else fmt::print("{}: skipped: {}\n", name, e.what());
      continue;
    }
    const auto p = static_cast<std::int64_t>(m.base.size());
    auto step = vt::jit(vt::vmap(vt::value_and_grad(m.log_density)));
    if (soak > 0) {
      std::vector<vt::Tensor> inputs;
      for (std::int64_t b : batches)
        inputs.push_back(vt::as_batch(vt::Tensor::from_vector(zoo::examples_of(m, b), {b, p})));
      std::uint64_t state = 12345;  // a fixed sequence of batch sizes (an LCG: the same on every platform)
      const long tenth = std::max(1L, soak / 10);
      double warm = 0, peak = 0;
      std::string marks;
      const auto start = std::chrono::steady_clock::now();
      for (long call = 1; call <= soak; ++call) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        step(inputs[static_cast<std::size_t>((state >> 33) % inputs.size())]);
        if (call % tenth == 0 || call == soak) {
          const double now = resident_mib();
          if (call == tenth) warm = now;
          peak = std::max(peak, now);
          marks += fmt::format(" {:.1f}", now);
        }
      }
      fmt::print(
          "{:>13} soak: {} calls at B in {{{}}} in {:.1f} s; resident MiB at each tenth:{}; after the first tenth "
          "{:.1f}, "
          "at the end {:.1f} ({:+.1f}), peak {:.1f}; {} traces\n",
          m.name, soak, fmt::format("{}", fmt::join(batches, ", ")), ms_since(start) / 1000, marks, warm,
          resident_mib(), resident_mib() - warm, peak, step.counters().traces);
      std::fflush(stdout);
      continue;
    }
    double compile_ms = 0, compile_again_ms = 0, ms_per_example = 0;
    for (std::size_t bi = 0; bi < batches.size(); ++bi) {
      const std::int64_t b = batches[bi];
      if (ms_per_example * static_cast<double>(b) > max_call_ms) {
        if (json) fmt::print("{{\"model\": \"{}\", \"batch\": {}, \"skipped\": \"over --max-call-ms\"}}\n", m.name, b);
        continue;
      }
      const std::vector<double> thetas = zoo::examples_of(m, b);
      const vt::Tensor batch = vt::as_batch(vt::Tensor::from_vector(thetas, {b, p}));
      std::vector<double> lv(static_cast<std::size_t>(b)), lg(thetas.size());
      auto t = std::chrono::steady_clock::now();
      auto [value, grad] = step(batch);  // the first call at this batch size (and the trace, at the first)
      const double first_ms = ms_since(t);
      if (bi == 0) {
        compile_ms = step.counters().trace_ms + step.counters().plan_ms;
        // Another jit of the same model over the same captured data: what compiling costs once the passes have read
        // each captured tensor (their answers are kept with it); the median of --compiles.
        std::vector<double> again_ms;
        for (int k = 0; k < compiles; ++k) {
          const auto again = vt::jit(vt::vmap(vt::value_and_grad(m.log_density)));
          (void)again.compile(batch);
          again_ms.push_back(again.counters().trace_ms + again.counters().plan_ms);
        }
        std::sort(again_ms.begin(), again_ms.end());
        compile_again_ms = again_ms[again_ms.size() / 2];
      }
      m.limit(thetas.data(), b, lv.data(), lg.data());
      const double dv = rel_diff(vt::unbatch(value).to_vector<double>(), lv);
      const double dg = rel_diff(vt::unbatch(grad).to_vector<double>(), lg);
      if (dv > 1e-8 || dg > 1e-8) ok = false;
      double vtape_ms = 0, limit_ms = 0;
      if (!check)
        std::tie(vtape_ms, limit_ms) = time_alternately(
            reps, [&] { step(batch); }, [&] { m.limit(thetas.data(), b, lv.data(), lg.data()); });
      ms_per_example = std::max({vtape_ms, limit_ms, first_ms}) / static_cast<double>(b);
      const std::int64_t chunk = step.counters().chunk_examples;
      // Steady times with forced chunks: of one example, and of the whole batch.
      const auto forced_ms = [&](std::int64_t examples) {
        if (!chunks || check) return 0.0;
        vt::JitChunkExamples forced(examples);
        return time_alternately(
                   reps, [&] { step(batch); }, [] {})
            .first;
      };
      const double one_ms = forced_ms(1), whole_ms = forced_ms(b);
      if (json)
        fmt::print(
            "{{\"model\": \"{}\", \"threads\": {}, \"batch\": {}, \"vtape_ms\": {:.4f}, \"limit_ms\": {:.4f}, "
            "\"first_ms\": {:.4f}, \"compile_ms\": {:.4f}, \"compile_again_ms\": {:.4f}, \"traces\": {}, \"chunk\": "
            "{}, \"value0\": {:.17g}, "
            "\"value_rel_diff\": {:.3e}, \"grad_rel_diff\": {:.3e}, \"chunk1_ms\": {:.4f}, \"whole_ms\": {:.4f}, "
            "\"about\": \"{}\"}}\n",
            m.name, threads, b, vtape_ms, limit_ms, first_ms, compile_ms, compile_again_ms, step.counters().traces,
            chunk, lv[0], dv, dg, one_ms, whole_ms, m.about);
      else
        fmt::print(
            "{:>13} B {:5}: vtape {:10.3f} ms  limit {:10.3f} ms  ratio {:6.2f}  first {:10.3f} ms  "
            "value/grad vs limit {:.1e}/{:.1e}{}\n",
            m.name, b, vtape_ms, limit_ms, limit_ms > 0 ? vtape_ms / limit_ms : 0.0, first_ms, dv, dg,
            chunks ? fmt::format("  chunk {} | chunks of 1 {:.3f} ms, whole batch {:.3f} ms", chunk ? chunk : b, one_ms,
                                 whole_ms)
                   : "");
      if (explain && !json) fmt::print("{}\n", step.explain(batch));
      std::fflush(stdout);  // a runner that stops a long run keeps the rows printed so far
    }
  }
  if (check) fmt::print("zoo check: {}\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_zoo: {}\n", e.what());
  return 2;
}
