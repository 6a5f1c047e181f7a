#pragma once
// Batches of matrices on the OpenMP threads, only where the work pays for a parallel region. An `omp parallel`
// whose `if` clause is false still makes a team of one, and libgomp's entry and exit then cost system calls: a
// jitted loop body replaying 2 x 2 products paid them at every step. So a small batch, one matrix, one thread, or
// a call already inside a region runs on the calling thread without entering OpenMP at all.
#include <omp.h>

#include <cstdint>

#include "first_failure.hpp"

namespace vt::cpu {

// Below this much work in all, a batch runs on the calling thread, where entering an OpenMP region costs more than
// the threads save. Work is counted in multiply-adds, each matrix's fixed cost (the call, Eigen's dispatch) as
// per_matrix_work more: tools/bench/bench_parallel_grain.cpp, built with parallel_work_min = 1, shows two threads
// losing to one on batched products, Cholesky factors and triangular solves of small matrices below about 2^15 of
// it, and paying from about 2^16 (docs/performance.md, "Threads on small work").
constexpr std::int64_t parallel_work_min = std::int64_t{1} << 16, per_matrix_work = 64;

struct NoState {};

// For one scope where `active`: this thread's OpenMP setting (which Eigen reads to thread a product of its own) at
// one thread, restored after.
class OneThread {
 public:
  explicit OneThread(bool active) : active_(active), threads_(omp_get_max_threads()) {
    if (active_) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (active_) omp_set_num_threads(threads_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  bool active_;
  int threads_;
};

inline bool worth_threads(std::int64_t count, std::int64_t work_each) {
  return count > 1 && count * (work_each + per_matrix_work) >= parallel_work_min && omp_get_max_threads() > 1 &&
         !omp_in_parallel();
}

// body(state, i) for every i in [0, count): across the threads in even shares (a batch's matrices are alike), one
// State per thread for this call, where worth_threads(count, work_each); else in order on the calling thread with
// one State. Each matrix is computed the same way either way, so the results do not depend on the choice. The
// exception of the lowest failing index is rethrown (FirstFailure).
template <class State = NoState, class Body>
void for_each_matrix(std::int64_t count, std::int64_t work_each, Body&& body) {
  if (worth_threads(count, work_each)) {
    FirstFailure failure;
#pragma omp parallel
    {
      State state;
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < count; ++i) failure.run(i, [&] { body(state, i); });
    }
    failure.rethrow();
    return;
  }
  // Each matrix on this thread alone, as inside a region: Eigen would otherwise thread a product of its own. (One
  // matrix keeps the caller's setting: the kernels decide how a single large matrix uses the threads.)
  const OneThread alone(count > 1 && omp_get_max_threads() > 1 && !omp_in_parallel());
  State state;
  for (std::int64_t i = 0; i < count; ++i) body(state, i);  // in order: the first failure is the lowest index's
}

}  // namespace vt::cpu
