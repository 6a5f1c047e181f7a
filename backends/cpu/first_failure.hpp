#pragma once
// An exception must not leave an OpenMP region: the runtime terminates the process. The batched
// kernels grow per-thread workspaces and call Eigen, which allocates, inside their parallel loops,
// so a std::bad_alloc (or an internal vt::Error) can be thrown there. Each iteration runs through
// FirstFailure::run, which keeps the exception of the lowest failing index; the loop goes on, and
// rethrow() raises that one after the region: the same error whatever the thread count.
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <utility>

namespace vt::cpu {

class FirstFailure {
 public:
  template <class Body>
  void run(std::int64_t index, Body&& body) noexcept {
    try {
      std::forward<Body>(body)();
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (index < index_) {
        index_ = index;
        error_ = std::current_exception();
      }
    }
  }

  // Call after the parallel region, on the thread that entered it.
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  std::int64_t index_ = std::numeric_limits<std::int64_t>::max();
  std::exception_ptr error_;
};

}  // namespace vt::cpu
