// The tile executor of fused elementwise runs (autodiff/jit/fuse.hpp says what a run is): run_fused_group runs one
// group's steps for one call, tile by tile (flat ranges, or strips of a lower triangle), on the OpenMP threads where
// the output is large.
#include <omp.h>

#include <algorithm>
#include <cassert>
#include <exception>
#include <vector>

#include "fuse.hpp"
#include "plan.hpp"

namespace vt::detail {

using namespace fusion;

namespace {

// Tiles run on several threads when the output is at least this large (as CPU maps do).
constexpr std::int64_t parallel_elements = 1 << 16;

// The step's views with this call's pointers and batch size, as run_steps gives them.
void call_views(const Plan& plan, int step, const std::vector<void*>& data, std::int64_t batch, KernelViews& views) {
  const PlanStep& s = plan.steps[static_cast<std::size_t>(step)];
  views = plan.views[static_cast<std::size_t>(step)];
  views.out.data = data[static_cast<std::size_t>(s.out)];
  if (plan.values[static_cast<std::size_t>(s.out)].batched) views.out.shape[0] = batch;
  for (std::size_t k = 0; k < s.in.size(); ++k) {
    views.in[k].data = data[static_cast<std::size_t>(s.in[k])];
    if (views.batched) views.in[k].shape[0] = batch;
  }
}

// The same with every input broadcast to the output's shape (right-aligned, stride 0 where it is broadcast), so that
// slicing them alike gives a tile.
void full_views(const Plan& plan, int step, const std::vector<void*>& data, std::int64_t batch, KernelViews& views) {
  call_views(plan, step, data, batch, views);
  for (View& view : views.in) view = expand_view(view, views.out, views.batched);
}

void set_contiguous(View& v) {
  v.strides.resize(v.shape.size());
  std::int64_t stride = 1;
  for (std::size_t d = v.shape.size(); d-- > 0;) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
}

// How a view walks an example's elements in row-major order (the axes after the `lead` batch axis): 1 in order
// (contiguous), 0 one element broadcast over all of them, -1 neither.
int flat_unit(const View& v, std::size_t lead) {
  bool broadcast = true, contiguous = true;
  std::int64_t expect = 1;
  for (std::size_t d = v.shape.size(); d-- > lead;) {
    if (v.shape[d] != 1) {
      broadcast = broadcast && v.strides[d] == 0;
      contiguous = contiguous && v.strides[d] == expect;
    }
    expect *= v.shape[d];
  }
  return broadcast ? 0 : contiguous ? 1 : -1;
}

// How the output's shape is cut: axes before `axis` one index at a time, `axis` into `chunks` nearly equal pieces, the
// axes after it whole.
struct Tiling {
  std::size_t axis = 0;
  std::int64_t outer = 1, chunks = 1, extent = 1;
  std::int64_t count() const { return outer * chunks; }
};

Tiling tiling_of(const Shape& shape) {
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
  // Nearly equal pieces: with per_tile >= 4, none is a single index where the axis is longer, so a tile never
  // degenerates to one element where the whole output has more (a kernel may choose its path by the innermost stride,
  // which a one-element view loses).
  t.chunks = (t.extent + per_tile - 1) / per_tile;
  for (std::size_t d = 0; d < axis; ++d) t.outer *= shape[d];
  return t;
}

// Points `tile` (a copy of `full`) at tile i: shapes cut, data pointers moved.
void slice(const Tiling& t, const Shape& shape, std::int64_t i, const KernelViews& full, KernelViews& tile) {
  std::int64_t o = i / t.chunks;
  const std::int64_t c = i % t.chunks;
  const std::int64_t begin = c * t.extent / t.chunks, end = (c + 1) * t.extent / t.chunks;
  std::int64_t index[16];  // the outer multi-index (at most 16 axes:
                           // fuse_elementwise checks)
  for (std::size_t d = t.axis; d-- > 0;) {
    index[d] = o % shape[d];
    o /= shape[d];
  }
  auto cut = [&](const View& f, View& v) {
    std::int64_t offset = begin * f.strides[t.axis];
    for (std::size_t d = 0; d < t.axis; ++d) {
      offset += index[d] * f.strides[d];
      v.shape[d] = 1;
    }
    v.shape[t.axis] = end - begin;
    v.data = static_cast<char*>(f.data) + offset * static_cast<std::int64_t>(size_of(f.dtype));
  };
  for (std::size_t k = 0; k < full.in.size(); ++k) cut(full.in[k], tile.in[k]);
  cut(full.out, tile.out);
}

// Points `tile` at elements [begin, begin + len) of example `example` of `full`, walked with `unit` (flat_unit): shape
// [1, len] with a batch axis, else [len].
void flat_slice(const View& full, int unit, std::size_t lead, std::int64_t example, std::int64_t begin,
                std::int64_t len, View& tile) {
  std::int64_t offset = begin * unit;
  if (lead) offset += example * full.strides[0];
  tile.data = static_cast<char*>(full.data) + offset * static_cast<std::int64_t>(size_of(full.dtype));
  tile.shape.resize(lead + 1);
  tile.strides.resize(lead + 1);
  if (lead) {
    tile.shape[0] = 1;
    tile.strides[0] = full.strides[0];
  }
  tile.shape[lead] = len;
  tile.strides[lead] = unit;
}

// Per thread: the scratch slots of the run being tiled.
char* scratch(std::size_t bytes) {
  thread_local std::vector<double> buffer;
  const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
  if (buffer.size() < words) buffer.resize(words);
  return reinterpret_cast<char*>(buffer.data());
}

// Runs body(first, last) over [0, count) on the OpenMP threads, thread t of n from start(t, n) to start(t + 1, n), or
// on this one when `parallel` is false; a failure is raised after the threads join.
template <class Start, class Body>
void run_split(std::int64_t count, bool parallel, Start&& start, Body&& body) {
  if (!parallel || count < 2 || omp_in_parallel() || omp_get_max_threads() == 1) {
    body(std::int64_t{0}, count);
    return;
  }
  std::exception_ptr failure;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    try {
      body(start(t, threads), start(t + 1, threads));
    } catch (...) {
#pragma omp critical(vt_fused_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Contiguous ranges of equally many units.
template <class Body>
void run_ranges(std::int64_t count, bool parallel, Body&& body) {
  run_split(
      count, parallel, [&](std::int64_t t, std::int64_t n) { return count * t / n; }, body);
}

// Contiguous ranges of about equal work over `examples` examples of the same units: unit u of an example is unit
// u % units of `work`, whose entry u is the work before that unit in its example and whose last entry an example's.
template <class Body>
void run_ranges_by_work(const std::vector<std::int64_t>& work, std::int64_t examples, bool parallel, Body&& body) {
  const auto units = static_cast<std::int64_t>(work.size()) - 1;
  auto start = [&](std::int64_t t, std::int64_t n) -> std::int64_t {
    const std::int64_t target = examples * work.back() * t / n, ex = target / work.back();
    return ex * units + (std::lower_bound(work.begin(), work.end() - 1, target - ex * work.back()) - work.begin());
  };
  run_split(examples * units, parallel, start, body);
}

// A piece of an example's matrix: rows [r0, r0 + rows), columns [c0, c0 + cols).
struct Piece {
  std::int64_t r0, c0, rows, cols;
};

// The pieces covering the lower triangle of an n x n matrix, and the upper halves of the strips' diagonal blocks.
std::vector<Piece> lower_pieces(std::int64_t n) {
  std::vector<Piece> pieces;
  constexpr std::int64_t widest = piece_elements / strip_rows;
  for (std::int64_t r0 = 0; r0 < n; r0 += strip_rows) {
    const std::int64_t rows = std::min(strip_rows, n - r0), end = r0 + rows;
    // Nearly equal widths, so that no piece is a sliver (the kernels' bits never depend on a piece's shape).
    const std::int64_t count = (end + widest - 1) / widest;
    for (std::int64_t i = 0; i < count; ++i)
      pieces.push_back({r0, end * i / count, rows, end * (i + 1) / count - end * i / count});
  }
  return pieces;
}

// Points `tile` at piece p of example `example` of `full`, a view whose last two axes are an example's matrix (after
// a `lead` batch axis).
void piece_view(const View& full, std::size_t lead, std::int64_t example, const Piece& p, View& tile) {
  const std::size_t r = full.shape.size();
  std::int64_t offset = p.r0 * full.strides[r - 2] + p.c0 * full.strides[r - 1];
  if (lead) offset += example * full.strides[0];
  tile.data = static_cast<char*>(full.data) + offset * static_cast<std::int64_t>(size_of(full.dtype));
  tile.shape = full.shape;
  tile.strides = full.strides;
  if (lead) tile.shape[0] = 1;
  tile.shape[r - 2] = p.rows;
  tile.shape[r - 1] = p.cols;
}

// Copies piece p of example `example` of `full` (as piece_view) to its mirror place: rows [c0, c0 + cols), columns
// [r0, r0 + rows).
void mirror(const View& full, std::size_t lead, std::int64_t example, const Piece& p) {
  const std::size_t r = full.shape.size();
  const std::int64_t rs = full.strides[r - 2], cs = full.strides[r - 1];
  auto copy = [&](auto word) {
    using Word = decltype(word);
    Word* const matrix = static_cast<Word*>(full.data) + (lead ? example * full.strides[0] : 0);
    const Word* const from = matrix + p.r0 * rs + p.c0 * cs;
    Word* const to = matrix + p.c0 * rs + p.r0 * cs;
    for (std::int64_t j = 0; j < p.cols; ++j)
      for (std::int64_t i = 0; i < p.rows; ++i) to[j * rs + i * cs] = from[i * rs + j * cs];
  };
  visit_element_word(full.dtype, copy);
}

}  // namespace

namespace {

template <class T>
void run_group(const Plan& plan, const FusedGroup& group, const std::vector<void*>& data, std::int64_t batch,
               Backend& be) {
  const std::size_t count = group.tiled.size();
  auto step = [&](std::size_t e) -> const PlanStep& { return plan.steps[static_cast<std::size_t>(group.tiled[e])]; };
  KernelViews views;
  auto run_step = [&](int i) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    if (s.op->aliases_input) return;
    call_views(plan, i, data, batch, views);
    run_kernel(*s.op, s.attrs, views, batch, be);
  };
  auto run_steps = [&](const std::vector<int>& indices) {
    for (int i : indices) run_step(i);
  };
  auto one_by_one = [&] {  // the plan's own order
    for (int i = group.first; i < group.last; ++i) run_step(i);
  };
  // Too small to tile (a few numbers per example, run by chunks of few examples): step by step, before building the
  // tiles' views, which costs more than such steps.
  const PlanValue& first_out = plan.values[static_cast<std::size_t>(step(0).out)];
  if (!step(0).op->elementwise || numel(first_out.shape) * (first_out.batched ? batch : 1) < min_elements)
    return one_by_one();
  // The maps' views over the whole output; sums have none (is_map false).
  std::vector<KernelViews> full(count);
  std::vector<bool> is_map(count);
  for (std::size_t e = 0; e < count; ++e) {
    is_map[e] = step(e).op->elementwise;
    if (is_map[e]) full_views(plan, group.tiled[e], data, batch, full[e]);
  }
  const Shape shape = full[0].out.shape;
  const std::int64_t total = numel(shape);

  // Where each view's tile comes from: a scratch slot (>= 0) or its own buffer (-1); and for a sum, the entry whose
  // output it adds.
  std::vector<int> slot_of_value(plan.values.size(), -1), entry_of_value(plan.values.size(), -1);
  std::vector<std::vector<int>> in_slot(count);
  std::vector<int> source(count, -1);
  for (std::size_t e = 0; e < count; ++e) {
    for (int v : step(e).in) in_slot[e].push_back(slot_of_value[static_cast<std::size_t>(v)]);
    if (!is_map[e]) source[e] = entry_of_value[static_cast<std::size_t>(step(e).in[0])];
    if (group.slot[e] >= 0) slot_of_value[static_cast<std::size_t>(step(e).out)] = group.slot[e];
    entry_of_value[static_cast<std::size_t>(step(e).out)] = static_cast<int>(e);
  }
  const std::size_t scratch_bytes = static_cast<std::size_t>(group.slots) * group.slot_bytes;
  auto to_slot = [&](View& v, char* base, int slot) {
    assert(static_cast<std::size_t>(numel(v.shape)) * size_of(v.dtype) <= group.slot_bytes);
    v.data = base + static_cast<std::size_t>(slot) * group.slot_bytes;
    set_contiguous(v);
  };

  const bool batched = plan.values[static_cast<std::size_t>(step(0).out)].batched;
  const std::size_t lead = batched ? 1 : 0;
  std::vector<std::vector<int>> unit(count);  // by map: each input's flat_unit, then the output's
  bool flat = true;
  for (std::size_t e = 0; e < count; ++e) {
    if (!is_map[e]) {
      flat = flat && source[e] >= 0;
      continue;
    }
    for (const View& v : full[e].in) unit[e].push_back(flat_unit(v, lead));
    unit[e].push_back(flat_unit(full[e].out, lead));
    flat = flat && unit[e].back() == 1 && std::find(unit[e].begin(), unit[e].end(), -1) == unit[e].end();
  }

  // A sum's order needs flat tiles or the lower triangle's pieces, and the value it adds made in the run.
  bool sums_made_here = true;
  for (std::size_t e = 0; e < count; ++e) sums_made_here = sums_made_here && (is_map[e] || source[e] >= 0);
  if (group.has_sum && ((!flat && !group.lower_triangle) || !sums_made_here)) return one_by_one();
  run_steps(group.before);
  const std::int64_t examples = batched ? shape[0] : 1;
  std::vector<std::size_t> sums;  // the entries that are sums
  for (std::size_t e = 0; e < count; ++e)
    if (!is_map[e]) sums.push_back(e);
  std::vector<T> partial;  // by sum, then work unit: the unit's part of the sum
  // The sums' results, each example's units' parts added in order, and the steps after the tiles, in the plan's order.
  auto finish = [&](std::int64_t per_example) {
    const auto units = static_cast<std::size_t>(examples * per_example);
    std::size_t k = 0, a = 0;
    for (int i = group.first; i < group.last; ++i) {
      if (a < group.after.size() && group.after[a] == i) {
        run_step(group.after[a++]);
        continue;
      }
      if (k == sums.size() || group.tiled[sums[k]] != i) continue;
      T* const out = static_cast<T*>(data[static_cast<std::size_t>(step(sums[k]).out)]);
      for (std::int64_t ex = 0; ex < examples; ++ex) {
        T acc = 0;
        for (std::int64_t g = 0; g < per_example; ++g)
          acc = element::add(acc, partial[k * units + static_cast<std::size_t>(ex * per_example + g)]);
        out[ex] = acc;
      }
      ++k;
    }
  };
  if (group.lower_triangle) {
    // Work units: pieces of each example's lower triangle (lower_pieces).
    const std::int64_t n = shape.back();
    const std::vector<Piece> pieces = lower_pieces(n);
    const auto per_example = static_cast<std::int64_t>(pieces.size());
    const std::int64_t units = examples * per_example;
    partial.resize(sums.size() * static_cast<std::size_t>(units));
    // The pieces grow with their rows: threads take ranges of equally many elements, not of equally many pieces.
    std::vector<std::int64_t> work(pieces.size() + 1, 0);
    for (std::size_t i = 0; i < pieces.size(); ++i) work[i + 1] = work[i] + pieces[i].rows * pieces[i].cols;
    run_ranges_by_work(work, examples, total >= parallel_elements, [&](std::int64_t first, std::int64_t last) {
      std::vector<KernelViews> tile = full;
      char* const base = scratch(scratch_bytes);
      for (std::int64_t u = first; u < last; ++u) {
        const std::int64_t ex = u / per_example;
        const Piece& p = pieces[static_cast<std::size_t>(u % per_example)];
        // Its columns left of the strip's diagonal block are below the diagonal: the mirrored ones.
        const std::int64_t below = std::clamp<std::int64_t>(p.r0 - p.c0, 0, p.cols);
        for (std::size_t e = 0, k = 0; e < count; ++e) {
          KernelViews& t = tile[e];
          if (!is_map[e]) {
            // Row by row: the entries below the diagonal twice, the diagonal's once, none above it.
            const View& v = tile[static_cast<std::size_t>(source[e])].out;
            const std::int64_t row_stride = v.strides[v.shape.size() - 2];
            T acc = 0;
            for (std::int64_t i = 0; i < p.rows; ++i) {
              const std::int64_t row = p.r0 + i, lower = std::clamp<std::int64_t>(row - p.c0, 0, p.cols);
              const T* x = static_cast<const T*>(v.data) + i * row_stride;
              cpu::LaneSum<T> lanes;
              lanes.add(x, lower, 1);
              const T twice = lanes.total();
              acc = element::add(acc, element::add(twice, twice));
              if (row >= p.c0 && row < p.c0 + p.cols) acc = element::add(acc, x[row - p.c0]);
            }
            partial[k++ * static_cast<std::size_t>(units) + static_cast<std::size_t>(u)] = acc;
            continue;
          }
          for (std::size_t m = 0; m < t.in.size(); ++m) {
            piece_view(full[e].in[m], lead, ex, p, t.in[m]);
            if (in_slot[e][m] >= 0) to_slot(t.in[m], base, in_slot[e][m]);
          }
          piece_view(full[e].out, lead, ex, p, t.out);
          if (group.slot[e] >= 0) to_slot(t.out, base, group.slot[e]);
          run_kernel(*step(e).op, step(e).attrs, t, batch, be);
          if (group.mirrored[e] && below > 0) mirror(full[e].out, lead, ex, {p.r0, p.c0, p.rows, below});
        }
      }
    });
    return finish(per_example);
  }
  if (flat) {
    // Work units: segments of the reduce kernel over each example's elements, tiles within them.
    const std::int64_t per_example = total / examples;
    const std::int64_t segments = (per_example + cpu::sum_segment - 1) / cpu::sum_segment;
    const std::int64_t units = examples * segments;
    partial.resize(sums.size() * static_cast<std::size_t>(units));
    run_ranges(units, total >= parallel_elements, [&](std::int64_t first, std::int64_t last) {
      std::vector<KernelViews> tile = full;
      std::vector<cpu::LaneSum<T>> lanes(sums.size());
      char* const base = scratch(scratch_bytes);
      for (std::int64_t u = first; u < last; ++u) {
        const std::int64_t ex = u / segments, begin = u % segments * cpu::sum_segment;
        const std::int64_t end = std::min(per_example, begin + cpu::sum_segment);
        for (auto& l : lanes) l = {};
        for (std::int64_t b = begin; b < end; b += tile_elements) {
          const std::int64_t len = std::min(tile_elements, end - b);
          for (std::size_t e = 0, k = 0; e < count; ++e) {
            if (!is_map[e]) {
              lanes[k++].add(static_cast<const T*>(tile[static_cast<std::size_t>(source[e])].out.data), len, 1);
              continue;
            }
            KernelViews& t = tile[e];
            for (std::size_t m = 0; m < t.in.size(); ++m) {
              flat_slice(full[e].in[m], unit[e][m], lead, ex, b, len, t.in[m]);
              if (in_slot[e][m] >= 0) to_slot(t.in[m], base, in_slot[e][m]);
            }
            flat_slice(full[e].out, 1, lead, ex, b, len, t.out);
            if (group.slot[e] >= 0) to_slot(t.out, base, group.slot[e]);
            run_kernel(*step(e).op, step(e).attrs, t, batch, be);
          }
        }
        for (std::size_t k = 0; k < sums.size(); ++k)
          partial[k * static_cast<std::size_t>(units) + static_cast<std::size_t>(u)] = lanes[k].total();
      }
    });
    return finish(segments);  // the segments' totals in order, as the kernel adds them
  }
  const Tiling tiling = tiling_of(shape);
  run_ranges(tiling.count(), total >= parallel_elements, [&](std::int64_t first, std::int64_t last) {
    std::vector<KernelViews> tile = full;
    char* const base = scratch(scratch_bytes);
    for (std::int64_t i = first; i < last; ++i)
      for (std::size_t e = 0; e < count; ++e) {
        slice(tiling, shape, i, full[e], tile[e]);
        for (std::size_t m = 0; m < tile[e].in.size(); ++m)
          if (in_slot[e][m] >= 0) to_slot(tile[e].in[m], base, in_slot[e][m]);
        if (group.slot[e] >= 0) to_slot(tile[e].out, base, group.slot[e]);
        run_kernel(*step(e).op, step(e).attrs, tile[e], batch, be);
      }
  });
  run_steps(group.after);
}

}  // namespace

void run_fused_group(const Plan& plan, const FusedGroup& group, const std::vector<void*>& data, std::int64_t batch,
                     Backend& be) {
  // The sums' type; runs without sums tile the same whatever T is.
  switch (group.has_sum ? group.sum_dtype : DType::f64) {
    case DType::f32: return run_group<float>(plan, group, data, batch, be);
    case DType::i32: return run_group<std::int32_t>(plan, group, data, batch, be);
    case DType::i64: return run_group<std::int64_t>(plan, group, data, batch, be);
    default: return run_group<double>(plan, group, data, batch, be);
  }
}

}  // namespace vt::detail
