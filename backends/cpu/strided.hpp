#pragma once
// Iteration over N strided views that share one shape: the loop every CPU map and copy kernel is
// built on. Axes are merged first (merged_axes.hpp); large iterations are split across OpenMP
// threads.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../../core/shape.hpp"
#include "../merged_axes.hpp"
#include "first_failure.hpp"

namespace vt::cpu {

// Below this many elements a map runs on one thread: forking costs more than it saves.
constexpr std::int64_t parallel_grain = 1 << 15;

// Below this length an innermost row is short: each row costs its call and index arithmetic, a few elements' worth.
constexpr std::int64_t short_row = 16;

// for_each_row's loop over merged axes, each row's offsets from `origin`.
template <std::size_t N, class Row>
void for_each_merged_row(const MergedAxes<N>& merged, const std::array<std::int64_t, N>& origin, Row& row,
                         bool parallel) {
  const Shape& shape = merged.shape;
  const std::array<Shape, N>& strides = merged.strides;
  std::array<std::int64_t, N> inner{};
  if (shape.empty()) {
    row(origin, std::int64_t{1}, inner);
    return;
  }
  const std::size_t rank = shape.size();
  for (std::size_t k = 0; k < N; ++k) inner[k] = strides[k][rank - 1];
  const std::int64_t len = shape[rank - 1];
  const std::int64_t rows = numel(shape) / len;
  // Rows longer than the grain are cut into segments so that one long row still parallelises.
  const std::int64_t seg_len = std::min(len, parallel_grain);
  const std::int64_t segs = (len + seg_len - 1) / seg_len;
  const std::int64_t pieces = rows * segs;

  auto run = [&](std::int64_t first, std::int64_t last) {
    Shape index;  // in place: no allocation per call
    index.assign(rank - 1, 0);
    std::array<std::int64_t, N> base = origin;
    std::int64_t r = first / segs;
    for (std::size_t d = rank - 1; d-- > 0;) {  // the multi-index of row r
      index[d] = r % shape[d];
      r /= shape[d];
      for (std::size_t k = 0; k < N; ++k) base[k] += index[d] * strides[k][d];
    }
    for (std::int64_t p = first; p < last; ++p) {
      const std::int64_t s = p % segs;
      const std::int64_t start = s * seg_len, count = std::min(seg_len, len - start);
      std::array<std::int64_t, N> off = base;
      for (std::size_t k = 0; k < N; ++k) off[k] += start * inner[k];
      row(off, count, inner);
      if (s + 1 < segs) continue;
      for (std::ptrdiff_t d = static_cast<std::ptrdiff_t>(rank) - 2; d >= 0; --d) {  // next row
        for (std::size_t k = 0; k < N; ++k) base[k] += strides[k][d];
        if (++index[d] < shape[d]) break;
        for (std::size_t k = 0; k < N; ++k) base[k] -= strides[k][d] * shape[d];
        index[d] = 0;
      }
    }
  };
  const std::int64_t total = rows * len;
  if (!parallel || total < 2 * parallel_grain || omp_in_parallel()) {
    run(0, pieces);
    return;
  }
  FirstFailure failure;  // the row index's storage, and whatever `row` allocates, may throw
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t first = pieces * t / threads, last = pieces * (t + 1) / threads;
    failure.run(first, [&] { run(first, last); });
  }
  failure.rethrow();
}

// Calls row(offsets, length, inner_strides) over disjoint pieces of the innermost rows, offsets in
// elements. With `parallel`, pieces run concurrently, so row must only write where it reads its
// own offsets (true of maps and copies, not of reductions into shared outputs). The order of the
// elements is then free, and a short innermost axis is swapped with the longest one, so that a
// broadcast of a tiny trailing axis ([5000, 3] from [5000, 1] and [3]) runs 3 rows of 5000, not
// 5000 rows of 3; a larger iteration does so by blocks of the longest axis of at most
// parallel_grain elements, whose operands stay in cache while its few strided rows pass over them.
// Each element is computed alike in any order.
template <std::size_t N, class Row>
void for_each_row(const Shape& shape_in, const std::array<const Shape*, N>& strides_in, Row&& row,
                  bool parallel = true) {
  MergedAxes<N> merged = merge_axes<N>(shape_in, strides_in);
  if (merged.empty) return;
  const std::array<std::int64_t, N> origin{};
  const std::size_t rank = merged.shape.size();
  std::size_t longest = rank == 0 ? 0 : rank - 1;
  for (std::size_t d = 0; parallel && d + 1 < rank; ++d)
    if (merged.shape[d] > merged.shape[longest]) longest = d;
  if (!parallel || rank < 2 || longest == rank - 1 || merged.shape[rank - 1] >= short_row)
    return for_each_merged_row<N>(merged, origin, row, parallel);
  const std::int64_t total = numel(merged.shape), n = merged.shape[longest];
  std::swap(merged.shape[rank - 1], merged.shape[longest]);
  for (std::size_t k = 0; k < N; ++k) std::swap(merged.strides[k][rank - 1], merged.strides[k][longest]);
  if (total <= parallel_grain) return for_each_merged_row<N>(merged, origin, row, false);
  // Blocks of the (now innermost) longest axis, each in cache, run concurrently where there are several grains.
  const std::int64_t block = std::max<std::int64_t>(1, parallel_grain / (total / n));
  const std::int64_t blocks = (n + block - 1) / block;
  const auto run_block = [&](std::int64_t b) {
    MergedAxes<N> part = merged;
    part.shape[rank - 1] = std::min(block, n - b * block);
    std::array<std::int64_t, N> start{};
    for (std::size_t k = 0; k < N; ++k) start[k] = b * block * merged.strides[k][rank - 1];
    for_each_merged_row<N>(part, start, row, false);
  };
  if (total < 2 * parallel_grain || omp_in_parallel()) {
    for (std::int64_t b = 0; b < blocks; ++b) run_block(b);
    return;
  }
  FirstFailure failure;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) failure.run(b, [&] { run_block(b); });
  failure.rethrow();
}

}  // namespace vt::cpu
