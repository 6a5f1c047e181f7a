// Where a batch of small matrices starts paying for a parallel region: batched products, Cholesky
// factors and triangular solves of `count` matrices of order n, each timed (median of --reps runs)
// on one thread and on all of OpenMP's, alternately, for --rounds rounds; each line gives the
// median over rounds of (all threads' time / one thread's) by the work (count n^3 multiply-adds).
// Built with backends/cpu/parallel.hpp's parallel_work_min set to 1, it shows where threads start
// to pay, which is where parallel_work_min belongs; as built, that small batches lose nothing
// (docs/performance.md, "Threads on small work").
//
//   build/tools/bench_parallel_grain [--reps 200] [--rounds 5]
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

#include "timing.hpp"

namespace {

using vt_bench::median_seconds;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--reps") reps = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
  }
  const int threads = omp_get_max_threads();
  fmt::print("threads {} against 1; ratios of times (below 1: the threads pay)\n", threads);
  fmt::print("{:>4} {:>6} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "n", "count", "work", "matmul", "cholesky", "trsm",
             "matmul_1_us");
  for (std::int64_t n : {2, 4, 8, 16, 32}) {
    for (std::int64_t count : {2, 8, 32, 128, 512, 2048}) {
      const vt::Tensor a = vt::randn({count, n, n}, 1);
      const vt::Tensor b = vt::randn({count, n, n}, 2);
      const vt::Tensor spd = vt::matmul(a, a, false, true) + vt::eye(n) * static_cast<double>(n);
      const vt::Tensor l = vt::cholesky(spd);
      const std::vector<std::function<void()>> ops = {[&] { (void)vt::matmul(a, b); }, [&] { (void)vt::cholesky(spd); },
                                                      [&] { (void)vt::triangular_solve(l, b); }};
      std::vector<std::vector<double>> ratio(ops.size());
      std::vector<double> one_thread;
      for (int r = 0; r < rounds; ++r)
        for (std::size_t k = 0; k < ops.size(); ++k) {
          omp_set_num_threads(1);
          const double t1 = median_seconds(reps, ops[k]);
          omp_set_num_threads(threads);
          ratio[k].push_back(median_seconds(reps, ops[k]) / t1);
          if (k == 0) one_thread.push_back(t1);
        }
      fmt::print("{:>4} {:>6} {:>10} {:>10.2f} {:>10.2f} {:>10.2f} {:>12.2f}\n", n, count, count * n * n * n,
                 median(ratio[0]), median(ratio[1]), median(ratio[2]), median(one_thread) * 1e6);
    }
  }
}
