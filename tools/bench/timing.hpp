#pragma once
// The benchmarks' clock: the median wall time of `reps` calls of f after one warm-up call (which also traces a
// jitted f).
#include <algorithm>
#include <chrono>
#include <vector>

namespace vt_bench {

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up (and a jitted function's trace)
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace vt_bench
