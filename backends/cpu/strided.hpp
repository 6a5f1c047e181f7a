#pragma once
// Iteration over N strided views that share one shape: the loop every CPU map, copy and
// reduction kernel is built on. Adjacent axes that are contiguous in every view are merged first,
// so a contiguous tensor is walked as one row.
#include <array>
#include <cstdint>
#include <vector>

#include "../../core/shape.hpp"

namespace vt::cpu {

// Calls row(offsets, length, inner_strides) once per innermost row, offsets in elements.
template <std::size_t N, class Row>
void for_each_row(const Shape& shape_in, const std::array<const Shape*, N>& strides_in, Row&& row) {
  for (auto d : shape_in)
    if (d == 0) return;
  // Drop unit axes and merge axes that are contiguous in every view.
  Shape shape;
  std::array<Shape, N> strides;
  for (std::size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 1) continue;
    bool merge = !shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k)
      merge = strides[k].back() == (*strides_in[k])[d] * shape_in[d];
    if (merge) {
      shape.back() *= shape_in[d];
      for (std::size_t k = 0; k < N; ++k) strides[k].back() = (*strides_in[k])[d];
    } else {
      shape.push_back(shape_in[d]);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back((*strides_in[k])[d]);
    }
  }
  std::array<std::int64_t, N> offsets{}, inner{};
  if (shape.empty()) {
    row(offsets, std::int64_t{1}, inner);
    return;
  }
  const std::size_t rank = shape.size();
  for (std::size_t k = 0; k < N; ++k) inner[k] = strides[k][rank - 1];
  std::vector<std::int64_t> index(rank - 1, 0);
  while (true) {
    row(offsets, shape[rank - 1], inner);
    std::ptrdiff_t d = static_cast<std::ptrdiff_t>(rank) - 2;
    for (; d >= 0; --d) {
      for (std::size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (++index[d] < shape[d]) break;
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace vt::cpu
