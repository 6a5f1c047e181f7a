#pragma once
// Running test code at a chosen OpenMP thread count: the kernels' results must not depend on it.
#include <omp.h>

#include <utility>

namespace vt::testing {

// f() run on n OpenMP threads, the previous count restored after (also when f throws).
template <class F>
auto on_threads(int n, F&& f) {
  struct Restore {
    int threads = omp_get_max_threads();
    ~Restore() { omp_set_num_threads(threads); }
  } restore;
  omp_set_num_threads(n);
  return std::forward<F>(f)();
}

}  // namespace vt::testing
