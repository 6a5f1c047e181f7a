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
#include <omp.h>

#include <algorithm>
#include <cassert>
#include <exception>
#include <vector>

#include "../../backends/cpu/sum_order.hpp"
#include "../../ops/reduce.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

// Elements per tile: a few buffers of 32 KB (float64) fit in L1/L2 while the per-kernel overhead stays small against
// the tile's work (runs over a lower triangle take pieces of twice that: strip_rows, below). A multiple of
// cpu::sum_lanes that divides cpu::sum_segment, so that flat tiles never straddle a segment of the reduce kernel and
// keep its lanes aligned.
constexpr std::int64_t tile_elements = 4096;
static_assert(cpu::sum_segment % tile_elements == 0 && tile_elements % cpu::sum_lanes == 0);
// Below this many elements a call runs its steps one by one (one tile would be the whole output).
constexpr std::int64_t min_elements = 2 * tile_elements;
// Longer runs are cut: the hazard check below is quadratic in a run's length.
constexpr int max_group_steps = 64;
// Tiles run on several threads when the output is at least this large (as CPU maps do).
constexpr std::int64_t parallel_elements = 1 << 16;

bool fusible(const Plan& plan, const PlanStep& s) {
  return s.op->elementwise && !s.op->aliases_input &&
         plan.values[static_cast<std::size_t>(s.out)].kind == PlanValue::Kind::computed;
}

// A sum of the run's last value (step `prev`'s output) to one value per example.
bool ends_run(const Plan& plan, const PlanStep& s, const PlanStep& prev) {
  if (s.op != &sum_op || s.in.size() != 1 || s.in[0] != prev.out) return false;
  const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
  const PlanValue& in = plan.values[static_cast<std::size_t>(prev.out)];
  return out.kind == PlanValue::Kind::computed && numel(out.shape) == 1 && out.batched == in.batched &&
         out.dtype == in.dtype && out.shape.size() <= 16;
}

// A value's bytes in the arena, per example when batched: [begin, end). Values outside the arena (arguments, constants,
// folded values, results' own buffers) never share memory with a step's output, so they have none.
// The batched values of a sub-chunk arena (PlanValue::local) are in an arena of their own.
struct Range {
  bool in_arena = false;
  bool batched = false, local = false;
  std::int64_t begin = 0, end = 0;
};

Range range_of(const Plan& plan, int v) {
  const PlanValue& root = plan.values[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(v)].root)];
  if (root.kind != PlanValue::Kind::computed || root.output_buffer || root.offset < 0) return {};
  return {true, root.batched, root.local, root.offset, root.offset + root.bytes()};
}

// Whether writing value w tile by tile is safe against value u, which the run reads or writes: their buffers are
// disjoint, or they are the same elements of the same buffer (a step in place, or a buffer reused once u is dead), so
// that tile t of w overwrites only tile t of u, which every step of the run has finished with when tile t ends.
bool safe_against(const Plan& plan, int w, int u) {
  const Range rw = range_of(plan, w), ru = range_of(plan, u);
  if (!rw.in_arena || !ru.in_arena || rw.batched != ru.batched || rw.local != ru.local) return true;
  if (rw.end <= ru.begin || ru.end <= rw.begin) return true;
  const PlanValue& a = plan.values[static_cast<std::size_t>(w)];
  const PlanValue& b = plan.values[static_cast<std::size_t>(u)];
  return a.root == w && b.root == u && a.offset == b.offset && a.dtype == b.dtype && a.shape == b.shape &&
         a.batched == b.batched;
}

// The step's views with this call's pointers and batch size, as run_steps gives them.
void call_views(const Plan& plan, const PlanStep& s, const std::vector<void*>& data, std::int64_t batch,
                KernelViews& views) {
  views = s.views;
  views.out.data = data[static_cast<std::size_t>(s.out)];
  if (plan.values[static_cast<std::size_t>(s.out)].batched) views.out.shape[0] = batch;
  for (std::size_t k = 0; k < s.in.size(); ++k) {
    views.in[k].data = data[static_cast<std::size_t>(s.in[k])];
    if (views.batched) views.in[k].shape[0] = batch;
  }
}

// The same with every input broadcast to the output's shape (right-aligned, stride 0 where it is broadcast), so that
// slicing them alike gives a tile.
void full_views(const Plan& plan, const PlanStep& s, const std::vector<void*>& data, std::int64_t batch,
                KernelViews& views) {
  call_views(plan, s, data, batch, views);
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

// Runs of symmetric matrices are cut into strips of this many rows, each strip's row segments from column 0 to the end
// of its diagonal block, cut into pieces of at most piece_elements: long rows keep the kernels' per-row costs small,
// and pieces twice a flat tile's halve the kernel calls (a strip up to order 512 is one piece) at the same speed per
// element (docs/performance.md has the measurement).
constexpr std::int64_t strip_rows = 16;
constexpr std::int64_t piece_elements = 2 * tile_elements;
static_assert(piece_elements % strip_rows == 0);

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

// Runs of one shape are merged across at most this many steps between them.
constexpr int max_gap_steps = 24;
// A merged run's tiled steps, at most (the hazard checks are quadratic in it).
constexpr std::size_t max_tiled_steps = 160;

const Shape& shape_of(const Plan& plan, const FusedGroup& g) {
  return plan.values[static_cast<std::size_t>(plan.steps[static_cast<std::size_t>(g.tiled[0])].out)].shape;
}
bool batched_of(const Plan& plan, const FusedGroup& g) {
  return plan.values[static_cast<std::size_t>(plan.steps[static_cast<std::size_t>(g.tiled[0])].out)].batched;
}

// Whether two values' buffers share no byte.
bool disjoint(const Plan& plan, int w, int u) {
  const Range rw = range_of(plan, w), ru = range_of(plan, u);
  return !rw.in_arena || !ru.in_arena || rw.batched != ru.batched || rw.local != ru.local || rw.end <= ru.begin ||
         ru.end <= rw.begin;
}

// Whether run b can join run a. Each step between them runs either before the tiles (it reads nothing that a or the
// steps after the tiles make: a hyperparameter's exp, say) or after them (a contraction's scalar tail), in the plan's
// order within each. b must read nothing made after the tiles (a's sums included). Buffers: a step moved before the
// tiles shares none with what a's tiles, a's sums or the steps after the tiles write or read; the buffers b's tiles
// write overlap nothing a's tiles read or write later (safe_against), nor anything that a's sums or the steps after the
// tiles touch (they run, or are written, after b's tiles, where the plan ran them before). Values only a run's tiles
// read live in scratch slots: their buffers are never touched.
bool can_merge(const Plan& plan, const FusedGroup& a, const FusedGroup& b, const std::vector<bool>& internal,
               std::vector<int>& before, std::vector<int>& after) {
  before.clear();
  after.clear();
  if (b.first - a.last > max_gap_steps || a.tiled.size() + b.tiled.size() > max_tiled_steps) return false;
  if (shape_of(plan, a) != shape_of(plan, b) || batched_of(plan, a) != batched_of(plan, b)) return false;
  if (a.has_sum && b.has_sum && a.sum_dtype != b.sum_dtype) return false;
  for (int i = a.first + 1; i < b.last; ++i)
    if (plan.starts_segment(static_cast<std::size_t>(i))) return false;
  auto has = [](const std::vector<int>& values, int v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  };
  // later_made: made after the tiles (a's sums, the steps after); touched: read or written by a's tiles, a's sums or
  // the steps after the tiles (internal values aside).
  std::vector<int> later_made, later_touched, touched, a_used, a_made;
  auto add_after = [&](int i) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    later_made.push_back(s.out);
    later_touched.push_back(s.out);
    touched.push_back(s.out);
    for (int v : s.in) {
      later_touched.push_back(v);
      touched.push_back(v);
    }
  };
  for (int i : a.after) add_after(i);
  for (int i : a.tiled) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    if (!s.op->elementwise) {  // a sum: written after the tiles
      later_made.push_back(s.out);
      later_touched.push_back(s.out);
      touched.push_back(s.out);
      continue;
    }
    for (int v : s.in) {
      a_used.push_back(v);
      if (!internal[static_cast<std::size_t>(v)]) touched.push_back(v);
    }
    a_used.push_back(s.out);
    a_made.push_back(s.out);
    if (!internal[static_cast<std::size_t>(s.out)]) touched.push_back(s.out);
  }
  for (int i = a.last; i < b.first; ++i) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    if (s.op->reduces_batch) return false;
    bool early = true;
    for (int v : s.in) early = early && !has(later_made, v) && !has(a_made, v);
    early = early && !has(a_used, s.out);
    // Its inputs may be what a's tiles read too (a hyperparameter, a captured matrix): read in either order.
    for (int u : touched) {
      early = early && disjoint(plan, s.out, u);
      for (int v : s.in) early = early && (v == u || disjoint(plan, v, u));
    }
    if (early) {
      before.push_back(i);
    } else {
      after.push_back(i);
      add_after(i);
    }
  }
  for (int i : b.tiled) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    for (int v : s.in)
      if (has(later_made, v)) return false;
    // b's sums are written after the tiles, in the plan's order with those steps.
    if (!s.op->elementwise || internal[static_cast<std::size_t>(s.out)]) continue;
    for (int u : later_touched)
      if (!disjoint(plan, s.out, u)) return false;
    for (int u : a_used)
      if (!safe_against(plan, s.out, u)) return false;
  }
  return true;
}

// Whether a run computes only its lower triangle: its matrices are at least min_lower_triangle_order across, and every
// value it makes is symmetric, so every value it reads is symmetric or one number per example.
bool by_lower_triangle(const Plan& plan, const FusedGroup& g, Symmetry& symmetric) {
  const Shape& shape = shape_of(plan, g);
  if (shape.size() != 2 || shape[0] != shape[1] || shape[0] < min_lower_triangle_order) return false;
  for (int k : g.tiled) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(k)];
    if (s.op->elementwise && !symmetric(s.out)) return false;
  }
  return true;
}

}  // namespace

void fuse_elementwise(Plan& plan) {
  plan.fused.clear();
  plan.fused_at.clear();
  const auto n = static_cast<int>(plan.steps.size());
  // Per value: how many steps read it, and whether anything but steps reads its buffer (a result, or a result's alias).
  std::vector<int> reads(plan.values.size(), 0);
  std::vector<bool> escapes(plan.values.size(), false);
  auto distinct_inputs = [&](int k) {
    std::vector<int> in = plan.steps[static_cast<std::size_t>(k)].in;
    std::sort(in.begin(), in.end());
    in.erase(std::unique(in.begin(), in.end()), in.end());
    return in;
  };
  for (int k = 0; k < n; ++k)
    for (int v : distinct_inputs(k)) ++reads[static_cast<std::size_t>(v)];
  for (int v : plan.outputs) {
    escapes[static_cast<std::size_t>(v)] = true;
    escapes[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(v)].root)] = true;
  }
  std::vector<FusedGroup> runs;
  std::vector<int> used;  // values the run reads or writes so far
  for (int i = 0; i < n;) {
    const PlanStep& head = plan.steps[static_cast<std::size_t>(i)];
    if (!fusible(plan, head) || head.views.out.shape.size() > 16) {
      ++i;
      continue;
    }
    const PlanValue& hv = plan.values[static_cast<std::size_t>(head.out)];
    used.clear();
    int j = i;
    for (; j < n && j - i < max_group_steps; ++j) {
      const PlanStep& s = plan.steps[static_cast<std::size_t>(j)];
      // A group stays within one phase or segment of a plan run by chunks (execute.cpp).
      if (j > i && plan.starts_segment(static_cast<std::size_t>(j))) break;
      if (!fusible(plan, s)) break;
      const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
      if (out.shape != hv.shape || out.batched != hv.batched) break;
      bool safe = true;
      for (int v : s.in) used.push_back(v);
      for (int u : used) safe = safe && safe_against(plan, s.out, u);
      if (!safe) break;
      used.push_back(s.out);
    }
    FusedGroup group;
    group.first = i;
    // The sum writes its result after the last tile, when the run has read everything.
    if (j < n && !plan.starts_segment(static_cast<std::size_t>(j)) &&
        ends_run(plan, plan.steps[static_cast<std::size_t>(j)], plan.steps[static_cast<std::size_t>(j - 1)])) {
      group.has_sum = true;
      group.sum_dtype = plan.values[static_cast<std::size_t>(plan.steps[static_cast<std::size_t>(j)].out)].dtype;
      ++j;
    }
    group.last = j;
    for (int k = i; k < j; ++k) group.tiled.push_back(k);
    // A lone large step is a run too, so that a neighbouring run can take it in (it is dropped below if none does).
    if (j - i >= 2 || (j - i == 1 && numel(hv.shape) >= min_elements)) runs.push_back(std::move(group));
    i = std::max(j, i + 1);
  }
  // Values that only the tiled steps of one run read: never written to memory once they are tiled.
  std::vector<bool> internal(plan.values.size(), false);
  std::vector<int> tiled_reads(plan.values.size(), 0);
  auto mark_internal = [&](FusedGroup& g, bool set) {
    for (int k : g.tiled)
      for (int v : distinct_inputs(k)) ++tiled_reads[static_cast<std::size_t>(v)];
    for (int k : g.tiled) {
      const PlanStep& s = plan.steps[static_cast<std::size_t>(k)];
      const auto v = static_cast<std::size_t>(s.out);
      const PlanValue& pv = plan.values[v];
      internal[v] = set && s.op->elementwise && pv.root == s.out && !pv.output_buffer && !escapes[v] && reads[v] > 0 &&
                    tiled_reads[v] == reads[v];
    }
    for (int k : g.tiled)
      for (int v : plan.steps[static_cast<std::size_t>(k)].in) tiled_reads[static_cast<std::size_t>(v)] = 0;
  };
  for (FusedGroup& r : runs) mark_internal(r, true);
  std::vector<FusedGroup> groups;
  std::vector<int> early, late;
  Symmetry symmetric(plan);
  // Runs too small to be tiled (a hyperparameter's few steps) between two runs of one shape do not keep them apart:
  // they become steps between them, run before or after the tiles.
  auto tiny = [&](const FusedGroup& g) { return numel(shape_of(plan, g)) < min_elements; };
  auto skip_tiny = [&](std::size_t t, const FusedGroup& r) {
    while (
        t > 0 && tiny(groups[t - 1]) &&
        (shape_of(plan, groups[t - 1]) != shape_of(plan, r) || batched_of(plan, groups[t - 1]) != batched_of(plan, r)))
      --t;
    return t;
  };
  // A run by the lower triangle and one that is not stay apart: joined, both would run whole.
  auto joins = [&](std::size_t t, const FusedGroup& r) {
    return t > 0 && groups[t - 1].lower_triangle == r.lower_triangle &&
           can_merge(plan, groups[t - 1], r, internal, early, late);
  };
  for (FusedGroup& r : runs) {
    r.lower_triangle = by_lower_triangle(plan, r, symmetric);  // a merged group's, since only equals merge
    std::size_t t = skip_tiny(groups.size(), r);
    bool join = joins(t, r);
    // A lone step that cannot take r in stays a step between runs: r may still join the run before it.
    if (!join && t > 0 && groups[t - 1].tiled.size() == 1) {
      t = skip_tiny(t - 1, r);
      join = joins(t, r);
    }
    if (join) {
      groups.resize(t);
      FusedGroup& g = groups.back();
      g.before.insert(g.before.end(), early.begin(), early.end());
      g.after.insert(g.after.end(), late.begin(), late.end());
      g.tiled.insert(g.tiled.end(), r.tiled.begin(), r.tiled.end());
      if (r.has_sum) {
        g.has_sum = true;
        g.sum_dtype = r.sum_dtype;
      }
      g.last = r.last;
    } else {
      groups.push_back(std::move(r));
    }
  }
  std::vector<int> slot_of(plan.values.size(), -1), pending(plan.values.size(), 0);
  for (FusedGroup& group : groups) {
    if (group.tiled.size() < 2) continue;  // a lone step no run took in: its kernel runs as a plain step
    // Scratch slots for the outputs that only the tiled steps read, reused once their last reader ran.
    mark_internal(group, true);
    std::vector<int> free_slots;
    group.slot.assign(group.tiled.size(), -1);
    for (std::size_t e = 0; e < group.tiled.size(); ++e) {
      const PlanStep& s = plan.steps[static_cast<std::size_t>(group.tiled[e])];
      const auto v = static_cast<std::size_t>(s.out);
      if (internal[v]) {
        int slot = group.slots;
        if (free_slots.empty()) {
          ++group.slots;
        } else {
          slot = free_slots.back();
          free_slots.pop_back();
        }
        group.slot[e] = slot_of[v] = slot;
        pending[v] = reads[v];
      }
      for (int u : distinct_inputs(group.tiled[e]))
        if (slot_of[static_cast<std::size_t>(u)] >= 0 && --pending[static_cast<std::size_t>(u)] == 0) {
          free_slots.push_back(slot_of[static_cast<std::size_t>(u)]);
          slot_of[static_cast<std::size_t>(u)] = -1;
        }
    }
    group.slot_bytes = static_cast<std::size_t>(group.lower_triangle ? piece_elements : tile_elements) * sizeof(double);
    if (plan.fused_at.empty()) plan.fused_at.assign(plan.steps.size(), -1);
    plan.fused_at[static_cast<std::size_t>(group.first)] = static_cast<int>(plan.fused.size());
    if (!tiny(group)) ++plan.summary.fused_runs;
    plan.fused.push_back(std::move(group));
  }
  // The values that runs by their lower triangle write: mirrored above the diagonal where something else reads them
  // (a step other than such a run's tiled ones, one that reads only the lower triangle, OpDef::lower_triangle_inputs,
  // or a handle), or they are results.
  std::vector<bool> whole(plan.values.size(), false), lower_tiled(plan.steps.size(), false);
  for (const FusedGroup& g : plan.fused)
    if (g.lower_triangle)
      for (int k : g.tiled) lower_tiled[static_cast<std::size_t>(k)] = true;
  for (int v : plan.outputs) {
    whole[static_cast<std::size_t>(v)] = true;
    whole[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(v)].root)] = true;
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (lower_tiled[i]) continue;
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      if (reads_lower_triangle_only(s, k)) continue;
      whole[static_cast<std::size_t>(s.in[k])] = true;
      whole[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(s.in[k])].root)] = true;
    }
  }
  for (FusedGroup& g : plan.fused) {
    if (!g.lower_triangle) continue;
    g.mirrored.assign(g.tiled.size(), false);
    for (std::size_t e = 0; e < g.tiled.size(); ++e) {
      const PlanStep& s = plan.steps[static_cast<std::size_t>(g.tiled[e])];
      g.mirrored[e] = s.op->elementwise && g.slot[e] < 0 && whole[static_cast<std::size_t>(s.out)];
    }
  }
}

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
    call_views(plan, s, data, batch, views);
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
    if (is_map[e]) full_views(plan, step(e), data, batch, full[e]);
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
