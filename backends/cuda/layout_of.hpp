#pragma once
// A kernel's Layout from strided views (host side): axes merged where every view is contiguous
// across them (merged_axes.hpp), then flattened into the fixed-size struct a kernel takes.
#include "../../core/error.hpp"
#include "../merged_axes.hpp"
#include "kernels.hpp"

namespace vt::cuda {

template <int N>
inline kernels::Layout<N> layout_of(const char* kernel, const Shape& shape,
                                    const std::array<const Shape*, N>& strides) {
  const MergedAxes<N> merged = merge_axes<N>(shape, strides);
  kernels::Layout<N> l;
  if (merged.empty) {
    l.total = 0;
    return l;
  }
  if (merged.shape.size() > static_cast<std::size_t>(kernels::max_rank))
    fail("cuda {}: a view of shape {} has {} axes that cannot be merged; the CUDA kernels take at most {}", kernel,
         to_string(shape), merged.shape.size(), kernels::max_rank);
  l.rank = static_cast<int>(merged.shape.size());
  l.total = numel(merged.shape);
  for (int d = 0; d < l.rank; ++d) {
    l.shape[d] = merged.shape[static_cast<std::size_t>(d)];
    for (int k = 0; k < N; ++k)
      l.stride[k][d] = merged.strides[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
  }
  return l;
}

}  // namespace vt::cuda
