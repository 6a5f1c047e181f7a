#pragma once
// The order in which the CPU backend sums a row into one value, shared by its reduce kernel (maps.cpp) and by jit's
// fused reductions (autodiff/jit/fuse.cpp), which must add the same numbers in the same order to give the same bits. A
// row is cut into segments of `sum_segment` elements from its start (for_each_row's segments); each segment is summed
// in `sum_lanes` interleaved partial sums (element i of the segment into lane i % sum_lanes, so that the additions
// vectorise without reassociating any of them), the lanes then added as a fixed tree, and the segments' totals added to
// the result one after the other, in order. Nothing depends on the thread count.
#include <cstdint>

#include "../element.hpp"
#include "strided.hpp"

namespace vt::cpu {

constexpr std::int64_t sum_segment = parallel_grain;
constexpr int sum_lanes = 8;

// One segment's lanes. add() may be called on consecutive pieces of the segment as long as every piece but the last has
// a multiple of sum_lanes elements, so that the lanes stay aligned.
template <class T>
struct LaneSum {
  T lane[sum_lanes] = {};
  void add(const T* x, std::int64_t len, std::int64_t stride) {
    std::int64_t i = 0;
    if (stride == 1) {
      for (; i + sum_lanes <= len; i += sum_lanes)
        for (int l = 0; l < sum_lanes; ++l) lane[l] = element::add(lane[l], x[i + l]);
    } else {
      for (; i + sum_lanes <= len; i += sum_lanes)
        for (int l = 0; l < sum_lanes; ++l) lane[l] = element::add(lane[l], x[(i + l) * stride]);
    }
    for (int l = 0; i < len; ++i, ++l) lane[l] = element::add(lane[l], x[i * stride]);
  }
  T total() const {
    static_assert(sum_lanes == 8);
    return element::add(element::add(element::add(lane[0], lane[1]), element::add(lane[2], lane[3])),
                        element::add(element::add(lane[4], lane[5]), element::add(lane[6], lane[7])));
  }
};

}  // namespace vt::cpu
