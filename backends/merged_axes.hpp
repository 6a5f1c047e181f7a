#pragma once
// Shared by the backends' map kernels: the iteration space of N strided views of one shape, with
// unit axes dropped and adjacent axes merged wherever every view is contiguous across them, so
// that a contiguous tensor is walked as one row.
#include <array>
#include <cstddef>
#include <cstdint>

#include "../core/shape.hpp"

namespace vt {

template <std::size_t N>
struct MergedAxes {
  Shape shape;  // empty for a single element (or when any axis has size 0: see `empty`)
  std::array<Shape, N> strides;
  bool empty = false;  // some axis has size 0: nothing to visit
};

template <std::size_t N>
MergedAxes<N> merge_axes(const Shape& shape, const std::array<const Shape*, N>& strides) {
  MergedAxes<N> m;
  for (auto d : shape)
    if (d == 0) {
      m.empty = true;
      return m;
    }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !m.shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k) merge = m.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      m.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) m.strides[k].back() = (*strides[k])[d];
    } else {
      m.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) m.strides[k].push_back((*strides[k])[d]);
    }
  }
  return m;
}

}  // namespace vt
