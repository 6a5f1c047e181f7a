// The memory plan, computed once per plan in per-example units: every computed value gets a
// root buffer and an offset in one of two arenas (batched offsets scale with B), so that a call
// allocates one arena whatever its batch size, and buffers are reused as values die.
#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "plan.hpp"

namespace vt::detail {

namespace {

constexpr std::int64_t alignment = 64;

// First-fit allocation of byte ranges in one arena, with coalescing frees.
class Arena {
 public:
  std::int64_t allocate(std::int64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const std::int64_t at = it->first;
      if (it->second == bytes) free_.erase(it);
      else *it = {at + bytes, it->second - bytes};
      return at;
    }
    const std::int64_t at = top_;
    top_ = checked_add(top_, bytes, "jit", "the plan's memory");
    return at;
  }
  void release(std::int64_t at, std::int64_t bytes) {
    auto it = std::lower_bound(free_.begin(), free_.end(), std::pair{at, std::int64_t{0}});
    it = free_.insert(it, {at, bytes});
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  std::int64_t size() const { return top_; }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> free_;  // (offset, size), by offset
  std::int64_t top_ = 0;
};

}  // namespace

// A chunk holds as many examples as a large shared operand needs to be read once for many of them (examples_per_chunk),
// and then its own values pass through memory between its steps. Steps that read no such operand and reduce nothing
// over the batch (or read it elementwise, once per example whatever the chunk) need no more than one example at a time:
// the maximal runs of them become segments run by sub-chunks that fit the cache, the other steps segments run over the
// whole chunk. A plan that reads no large shared operand, or where chunks larger than the cache never pay, is one
// segment.
void split_into_segments(Plan& plan) {
  plan.segments.clear();
  const std::size_t cache = plan.chunk_cache_bytes;
  if (!plan.chunkable || cache == 0) return;
  std::vector<bool> whole(plan.steps.size(), false);
  bool any_large = false;
  for (std::size_t i = plan.chunk_begin; i < plan.chunk_end; ++i) {
    const PlanStep& s = plan.steps[i];
    whole[i] = !plan.values[static_cast<std::size_t>(s.out)].batched;  // a reduction over the batch
    if (s.op->aliases_input || s.op->elementwise) continue;
    for (int v : s.in) {
      const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
      if (!pv.batched && large_shared_operand(pv.bytes(), cache)) whole[i] = any_large = true;
    }
  }
  if (!any_large) return;
  plan_memory(plan);  // the sizes without segments, for the cost model: without a larger chunk, segments buy nothing
  if (!larger_chunks_pay(plan)) return;
  plan.memory_planned = false;                    // the segments change the layout: plan_memory runs again
  std::vector<int> seen(plan.values.size(), -1);  // by root: the last segment that counted its bytes
  for (std::size_t i = plan.chunk_begin; i < plan.chunk_end; ++i) {
    if (plan.segments.empty() || plan.segments.back().by_sub_chunks == whole[i])
      plan.segments.push_back({i, i, !whole[i], 0});
    Plan::Segment& seg = plan.segments.back();
    seg.last = i + 1;
    const PlanStep& s = plan.steps[i];
    if (s.op->aliases_input) continue;
    const auto count = [&](int v) {
      const auto root = static_cast<std::size_t>(plan.buffers[static_cast<std::size_t>(v)].root);
      const PlanValue& pv = plan.values[root];
      if (!pv.batched || seen[root] == static_cast<int>(plan.segments.size())) return;
      seen[root] = static_cast<int>(plan.segments.size());
      seg.bytes_per_example += pv.bytes();
    };
    for (int v : s.in) count(v);
    count(s.out);
  }
}

namespace {

// Values of a few bytes (a hyperparameter, a sum) get arenas of their own, after the large values', and buffers never
// reused: a small value placed in another's freed buffer would tie the steps around it to the plan's order, and the
// fused runs (fuse_groups.cpp) could no longer run a later run's tiles before the scalar steps between (64 bytes a
// value).
constexpr std::int64_t small_bytes = 256;

// plan_memory, phase by phase over one plan.
class MemoryPlanner {
 public:
  explicit MemoryPlanner(Plan& plan)
      : plan_(plan), last_read_(plan.values.size(), -1), segment_of_(plan.steps.size(), -1) {}

  void run() {
    find_roots();
    find_last_reads();
    for (std::size_t g = 0; g < plan_.segments.size(); ++g)
      for (std::size_t i = plan_.segments[g].first; i < plan_.segments[g].last; ++i)
        segment_of_[i] = static_cast<int>(g);
    mark_local_values();
    place_buffers();
    plan_.memory_planned = true;
    plan_.arena_local = local_.size();
    plan_.arena_batched = checked_add(batched_.size(), small_batched_.size(), "jit", "the plan's memory");
    plan_.arena_fixed = checked_add(fixed_.size(), small_fixed_.size(), "jit", "the plan's memory");
    plan_chunk_io();
  }

 private:
  bool small(int v) const { return aligned(value(v).bytes()) <= small_bytes; }
  bool in_arena(int v) const { return value(v).kind == PlanValue::Kind::computed && !buffer(v).output_buffer; }
  Arena& arena_of(int v) {
    if (buffer(v).local) return local_;
    return value(v).batched ? (small(v) ? small_batched_ : batched_) : (small(v) ? small_fixed_ : fixed_);
  }
  const PlanValue& value(int v) const { return plan_.values[static_cast<std::size_t>(v)]; }
  ValueBuffer& buffer(int v) { return plan_.buffers[static_cast<std::size_t>(v)]; }
  const ValueBuffer& buffer(int v) const { return plan_.buffers[static_cast<std::size_t>(v)]; }
  int root(int v) const { return buffer(v).root; }

  // Roots: a value made by an aliasing op shares its input's buffer; a result's root has a buffer of its own.
  void find_roots() {
    plan_.buffers.assign(plan_.values.size(), ValueBuffer{});
    for (std::size_t v = 0; v < plan_.values.size(); ++v) plan_.buffers[v].root = static_cast<int>(v);
    for (const PlanStep& s : plan_.steps)
      if (s.op->aliases_input) buffer(s.out).root = root(s.in[0]);
    for (int v : plan_.outputs)
      if (value(root(v)).kind == PlanValue::Kind::computed) buffer(root(v)).output_buffer = true;
  }

  // The last step that reads each root's data (handle inputs are not reads).
  void find_last_reads() {
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      for (std::size_t k = 0; k < s.in.size(); ++k)
        if (!(s.op->handle_inputs >> k & 1u) || s.op->aliases_input)
          last_read_[static_cast<std::size_t>(root(s.in[k]))] = static_cast<int>(i);
    }
  }

  // The sub-chunk arena's values: made and read (aliases and handles included) by the steps of one segment run by
  // sub-chunks only. Values of a few bytes stay with the others.
  void mark_local_values() {
    std::vector<int> only_segment(plan_.values.size(), -1);  // by root: the segment of every use, or -2 for several
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      const int g = segment_of_[i] >= 0 && plan_.segments[static_cast<std::size_t>(segment_of_[i])].by_sub_chunks
                        ? segment_of_[i]
                        : -2;
      const auto use = [&](int v) {
        int& at = only_segment[static_cast<std::size_t>(root(v))];
        at = at == -1 || at == g ? g : -2;
      };
      for (int v : s.in) use(v);
      use(s.out);
    }
    for (int v : plan_.outputs) only_segment[static_cast<std::size_t>(root(v))] = -2;
    for (int v = 0; v < static_cast<int>(plan_.values.size()); ++v)
      buffer(v).local = root(v) == v && in_arena(v) && value(v).batched && !small(v) &&
                        only_segment[static_cast<std::size_t>(v)] >= 0;
  }

  // The buffers to free after each step: their last read, or their making when never read. A segment run by
  // sub-chunks runs all its steps for one sub-chunk before the next sub-chunk's first: a batched buffer of the chunk's
  // arena that dies inside it dies after its last step, or a value made later in the segment could be placed over
  // examples of it that a later sub-chunk has still to read. (Taking it over in place, example for example, stays
  // safe.)
  // Step i's are values[first[i], first[i + 1]), in increasing order (one list for all, not one per step).
  struct Deaths {
    std::vector<int> first, values;
  };
  Deaths deaths() const {
    std::vector<int> dies_after(plan_.values.size(), -1);  // by value: the step, or -1
    Deaths d;
    d.first.assign(plan_.steps.size() + 1, 0);
    for (int v = 0; v < static_cast<int>(plan_.values.size()); ++v) {
      if (v != root(v) || !in_arena(v)) continue;
      const int last = last_read_[static_cast<std::size_t>(v)];
      int step = last >= 0 ? last : value(v).producer;
      if (step < 0) continue;
      if (value(v).batched && !buffer(v).local && segment_of_[static_cast<std::size_t>(step)] >= 0) {
        const Plan::Segment& seg =
            plan_.segments[static_cast<std::size_t>(segment_of_[static_cast<std::size_t>(step)])];
        if (seg.by_sub_chunks) step = static_cast<int>(seg.last) - 1;
      }
      dies_after[static_cast<std::size_t>(v)] = step;
      ++d.first[static_cast<std::size_t>(step) + 1];
    }
    for (std::size_t i = 1; i < d.first.size(); ++i) d.first[i] += d.first[i - 1];
    d.values.resize(static_cast<std::size_t>(d.first.back()));
    std::vector<int> filled(d.first.begin(), d.first.end() - 1);
    for (int v = 0; v < static_cast<int>(plan_.values.size()); ++v)
      if (const int step = dies_after[static_cast<std::size_t>(v)]; step >= 0)
        d.values[static_cast<std::size_t>(filled[static_cast<std::size_t>(step)]++)] = v;
    return d;
  }

  // In place: the output takes input 0's buffer when input 0 dies here and is read exactly as the output is written
  // (same shape, dtype and batching; no other input reads it differently). Returns whether it did.
  bool take_over_input(std::size_t i, std::vector<bool>& handed_over) {
    const PlanStep& s = plan_.steps[i];
    if (!s.op->in_place) return false;
    const PlanValue& out = value(s.out);
    const PlanValue& first = value(s.in[0]);
    const int r0 = root(s.in[0]);
    const PlanValue& in0 = value(r0);
    bool same_reads = first.shape == out.shape && first.dtype == out.dtype && first.batched == out.batched;
    for (std::size_t k = 1; k < s.in.size(); ++k) {
      const PlanValue& other = value(s.in[k]);
      if (root(s.in[k]) == r0) same_reads &= other.shape == out.shape && other.batched == out.batched;
    }
    if (!same_reads || !in_arena(r0) || last_read_[static_cast<std::size_t>(r0)] != static_cast<int>(i) ||
        aligned(in0.bytes()) != aligned(out.bytes()) || in0.batched != out.batched ||
        buffer(r0).local != buffer(s.out).local)
      return false;
    buffer(s.out).offset = buffer(r0).offset;
    handed_over[static_cast<std::size_t>(r0)] = true;
    return true;
  }

  // Every arena value's offset, first fit, step by step, freeing buffers as they die; then the small values' offsets
  // past the large ones'.
  void place_buffers() {
    const Deaths dies = deaths();
    std::vector<bool> handed_over(plan_.values.size(), false);
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      if (!s.op->aliases_input && in_arena(s.out) && !take_over_input(i, handed_over))
        buffer(s.out).offset = arena_of(s.out).allocate(aligned(value(s.out).bytes()));
      for (int k = dies.first[i]; k < dies.first[i + 1]; ++k) {
        const int v = dies.values[static_cast<std::size_t>(k)];
        if (handed_over[static_cast<std::size_t>(v)] || buffer(v).offset < 0 || small(v)) continue;
        arena_of(v).release(buffer(v).offset, aligned(value(v).bytes()));
      }
    }
    for (int v = 0; v < static_cast<int>(plan_.values.size()); ++v) {
      if (v != root(v) || !in_arena(v) || buffer(v).offset < 0 || !small(v)) continue;
      buffer(v).offset += value(v).batched ? batched_.size() : fixed_.size();
    }
  }

  // Running by chunks: the reductions' partial results, per chunk, what a chunk reads and writes besides its arena,
  // and what every chunk reads of the values shared by the batch (each kernel's unbatched inputs; an elementwise
  // kernel reads them once per example, whatever the chunk, so a larger chunk saves nothing there).
  void plan_chunk_io() {
    plan_.partial_offset.assign(plan_.values.size(), -1);
    plan_.partial_bytes = plan_.chunk_io_bytes = 0;
    if (!plan_.chunkable) return;
    for (std::size_t i = plan_.chunk_begin; i < plan_.chunk_end; ++i) {
      const PlanValue& out = value(plan_.steps[i].out);
      if (out.batched) continue;
      plan_.partial_offset[static_cast<std::size_t>(plan_.steps[i].out)] = plan_.partial_bytes;
      plan_.partial_bytes = checked_add(plan_.partial_bytes, aligned(out.bytes()), "jit", "the plan's memory");
    }
    for (int v = 0; v < static_cast<int>(plan_.values.size()); ++v)
      if (value(v).batched && root(v) == v && !in_arena(v)) plan_.chunk_io_bytes += value(v).bytes();
    plan_.shared_reads.clear();
    plan_.kernel_calls_per_chunk = 0;
    for (std::size_t i = plan_.chunk_begin; i < plan_.chunk_end; ++i) {
      const PlanStep& s = plan_.steps[i];
      if (s.op->aliases_input) continue;
      plan_.kernel_calls_per_chunk += s.op->runs_functions && s.op->calls_per_run ? s.op->calls_per_run(s.attrs) : 1;
      if (s.op->elementwise) continue;
      for (int v : s.in)
        if (!value(v).batched) plan_.shared_reads.push_back(value(v).bytes());
    }
  }

  Plan& plan_;
  std::vector<int> last_read_, segment_of_;
  Arena batched_, fixed_, small_batched_, small_fixed_, local_;
};

}  // namespace

std::int64_t aligned(std::int64_t bytes) {
  return checked_add(bytes, alignment - 1, "jit", "a buffer's size") / alignment * alignment;
}

void plan_memory(Plan& plan) { MemoryPlanner(plan).run(); }
}  // namespace vt::detail
