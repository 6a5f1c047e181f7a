// The grouping pass of fused elementwise runs (autodiff/jit/fuse.hpp says what a run is): fuse_elementwise finds
// runs of consecutive elementwise steps of one shape that can run tile by tile without a tile overwriting what a later
// tile reads, merges runs of one shape across a few unrelated steps, gives the values only a run reads scratch slots,
// and marks the values of lower-triangle runs that something else reads whole.
#include <algorithm>
#include <vector>

#include "../../ops/reduce.hpp"
#include "fuse.hpp"
#include "plan.hpp"

namespace vt::detail {

using namespace fusion;

namespace {

// Longer runs are cut: the hazard check below is quadratic in a run's length.
constexpr int max_group_steps = 64;

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

// Whether run b can join run a. Each step between them runs either before the tiles (it reads nothing that a or the
// steps after the tiles make: a hyperparameter's exp, say) or after them (a contraction's scalar tail), in the plan's
// order within each. b must read nothing made after the tiles (a's sums included). Buffers: a step moved before the
// tiles shares none with what a's tiles, a's sums or the steps after the tiles write or read; the buffers b's tiles
// write overlap nothing a's tiles read or write later (safe_against), nor anything that a's sums or the steps after the
// tiles touch (they run, or are written, after b's tiles, where the plan ran them before). Values only a run's tiles
// read live in scratch slots: their buffers are never touched.
// Its lists: the steps between the runs that go before the tiles and after them (its answer), and those it keeps on the
// way, held by the caller so that trying many pairs of runs allocates once.
struct MergeLists {
  std::vector<int> before, after;
  // later_made: made after the tiles (a's sums, the steps after); touched: read or written by a's tiles, a's sums or
  // the steps after the tiles (internal values aside).
  std::vector<int> later_made, later_touched, touched, a_used, a_made;
};
bool can_merge(const Plan& plan, const Buffers& buffers, const FusedGroup& a, const FusedGroup& b,
               const std::vector<bool>& internal, MergeLists& lists) {
  auto& [before, after, later_made, later_touched, touched, a_used, a_made] = lists;
  for (std::vector<int>* list : {&before, &after, &later_made, &later_touched, &touched, &a_used, &a_made})
    list->clear();
  if (b.first - a.last > max_gap_steps || a.tiled.size() + b.tiled.size() > max_tiled_steps) return false;
  if (shape_of(plan, a) != shape_of(plan, b) || batched_of(plan, a) != batched_of(plan, b)) return false;
  if (a.has_sum && b.has_sum && a.sum_dtype != b.sum_dtype) return false;
  for (int i = a.first + 1; i < b.last; ++i)
    if (plan.starts_segment(static_cast<std::size_t>(i))) return false;
  auto has = [](const std::vector<int>& values, int v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  };
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
  // Each value once: the steps between the runs, and then b's tiles, are checked against every value of these lists.
  const auto each_once = [](std::vector<int>& values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
  };
  each_once(touched);
  for (int i = a.last; i < b.first; ++i) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    if (s.op->reduces_batch) return false;
    bool early = true;
    for (int v : s.in) early = early && !has(later_made, v) && !has(a_made, v);
    early = early && !has(a_used, s.out);
    // Its inputs may be what a's tiles read too (a hyperparameter, a captured matrix): read in either order.
    for (int u : touched) {
      early = early && buffers.disjoint(s.out, u);
      for (int v : s.in) early = early && (v == u || buffers.disjoint(v, u));
    }
    if (early) {
      before.push_back(i);
    } else {
      after.push_back(i);
      add_after(i);
    }
  }
  each_once(later_touched);
  each_once(a_used);
  for (int i : b.tiled) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    for (int v : s.in)
      if (has(later_made, v)) return false;
    // b's sums are written after the tiles, in the plan's order with those steps.
    if (!s.op->elementwise || internal[static_cast<std::size_t>(s.out)]) continue;
    for (int u : later_touched)
      if (!buffers.disjoint(s.out, u)) return false;
    for (int u : a_used)
      if (!buffers.safe_against(s.out, u)) return false;
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

// fuse_elementwise, phase by phase over one plan.
class Grouper {
 public:
  explicit Grouper(Plan& plan) : plan_(plan), buffers_(plan), symmetric_(plan) {
    // Per value: how many steps read it, and whether anything but steps reads its buffer (a result, or its alias).
    reads_.assign(plan.values.size(), 0);
    escapes_.assign(plan.values.size(), false);
    internal_.assign(plan.values.size(), false);
    tiled_reads_.assign(plan.values.size(), 0);
    for (std::size_t k = 0; k < plan.steps.size(); ++k)
      for_distinct_inputs(static_cast<int>(k), [&](int v) { ++reads_[static_cast<std::size_t>(v)]; });
    for (int v : plan.outputs) {
      escapes_[static_cast<std::size_t>(v)] = true;
      escapes_[static_cast<std::size_t>(plan.buffers[static_cast<std::size_t>(v)].root)] = true;
    }
  }

  void run() {
    plan_.fused.clear();
    plan_.fused_at.clear();
    std::vector<FusedGroup> runs = find_runs();
    for (FusedGroup& r : runs) mark_internal(r);
    for (FusedGroup& group : merge_runs(runs)) {
      if (group.tiled.size() < 2) continue;  // a lone step no run took in: its kernel runs as a plain step
      assign_slots(group);
      if (plan_.fused_at.empty()) plan_.fused_at.assign(plan_.steps.size(), -1);
      plan_.fused_at[static_cast<std::size_t>(group.first)] = static_cast<int>(plan_.fused.size());
      if (!tiny(group)) ++plan_.summary.fused_runs;
      plan_.fused.push_back(std::move(group));
    }
    mark_mirrored();
  }

 private:
  // Calls f(v) once for each value step k reads (a step reads a value twice in x * x).
  template <class F>
  void for_distinct_inputs(int k, F f) const {
    const std::vector<int>& in = plan_.steps[static_cast<std::size_t>(k)].in;
    for (auto v = in.begin(); v != in.end(); ++v)
      if (std::find(in.begin(), v, *v) == v) f(*v);
  }
  bool tiny(const FusedGroup& g) const { return numel(shape_of(plan_, g)) < min_elements; }

  // Maximal runs of steps of one shape whose outputs are safe against everything the run read or wrote before.
  std::vector<FusedGroup> find_runs() const {
    const auto n = static_cast<int>(plan_.steps.size());
    std::vector<FusedGroup> runs;
    std::vector<int> used;  // values the run reads or writes so far
    for (int i = 0; i < n;) {
      const PlanStep& head = plan_.steps[static_cast<std::size_t>(i)];
      if (!fusible(plan_, head) || plan_.views[static_cast<std::size_t>(i)].out.shape.size() > 16) {
        ++i;
        continue;
      }
      const PlanValue& hv = plan_.values[static_cast<std::size_t>(head.out)];
      used.clear();
      int j = i;
      for (; j < n && j - i < max_group_steps; ++j) {
        const PlanStep& s = plan_.steps[static_cast<std::size_t>(j)];
        // A group stays within one phase or segment of a plan run by chunks (execute.cpp).
        if (j > i && plan_.starts_segment(static_cast<std::size_t>(j))) break;
        if (!fusible(plan_, s)) break;
        const PlanValue& out = plan_.values[static_cast<std::size_t>(s.out)];
        if (out.shape != hv.shape || out.batched != hv.batched) break;
        bool safe = true;
        for (int v : s.in) used.push_back(v);
        for (int u : used) safe = safe && buffers_.safe_against(s.out, u);
        if (!safe) break;
        used.push_back(s.out);
      }
      FusedGroup group;
      group.first = i;
      // The sum writes its result after the last tile, when the run has read everything.
      if (j < n && !plan_.starts_segment(static_cast<std::size_t>(j)) &&
          ends_run(plan_, plan_.steps[static_cast<std::size_t>(j)], plan_.steps[static_cast<std::size_t>(j - 1)])) {
        group.has_sum = true;
        group.sum_dtype = plan_.values[static_cast<std::size_t>(plan_.steps[static_cast<std::size_t>(j)].out)].dtype;
        ++j;
      }
      group.last = j;
      for (int k = i; k < j; ++k) group.tiled.push_back(k);
      // A lone large step is a run too, so that a neighbouring run can take it in (it is dropped if none does).
      if (j - i >= 2 || (j - i == 1 && numel(hv.shape) >= min_elements)) runs.push_back(std::move(group));
      i = std::max(j, i + 1);
    }
    return runs;
  }

  // Values that only the tiled steps of one run read: never written to memory once they are tiled.
  void mark_internal(const FusedGroup& g) {
    for (int k : g.tiled) for_distinct_inputs(k, [&](int v) { ++tiled_reads_[static_cast<std::size_t>(v)]; });
    for (int k : g.tiled) {
      const PlanStep& s = plan_.steps[static_cast<std::size_t>(k)];
      const auto v = static_cast<std::size_t>(s.out);
      const ValueBuffer& b = plan_.buffers[v];
      internal_[v] = s.op->elementwise && b.root == s.out && !b.output_buffer && !escapes_[v] && reads_[v] > 0 &&
                     tiled_reads_[v] == reads_[v];
    }
    for (int k : g.tiled)
      for (int v : plan_.steps[static_cast<std::size_t>(k)].in) tiled_reads_[static_cast<std::size_t>(v)] = 0;
  }

  // Runs of one shape merged across the steps between them (run before or after the tiles). Runs too small to be
  // tiled (a hyperparameter's few steps) between two runs of one shape do not keep them apart.
  std::vector<FusedGroup> merge_runs(std::vector<FusedGroup>& runs) {
    std::vector<FusedGroup> groups;
    const auto skip_tiny = [&](std::size_t t, const FusedGroup& r) {
      while (t > 0 && tiny(groups[t - 1]) &&
             (shape_of(plan_, groups[t - 1]) != shape_of(plan_, r) ||
              batched_of(plan_, groups[t - 1]) != batched_of(plan_, r)))
        --t;
      return t;
    };
    // A run by the lower triangle and one that is not stay apart: joined, both would run whole.
    const auto joins = [&](std::size_t t, const FusedGroup& r) {
      return t > 0 && groups[t - 1].lower_triangle == r.lower_triangle &&
             can_merge(plan_, buffers_, groups[t - 1], r, internal_, merge_lists_);
    };
    for (FusedGroup& r : runs) {
      r.lower_triangle = by_lower_triangle(plan_, r, symmetric_);  // a merged group's, since only equals merge
      std::size_t t = skip_tiny(groups.size(), r);
      bool join = joins(t, r);
      // A lone step that cannot take r in stays a step between runs: r may still join the run before it.
      if (!join && t > 0 && groups[t - 1].tiled.size() == 1) {
        t = skip_tiny(t - 1, r);
        join = joins(t, r);
      }
      if (!join) {
        groups.push_back(std::move(r));
        continue;
      }
      groups.resize(t);
      FusedGroup& g = groups.back();
      g.before.insert(g.before.end(), merge_lists_.before.begin(), merge_lists_.before.end());
      g.after.insert(g.after.end(), merge_lists_.after.begin(), merge_lists_.after.end());
      g.tiled.insert(g.tiled.end(), r.tiled.begin(), r.tiled.end());
      if (r.has_sum) {
        g.has_sum = true;
        g.sum_dtype = r.sum_dtype;
      }
      g.last = r.last;
    }
    return groups;
  }

  // Scratch slots for the outputs that only the tiled steps read, reused once their last reader ran.
  void assign_slots(FusedGroup& group) {
    mark_internal(group);
    slot_of_.resize(plan_.values.size(), -1);
    pending_.resize(plan_.values.size(), 0);
    std::vector<int> free_slots;
    group.slot.assign(group.tiled.size(), -1);
    for (std::size_t e = 0; e < group.tiled.size(); ++e) {
      const PlanStep& s = plan_.steps[static_cast<std::size_t>(group.tiled[e])];
      const auto v = static_cast<std::size_t>(s.out);
      if (internal_[v]) {
        int slot = group.slots;
        if (free_slots.empty()) {
          ++group.slots;
        } else {
          slot = free_slots.back();
          free_slots.pop_back();
        }
        group.slot[e] = slot_of_[v] = slot;
        pending_[v] = reads_[v];
      }
      for_distinct_inputs(group.tiled[e], [&](int u) {
        if (slot_of_[static_cast<std::size_t>(u)] >= 0 && --pending_[static_cast<std::size_t>(u)] == 0) {
          free_slots.push_back(slot_of_[static_cast<std::size_t>(u)]);
          slot_of_[static_cast<std::size_t>(u)] = -1;
        }
      });
    }
    group.slot_bytes = static_cast<std::size_t>(group.lower_triangle ? piece_elements : tile_elements) * sizeof(double);
  }

  // The values that runs by their lower triangle write: mirrored above the diagonal where something else reads them
  // (a step other than such a run's tiled ones, one that reads only the lower triangle, OpDef::lower_triangle_inputs,
  // or a handle), or they are results.
  void mark_mirrored() {
    std::vector<bool> whole(plan_.values.size(), false), lower_tiled(plan_.steps.size(), false);
    for (const FusedGroup& g : plan_.fused)
      if (g.lower_triangle)
        for (int k : g.tiled) lower_tiled[static_cast<std::size_t>(k)] = true;
    const auto read_whole = [&](int v) {
      whole[static_cast<std::size_t>(v)] = true;
      whole[static_cast<std::size_t>(plan_.buffers[static_cast<std::size_t>(v)].root)] = true;
    };
    for (int v : plan_.outputs) read_whole(v);
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      if (lower_tiled[i]) continue;
      for (std::size_t k = 0; k < s.in.size(); ++k)
        if (!reads_lower_triangle_only(s, k)) read_whole(s.in[k]);
    }
    for (FusedGroup& g : plan_.fused) {
      if (!g.lower_triangle) continue;
      g.mirrored.assign(g.tiled.size(), false);
      for (std::size_t e = 0; e < g.tiled.size(); ++e) {
        const PlanStep& s = plan_.steps[static_cast<std::size_t>(g.tiled[e])];
        g.mirrored[e] = s.op->elementwise && g.slot[e] < 0 && whole[static_cast<std::size_t>(s.out)];
      }
    }
  }

  Plan& plan_;
  Buffers buffers_;
  Symmetry symmetric_;
  std::vector<int> reads_, tiled_reads_, slot_of_, pending_;
  std::vector<bool> escapes_, internal_;
  MergeLists merge_lists_;  // can_merge's
};

}  // namespace

void fuse_elementwise(Plan& plan) { Grouper(plan).run(); }

}  // namespace vt::detail
