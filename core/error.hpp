#pragma once
/// @file
/// The one exception type vtape throws for bad input. Messages name the op and the offending
/// shapes or dtypes so that an error deep inside a model still says where it came from.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace vt {

/// Default visibility: the CUDA backend module (built with hidden symbols) throws these too, and
/// callers catch them by type.
class __attribute__((visibility("default"))) Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Raised when a factorization meets a matrix that is not positive definite. `batch_index` is the
/// example of a batched (vmap) call that failed, whatever matrices each example holds; for a plain
/// stack of matrices [..., n, n] it is the failing matrix's row-major index among them (0 for one
/// matrix). `minor` is the order of the failing leading minor (1-based, as LAPACK's info).
class __attribute__((visibility("default"))) NotPositiveDefinite : public Error {
 public:
  NotPositiveDefinite(const std::string& what, long batch_index, long minor)
      : Error(what), batch_index(batch_index), minor(minor) {}
  long batch_index;
  long minor;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace vt
