// A batch of vectors times one shared matrix (issue 13): x_i W for x [B, k] and a captured
// constant W [k, n] (by default the user's 7758 x 360, 22 MB), through jit, as the user ran it.
//
//   build/tools/bench_matmul_shared [--k 7758] [--n 360] [--batches 1,16,64,256] [--reps 5] [--grad-w]
//
// Prints, per B, the median of `reps` calls (after a warm-up call) of
//   value:          jit(f)(x),                  f(x) = sum(square(x W))
//   value_and_grad: jit(value_and_grad(f))(x)   (W a captured constant)
//   wrt x and W:    jit(value_and_grad(f, {0, 1}))(x, W), with --grad-w (W's cotangent sums over the batch)
// and the time jit(value_and_grad) took to trace and plan on its first call.
// Run it on one thread for figures that compare: OMP_NUM_THREADS=1 taskset -c 0 bench_matmul_shared.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace {

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up (and the trace)
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t k = 7758, n = 360;
  std::vector<std::int64_t> batches{1, 16, 64, 256};
  int reps = 5;
  bool grad_w = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--k" && i + 1 < argc) k = std::stoll(argv[++i]);
    else if (a == "--n" && i + 1 < argc) n = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--grad-w") grad_w = true;
    else if (a == "--batches" && i + 1 < argc) {
      batches.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) batches.push_back(std::stoll(item));
    } else {
      fmt::print(stderr, "usage: bench_matmul_shared [--k K] [--n N] [--batches 1,16,...] [--reps R] [--grad-w]\n");
      return 2;
    }
  }
  const vt::Tensor w = vt::randn({k, n}, 1) * (1.0 / static_cast<double>(k));
  auto f = [&](const vt::Tensor& x) { return vt::sum(vt::square(vt::matmul(x, w))); };
  auto f2 = [](const vt::Tensor& x, const vt::Tensor& wt) { return vt::sum(vt::square(vt::matmul(x, wt))); };
  auto value = vt::jit(f);
  auto value_and_grad = vt::jit(vt::value_and_grad(f));
  auto both = vt::jit(vt::value_and_grad(f2, {0, 1}));
  fmt::print("k = {}, n = {}, median of {} (ms)\n{:>6} {:>12} {:>16} {:>14}\n", k, n, reps, "B", "value",
             "value_and_grad", grad_w ? "wrt x and W" : "");
  for (std::int64_t b : batches) {
    const vt::Tensor x = vt::as_batch(vt::randn({b, k}, 2));
    const double t_value = median_ms(reps, [&] { (void)value(x).item(); });
    const double t_grad = median_ms(reps, [&] { (void)value_and_grad(x).first.item(); });
    const double t_both = grad_w ? median_ms(reps, [&] { (void)both(x, w).first.item(); }) : 0.0;
    fmt::print("{:>6} {:>12.3f} {:>16.3f} {:>14}\n", b, t_value, t_grad, grad_w ? fmt::format("{:.3f}", t_both) : "");
    std::fflush(stdout);
  }
  // Tracing must not compute on the captured W (say, transpose it for the adjoint).
  const vt::JitCounters c = value_and_grad.counters();
  fmt::print("jit(value_and_grad): trace {:.3f} ms, plan {:.3f} ms (first call)\n", c.trace_ms, c.plan_ms);
}
