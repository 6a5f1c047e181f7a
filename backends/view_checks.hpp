#pragma once
// Shared by the backends' map and reduction kernels: checks on views the ops have already
// shaped, so a failure is an internal error, never the caller's.
#include "../core/error.hpp"
#include "../core/view.hpp"

namespace vt {

// Views walked together have one rank. `backend` and `kernel` name the failing call in the
// message ("cpu copy: ...", "cuda reduce: ...").
inline void check_same_rank(const View& a, const View& b, const char* backend, const char* kernel) {
  if (a.shape.size() != b.shape.size()) fail("{} {}: view ranks differ (internal error)", backend, kernel);
}

}  // namespace vt
