#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vt {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);  ///< of a shape already checked (every tensor's shape is)

/// The largest element or byte count vtape handles: sizes are int64 and pointer offsets must fit.
inline constexpr std::int64_t max_size = INT64_MAX;

/// Checked size arithmetic: a product or sum that would overflow max_size raises a vt::Error
/// naming `op` and `what`, instead of wrapping to a small number (and a too-small allocation).
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what);
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what);

/// The element count of `shape` times `copies` (a batch size), checking every dimension is >= 0 and
/// that the bytes, at `item_bytes` per element, fit: the one check every new shape passes.
std::int64_t checked_numel(const Shape& shape, std::string_view op, std::size_t item_bytes = 1,
                           std::int64_t copies = 1);
std::string to_string(const Shape& shape);     ///< "[2, 3]"
Shape contiguous_strides(const Shape& shape);  ///< row-major, in elements

/// numpy broadcasting of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

/// Maps a possibly negative axis into [0, rank), or raises an error naming `op`.
int normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op);

/// The axes of `axes` normalized, sorted and unique; empty `axes` means every axis.
std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank, std::string_view op);

}  // namespace vt
