// Fused elementwise passes, without a code generator: a run of consecutive elementwise steps whose
// outputs share one shape runs tile by tile, every step of the run on one tile before the next
// tile, so that a tile's inputs and intermediates stay in L1/L2 between the steps instead of each
// step streaming whole buffers through memory. The steps keep their kernels and their buffers (the
// memory plan is unchanged); only the order of the work changes. Every elementwise CPU kernel
// computes an element from the same elements whatever the block around it, so results are bitwise
// those of running the steps one after the other, at any thread count.
#include <omp.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "plan.hpp"

namespace vt::detail {

namespace {

// Elements per tile: a few buffers of 32 KB (float64) fit in L1/L2 while the per-kernel overhead
// stays small against the tile's work.
constexpr std::int64_t tile_elements = 4096;
// Below this many elements a call runs its steps one by one (one tile would be the whole output).
constexpr std::int64_t min_elements = 2 * tile_elements;
// Longer runs are cut: the hazard check below is quadratic in a run's length.
constexpr int max_group_steps = 64;
// Tiles run on several threads when the output is at least this large (as CPU maps do).
constexpr std::int64_t parallel_elements = 1 << 16;

bool fusible(const Plan &plan, const PlanStep &s) {
  return s.op->elementwise && !s.op->aliases_input &&
         plan.values[static_cast<std::size_t>(s.out)].kind == PlanValue::Kind::computed;
}

// A value's bytes in the arena, per example when batched: [begin, end). Values outside the arena
// (arguments, constants, folded values, results' own buffers) never share memory with a step's
// output, so they have none.
struct Range {
  bool in_arena = false;
  bool batched = false;
  std::int64_t begin = 0, end = 0;
};

Range range_of(const Plan &plan, int v) {
  const PlanValue &root = plan.values[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(v)].root)];
  if (root.kind != PlanValue::Kind::computed || root.output_buffer || root.offset < 0) return {};
  return {true, root.batched, root.offset, root.offset + root.bytes()};
}

// Whether writing value w tile by tile is safe against value u, which the run reads or writes:
// their buffers are disjoint, or they are the same elements of the same buffer (a step in place, or
// a buffer reused once u is dead), so that tile t of w overwrites only tile t of u, which every
// step of the run has finished with when tile t ends.
bool safe_against(const Plan &plan, int w, int u) {
  const Range rw = range_of(plan, w), ru = range_of(plan, u);
  if (!rw.in_arena || !ru.in_arena || rw.batched != ru.batched) return true;
  if (rw.end <= ru.begin || ru.end <= rw.begin) return true;
  const PlanValue &a = plan.values[static_cast<std::size_t>(w)];
  const PlanValue &b = plan.values[static_cast<std::size_t>(u)];
  return a.root == w && b.root == u && a.offset == b.offset && a.dtype == b.dtype && a.shape == b.shape &&
         a.batched == b.batched;
}

// The step's views with this call's pointers and batch size, every input broadcast to the output's
// shape (right-aligned, stride 0 where it is broadcast), so that slicing them alike gives a tile.
void full_views(const Plan &plan, const PlanStep &s, const std::vector<void *> &data, std::int64_t batch,
                KernelViews &views) {
  views = s.views;
  views.out.data = data[static_cast<std::size_t>(s.out)];
  if (plan.values[static_cast<std::size_t>(s.out)].batched) views.out.shape[0] = batch;
  for (std::size_t k = 0; k < s.in.size(); ++k) {
    View &view = views.in[k];
    view.data = data[static_cast<std::size_t>(s.in[k])];
    if (views.batched) view.shape[0] = batch;
    view = expand_view(view, views.out, views.batched);
  }
}

// How the output's shape is cut: axes before `axis` one index at a time, `axis` into `chunks`
// nearly equal pieces, the axes after it whole.
struct Tiling {
  std::size_t axis = 0;
  std::int64_t outer = 1, chunks = 1, extent = 1;
  std::int64_t count() const { return outer * chunks; }
};

Tiling tiling_of(const Shape &shape) {
  Tiling t;
  const std::size_t rank = shape.size();
  std::int64_t inner = 1;  // elements of the axes after t.axis
  std::size_t axis = rank - 1;
  while (axis > 0 && inner * shape[axis] <= tile_elements) inner *= shape[axis--];
  if (inner * shape[axis] <= tile_elements) {  // everything fits: cut nothing (only axis 0 left)
    t.axis = 0;
    t.extent = shape[0];
    t.chunks = 1;
    return t;
  }
  t.axis = axis;
  t.extent = shape[axis];
  const std::int64_t per_tile = std::max<std::int64_t>(1, tile_elements / inner);
  // Nearly equal pieces: with per_tile >= 4, none is a single index where the axis is longer, so a
  // tile never degenerates to one element where the whole output has more (a kernel may choose its
  // path by the innermost stride, which a one-element view loses).
  t.chunks = (t.extent + per_tile - 1) / per_tile;
  for (std::size_t d = 0; d < axis; ++d) t.outer *= shape[d];
  return t;
}

// Points `tile` (a copy of `full`) at tile i: shapes cut, data pointers moved.
void slice(const Tiling &t, const Shape &shape, std::int64_t i, const KernelViews &full, KernelViews &tile) {
  std::int64_t o = i / t.chunks;
  const std::int64_t c = i % t.chunks;
  const std::int64_t begin = c * t.extent / t.chunks, end = (c + 1) * t.extent / t.chunks;
  std::int64_t index[16];  // the outer multi-index (at most 16 axes: fuse_elementwise checks)
  for (std::size_t d = t.axis; d-- > 0;) {
    index[d] = o % shape[d];
    o /= shape[d];
  }
  auto cut = [&](const View &f, View &v) {
    std::int64_t offset = begin * f.strides[t.axis];
    for (std::size_t d = 0; d < t.axis; ++d) {
      offset += index[d] * f.strides[d];
      v.shape[d] = 1;
    }
    v.shape[t.axis] = end - begin;
    v.data = static_cast<char *>(f.data) + offset * static_cast<std::int64_t>(size_of(f.dtype));
  };
  for (std::size_t k = 0; k < full.in.size(); ++k) cut(full.in[k], tile.in[k]);
  cut(full.out, tile.out);
}

}  // namespace

void fuse_elementwise(Plan &plan) {
  plan.fused.clear();
  plan.fused_at.clear();
  // On a GPU a tile is a kernel launch: fusing by tiles would only multiply them.
  if (plan.device != Device::cpu()) return;
  const auto n = static_cast<int>(plan.steps.size());
  std::vector<int> used;  // values the run reads or writes so far
  for (int i = 0; i < n;) {
    const PlanStep &head = plan.steps[static_cast<std::size_t>(i)];
    if (!fusible(plan, head) || head.views.out.shape.size() > 16) {
      ++i;
      continue;
    }
    const PlanValue &hv = plan.values[static_cast<std::size_t>(head.out)];
    used.clear();
    int j = i;
    for (; j < n && j - i < max_group_steps; ++j) {
      const PlanStep &s = plan.steps[static_cast<std::size_t>(j)];
      // A group stays within one phase of a plan run by chunks (execute.cpp).
      if (j > i && (static_cast<std::size_t>(j) == plan.chunk_begin || static_cast<std::size_t>(j) == plan.chunk_end))
        break;
      if (!fusible(plan, s)) break;
      const PlanValue &out = plan.values[static_cast<std::size_t>(s.out)];
      if (out.shape != hv.shape || out.batched != hv.batched) break;
      bool safe = true;
      for (int v : s.in) used.push_back(v);
      for (int u : used) safe = safe && safe_against(plan, s.out, u);
      if (!safe) break;
      used.push_back(s.out);
    }
    if (j - i >= 2) {
      if (plan.fused_at.empty()) plan.fused_at.assign(plan.steps.size(), -1);
      plan.fused_at[static_cast<std::size_t>(i)] = static_cast<int>(plan.fused.size());
      plan.fused.push_back({i, j});
    }
    i = std::max(j, i + 1);
  }
}

void run_fused_group(const Plan &plan, const FusedGroup &group, const std::vector<void *> &data, std::int64_t batch,
                     Backend &be) {
  const auto count = static_cast<std::size_t>(group.last - group.first);
  std::vector<KernelViews> full(count);
  for (std::size_t k = 0; k < count; ++k)
    full_views(plan, plan.steps[static_cast<std::size_t>(group.first) + k], data, batch, full[k]);
  const Shape &shape = full[0].out.shape;
  const std::int64_t total = numel(shape);
  auto step = [&](std::size_t k) -> const PlanStep & { return plan.steps[static_cast<std::size_t>(group.first) + k]; };
  if (total < min_elements) {
    for (std::size_t k = 0; k < count; ++k) run_kernel(*step(k).op, step(k).attrs, full[k], batch, be);
    return;
  }
  const Tiling tiling = tiling_of(shape);
  auto run_tiles = [&](std::int64_t first, std::int64_t last) {
    std::vector<KernelViews> tile = full;
    for (std::int64_t i = first; i < last; ++i)
      for (std::size_t k = 0; k < count; ++k) {
        slice(tiling, shape, i, full[k], tile[k]);
        run_kernel(*step(k).op, step(k).attrs, tile[k], batch, be);
      }
  };
  const std::int64_t tiles = tiling.count();
  if (total < parallel_elements || omp_in_parallel() || omp_get_max_threads() == 1) {
    run_tiles(0, tiles);
    return;
  }
  // Each thread runs a contiguous range of tiles; a failure is raised after the threads join.
  std::exception_ptr failure;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    try {
      run_tiles(tiles * t / threads, tiles * (t + 1) / threads);
    } catch (...) {
#pragma omp critical(vt_fused_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace vt::detail
