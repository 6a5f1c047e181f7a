#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vt {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);              // "[2, 3]"
Shape contiguous_strides(const Shape& shape);           // row-major, in elements

// numpy broadcasting of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

// Maps a possibly negative axis into [0, rank), or raises an error naming `op`.
int normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op);

// The axes of `axes` normalized, sorted and unique; empty `axes` means every axis.
std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank, std::string_view op);

}  // namespace vt
