#pragma once
/// @file
/// How tensors print. `fmt::format("{}", t)` writes a tensor as numpy's repr writes an array:
/// nested brackets, one row per line, elements aligned in columns, lines wrapped at `linewidth`,
/// and a tensor of more than `threshold` elements summarised, each axis longer than
/// 2 * `edgeitems` showing its first and last `edgeitems` entries around `...` (and the shape
/// written after the values). Floats take numpy's default style: at most `precision` digits after
/// the point, the shortest that reads back as the same value (`1.`, `0.1`, `0.33333333`), in
/// scientific notation when the largest shown magnitude is 1e8 or more (1e6 for float32), the
/// smallest nonzero one under 1e-4, or their ratio over 1e3, compared in the tensor's own type.
/// `fmt::format("{:.3}", t)` sets the precision for one call.
#include <cstdint>

namespace vt {

/// The settings of numpy's `set_printoptions` that vtape follows, with numpy's defaults.
struct PrintOptions {
  int precision = 8;              ///< at most this many digits after the decimal point (0..64)
  std::int64_t threshold = 1000;  ///< tensors with more elements than this are summarised (>= 0)
  std::int64_t edgeitems = 3;     ///< entries shown at each end of a summarised axis (>= 1)
  std::int64_t linewidth = 75;    ///< characters a line holds before it wraps (>= 1)
};

/// The options tensors print with now (process-wide).
PrintOptions print_options();

/// Sets the options for every thread; raises vt::Error, naming the field, for a value out of range.
void set_print_options(const PrintOptions& options);

/// Sets print options for its lifetime and restores the previous ones when it ends, as numpy's
/// `with np.printoptions(...)`.
class PrintOptionsScope {
 public:
  explicit PrintOptionsScope(const PrintOptions& options);
  ~PrintOptionsScope();
  PrintOptionsScope(const PrintOptionsScope&) = delete;
  PrintOptionsScope& operator=(const PrintOptionsScope&) = delete;

 private:
  PrintOptions previous_;
};

}  // namespace vt
