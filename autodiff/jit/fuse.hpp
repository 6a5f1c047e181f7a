#pragma once
// Fused elementwise passes, without a code generator: a run of consecutive elementwise steps whose outputs share one
// shape runs tile by tile, every step of the run on one tile before the next tile, so that a tile's inputs and
// intermediates stay in L1/L2 between the steps instead of each step streaming whole buffers through memory. The steps
// keep their kernels; a step whose output only the run itself reads writes it to a tile-sized scratch slot, not to its
// buffer, so that such intermediates never reach memory. Every elementwise CPU kernel computes an element from the same
// elements whatever the block around it, so values are bitwise those of running the steps one after the other, at any
// thread count.
//
// A run may end in a sum of its last value to one value per example (the contractions sum(a * b) of a gradient): the
// sum is added tile by tile as the tiles are made, in the order of the CPU reduce kernel (backends/cpu/sum_order.hpp):
// so it too is bitwise the unfused sum, at any thread count. That needs tiles that follow the kernel's segments of the
// flattened example, so such a run is tiled by flat ranges of elements, which needs every view of the run to walk the
// example's elements in order or to be one element broadcast over them (else its steps run one by one).
//
// A run whose every value is, example by example, an exactly symmetric matrix (a kernel matrix built from captured
// pairwise distances and hyperparameters, and its gradient's contractions against a symmetric cotangent) computes only
// its lower triangle, by strips of rows up to the diagonal: an elementwise function of symmetric matrices and
// per-example numbers gives the same bits at (i, j) as at (j, i), so a little over half the work gives every value. A
// value written to memory is copied above the diagonal where something other than such runs and Cholesky factorizations
// reads it (FusedGroup::mirrored), so matrices are bitwise those of running the steps one by one. Sums add the lower
// triangle with the entries below the diagonal twice: not the reduce kernel's order, so they equal the unfused sums up
// to rounding only, but in a fixed order, the same at any thread count.
//
// The grouping pass is autodiff/jit/fuse_groups.cpp (fuse_elementwise), the tile executor autodiff/jit/fuse.cpp
// (run_fused_group); this header holds the sizes both rely on, and the buffer checks that the grouping pass and the
// verifier (verify.cpp) share.
#include <cstdint>
#include <vector>

#include "../../backends/cpu/sum_order.hpp"
#include "plan.hpp"

namespace vt::detail::fusion {

// Elements per tile: a few buffers of 32 KB (float64) fit in L1/L2 while the per-kernel overhead stays small against
// the tile's work (runs over a lower triangle take pieces of twice that: strip_rows, below). A multiple of
// cpu::sum_lanes that divides cpu::sum_segment, so that flat tiles never straddle a segment of the reduce kernel and
// keep its lanes aligned.
constexpr std::int64_t tile_elements = 4096;
static_assert(cpu::sum_segment % tile_elements == 0 && tile_elements % cpu::sum_lanes == 0);
// Below this many elements a call runs its steps one by one (one tile would be the whole output).
constexpr std::int64_t min_elements = 2 * tile_elements;
// Runs of symmetric matrices are cut into strips of this many rows, each strip's row segments from column 0 to the end
// of its diagonal block, cut into pieces of at most piece_elements: long rows keep the kernels' per-row costs small,
// and pieces twice a flat tile's halve the kernel calls (a strip up to order 512 is one piece) at the same speed per
// element (docs/performance.md has the measurement).
constexpr std::int64_t strip_rows = 16;
constexpr std::int64_t piece_elements = 2 * tile_elements;
static_assert(piece_elements % strip_rows == 0);

// A value's bytes in the arena, per example when batched: [begin, end). Values outside the arena (arguments, constants,
// folded values, results' own buffers) never share memory with a step's output, so they have none.
// The batched values of a sub-chunk arena (ValueBuffer::local) are in an arena of their own.
struct Range {
  bool in_arena = false;
  bool batched = false, local = false;
  std::int64_t begin = 0, end = 0;
};

// Every value's buffer range, found once per plan: the hazard checks ask for pairs of them many times.
class Buffers {
 public:
  explicit Buffers(const Plan& plan) : plan_(plan), ranges_(plan.values.size()) {
    for (std::size_t v = 0; v < plan.values.size(); ++v) {
      const auto r = static_cast<std::size_t>(plan.buffers[v].root);
      const PlanValue& root = plan.values[r];
      const ValueBuffer& b = plan.buffers[r];
      if (root.kind == PlanValue::Kind::computed && !b.output_buffer && b.offset >= 0)
        ranges_[v] = {true, root.batched, b.local, b.offset, b.offset + root.bytes()};
    }
  }

  // Whether two values' buffers share no byte.
  bool disjoint(int w, int u) const {
    const Range &rw = range(w), &ru = range(u);
    return !rw.in_arena || !ru.in_arena || rw.batched != ru.batched || rw.local != ru.local || rw.end <= ru.begin ||
           ru.end <= rw.begin;
  }

  // Whether writing value w tile by tile is safe against value u, which the run reads or writes: their buffers are
  // disjoint, or they are the same elements of the same buffer (a step in place, or a buffer reused once u is dead),
  // so that tile t of w overwrites only tile t of u, which every step of the run has finished with when tile t ends.
  bool safe_against(int w, int u) const {
    if (disjoint(w, u)) return true;
    const PlanValue& a = plan_.values[static_cast<std::size_t>(w)];
    const PlanValue& b = plan_.values[static_cast<std::size_t>(u)];
    const ValueBuffer& ab = plan_.buffers[static_cast<std::size_t>(w)];
    const ValueBuffer& bb = plan_.buffers[static_cast<std::size_t>(u)];
    return ab.root == w && bb.root == u && ab.offset == bb.offset && a.dtype == b.dtype && a.shape == b.shape &&
           a.batched == b.batched;
  }

 private:
  const Range& range(int v) const { return ranges_[static_cast<std::size_t>(v)]; }
  const Plan& plan_;
  std::vector<Range> ranges_;
};

}  // namespace vt::detail::fusion
