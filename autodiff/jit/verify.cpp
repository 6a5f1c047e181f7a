// What every pass must leave right (plan.hpp, verify_plan), checked from the plan alone, so that a pass that breaks
// a producer, a type, a mark or a buffer fails where it ran, naming itself, instead of in a later pass or a wrong
// result.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../ops/cholesky.hpp"
#include "../../ops/matmul.hpp"
#include "../../ops/reduce.hpp"
#include "fuse.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

class Verifier {
 public:
  Verifier(const Plan& plan, std::string_view after) : plan_(plan), after_(after) {}

  void run() {
    producers();
    order(plan_.folds, "fold");
    order(plan_.steps, "step");
    for (int v : plan_.outputs) {
      if (!valid(v)) wrong("a result is %{}, which is not a value", v);
      const PlanValue& pv = value(v);
      if (pv.kind == PlanValue::Kind::computed && pv.producer < 0) wrong("the result %{} has no producer", v);
    }
    types(plan_.folds, "fold");
    types(plan_.steps, "step");
    marks();
    memory();
    fused();
  }

 private:
  template <class... Args>
  [[noreturn]] void wrong(fmt::format_string<Args...> format, Args&&... args) const {
    throw std::logic_error(fmt::format("vtape: jit: the plan is wrong after the pass {}: {}", after_,
                                       fmt::format(format, std::forward<Args>(args)...)));
  }

  bool valid(int v) const { return v >= 0 && static_cast<std::size_t>(v) < plan_.values.size(); }
  const PlanValue& value(int v) const { return plan_.values[static_cast<std::size_t>(v)]; }
  int root(int v) const { return plan_.buffers[static_cast<std::size_t>(v)].root; }

  // Each step's and fold's output is a value of its kind whose producer is that step, and each such value's producer
  // makes it.
  void producers() const {
    const auto check = [&](const std::vector<PlanStep>& steps, PlanValue::Kind kind, const char* what) {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const int out = steps[i].out;
        if (!valid(out)) wrong("{} {} writes %{}, which is not a value", what, i, out);
        if (value(out).kind != kind || value(out).producer != static_cast<int>(i))
          wrong("{} {} makes %{}, whose producer is {} (of kind {})", what, i, out, value(out).producer,
                static_cast<int>(value(out).kind));
      }
    };
    check(plan_.steps, PlanValue::Kind::computed, "step");
    check(plan_.folds, PlanValue::Kind::folded, "fold");
    for (std::size_t v = 0; v < plan_.values.size(); ++v) {
      const PlanValue& pv = plan_.values[v];
      const std::vector<PlanStep>* steps = pv.kind == PlanValue::Kind::computed ? &plan_.steps
                                           : pv.kind == PlanValue::Kind::folded ? &plan_.folds
                                                                                : nullptr;
      if (!steps || pv.producer < 0) continue;
      if (static_cast<std::size_t>(pv.producer) >= steps->size() ||
          (*steps)[static_cast<std::size_t>(pv.producer)].out != static_cast<int>(v))
        wrong("%{} names step {} as its producer, which does not make it", v, pv.producer);
    }
  }

  // No step reads a value before its producer runs: folds run first, in order, then the steps in order.
  void order(const std::vector<PlanStep>& steps, const char* what) const {
    const bool folds = &steps == &plan_.folds;
    for (std::size_t i = 0; i < steps.size(); ++i)
      for (int v : steps[i].in) {
        if (!valid(v)) wrong("{} {} reads %{}, which is not a value", what, i, v);
        const PlanValue& pv = value(v);
        const bool ready = pv.kind == PlanValue::Kind::input      ? !folds
                           : pv.kind == PlanValue::Kind::constant ? true
                           : pv.kind == PlanValue::Kind::folded
                               ? !folds || pv.producer < static_cast<int>(i)
                               : !folds && pv.producer >= 0 && pv.producer < static_cast<int>(i);
        if (!ready) wrong("{} {} reads %{} before anything makes it", what, i, v);
      }
  }

  // Each output's type and batching are what the op's shape rule gives for its inputs (ops outside apply's batching
  // rule, as_batch and unbatch of a traced tensor, by type only).
  void types(const std::vector<PlanStep>& steps, const char* what) const {
    std::vector<Operand> in;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const PlanStep& s = steps[i];
      if (!s.op->infer) continue;
      in.clear();
      for (int v : s.in) in.push_back(value(v).operand());
      Operand out;
      try {
        out = infer_output(*s.op, in, s.attrs);
      } catch (const std::exception& e) {
        wrong("{} {} ({}) is refused by its shape rule: {}", what, i, s.op->name, e.what());
      }
      const PlanValue& pv = value(s.out);
      if (out.dtype != pv.dtype || out.shape != pv.shape || (!s.op->reapply && out.batched != pv.batched))
        wrong("{} {} ({}) makes %{} of type {}{}[{}], where its shape rule gives {}{}[{}]", what, i, s.op->name, s.out,
              pv.batched ? "B " : "", name_of(pv.dtype), fmt::join(pv.shape, ","), out.batched ? "B " : "",
              name_of(out.dtype), fmt::join(out.shape, ","));
    }
  }

  // A product marked symmetric is square, op(a) the transpose's shape of op(b); a triangle left unwritten is one that
  // nothing reads.
  void marks() const {
    const std::vector<bool> whole = values_read_whole(plan_);
    const auto check = [&](const std::vector<PlanStep>& steps, const char* what) {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const PlanStep& s = steps[i];
        bool lower_only = false;
        if (s.op == &matmul_op || s.op == &matmul_add_diagonal_op) {
          lower_only = matmul_lower_only(s.attrs);
          if (lower_only && !matmul_symmetric(s.attrs)) wrong("{} {} is lower_only but not symmetric", what, i);
          if (matmul_symmetric(s.attrs)) symmetric_shapes(s, what, i);
        } else if (is_cholesky_factorization(*s.op)) {
          lower_only = factor_lower_only(s.attrs);
        }
        if (lower_only && whole[static_cast<std::size_t>(s.out)])
          wrong("{} {} ({}) leaves %{}'s upper triangle unwritten, but a reader or a result reads it whole", what, i,
                s.op->name, s.out);
      }
    };
    check(plan_.folds, "fold");
    check(plan_.steps, "step");
  }

  void symmetric_shapes(const PlanStep& s, const char* what, std::size_t i) const {
    const Shape &a = value(s.in[0]).shape, &b = value(s.in[1]).shape, &out = value(s.out).shape;
    const MatmulTransposes t = matmul_transposes(s.attrs);
    const bool square = out.size() >= 2 && out[out.size() - 1] == out[out.size() - 2];
    const auto rows = [](const Shape& x, bool transposed) { return x[x.size() - (transposed ? 1 : 2)]; };
    const auto cols = [](const Shape& x, bool transposed) { return x[x.size() - (transposed ? 2 : 1)]; };
    if (!square || a.size() < 2 || b.size() < 2 || rows(a, t.a) != cols(b, t.b) || cols(a, t.a) != rows(b, t.b))
      wrong("{} {} is marked symmetric, but multiplies [{}] by [{}] into [{}]", what, i, fmt::join(a, ","),
            fmt::join(b, ","), fmt::join(out, ","));
  }

  struct Buffer {
    int value;
    int arena;  // 0 batched, 1 fixed, 2 sub-chunk
    std::int64_t begin, end;
    int first, last;  // the steps between which it is alive
    int last_read;    // its last reader (or maker): a step that may take the buffer over in place
  };

  // Once plan_memory has run: roots consistent, every arena buffer inside its arena, buffers alive at one step
  // disjoint (an in-place step's output may take the buffer of the input 0 that dies there).
  void memory() const {
    if (!plan_.memory_planned) return;
    if (plan_.buffers.size() != plan_.values.size())
      wrong("{} buffers for {} values", plan_.buffers.size(), plan_.values.size());
    for (std::size_t v = 0; v < plan_.values.size(); ++v) {
      const int r = plan_.buffers[v].root;
      if (!valid(r) || root(r) != r) wrong("%{}'s root %{} is not a root", v, r);
    }
    for (const PlanStep& s : plan_.steps) {
      const int expected = s.op->aliases_input ? root(s.in[0]) : s.out;
      if (root(s.out) != expected)
        wrong("%{} ({}) has the root %{}, not %{}", s.out, s.op->name, root(s.out), expected);
    }
    const std::vector<Buffer> buffers = arena_buffers();  // by the step that makes them
    // Buffers handed over in place, step after step, are one: by buffer, the first of its chain. A buffer is handed
    // over at the step that reads it last, which makes the next.
    std::unordered_map<int, std::vector<std::size_t>> by_last_read;
    for (std::size_t x = 0; x < buffers.size(); ++x) by_last_read[buffers[x].last_read].push_back(x);
    std::vector<std::size_t> chain(buffers.size());
    for (std::size_t y = 0; y < buffers.size(); ++y) {
      chain[y] = y;
      if (const auto it = by_last_read.find(buffers[y].first); it != by_last_read.end())
        for (std::size_t x : it->second)
          if (x < y && handed_over(buffers[x], buffers[y])) chain[y] = chain[x];
    }
    // In order of their first steps, each buffer against those still alive then: a plan of many steps keeps few
    // alive at once.
    std::vector<std::size_t> alive;
    for (std::size_t y = 0; y < buffers.size(); ++y) {
      const Buffer& b = buffers[y];
      std::erase_if(alive, [&](std::size_t x) { return buffers[x].last < b.first; });
      for (std::size_t x : alive) {
        const Buffer& a = buffers[x];
        if (a.arena != b.arena || a.end <= b.begin || b.end <= a.begin || chain[x] == chain[y]) continue;
        wrong(
            "%{} and %{} share bytes of an arena ([{}, {}) and [{}, {})) while both are alive (steps {}-{} and {}-{})",
            a.value, b.value, a.begin, a.end, b.begin, b.end, a.first, a.last, b.first, b.last);
      }
      alive.push_back(y);
    }
  }

  // Once fuse_elementwise has run: each run inside the steps and inside one phase or segment, after the one before it;
  // its steps before, tiled and after exactly [first, last), each list in plan order; run in that order (before, the
  // tiles, after), every step reading only what is made before it; the tiled steps elementwise steps of the run's one
  // shape, or sums; a scratch slot's value read by later tiled steps of its run only; its memory (fused_hazards).
  void fused() const {
    if (plan_.fused.empty()) return;
    if (plan_.fused_at.size() != plan_.steps.size())
      wrong("{} fused_at entries for {} steps", plan_.fused_at.size(), plan_.steps.size());
    std::vector<std::vector<int>> readers(plan_.values.size());
    for (std::size_t i = 0; i < plan_.steps.size(); ++i)
      for (int v : plan_.steps[i].in) readers[static_cast<std::size_t>(v)].push_back(static_cast<int>(i));
    std::vector<bool> result(plan_.values.size(), false);
    for (int v : plan_.outputs) result[static_cast<std::size_t>(v)] = true;
    std::optional<fusion::Buffers> buffers;
    if (plan_.memory_planned) buffers.emplace(plan_);
    int end_of_last = 0;
    for (std::size_t g = 0; g < plan_.fused.size(); ++g) {
      const FusedGroup& run = plan_.fused[g];
      if (run.first < end_of_last || run.first >= run.last || static_cast<std::size_t>(run.last) > plan_.steps.size())
        wrong("fused run {} covers steps [{}, {}), not after the run before it and inside the plan", g, run.first,
              run.last);
      end_of_last = run.last;
      if (plan_.fused_at[static_cast<std::size_t>(run.first)] != static_cast<int>(g))
        wrong("fused run {} starts at step {}, whose fused_at is {}", g, run.first,
              plan_.fused_at[static_cast<std::size_t>(run.first)]);
      for (int i = run.first + 1; i < run.last; ++i)
        if (plan_.starts_segment(static_cast<std::size_t>(i)))
          wrong("fused run {} crosses the start of a phase or segment at step {}", g, i);
      fused_order(g, run);
      fused_tiles(g, run, readers, result);
      if (buffers) fused_hazards(g, run, *buffers);
    }
  }

  // A step's read or write of a value's bytes in a fused run, and when the run makes it: phase 0 the steps before the
  // tiles, 1 the tiles (every tiled step on one tile before the next tile), 2 the sums' results and the steps after
  // the tiles; phases 0 and 2 in plan order.
  struct Access {
    int value, step, phase;
    bool write;
  };

  // Once plan_memory has run: the run's accesses that it makes in another order than the plan's (a step moved before
  // or after the tiles, a sum's result written after them) meet no other's bytes, and every two values that the tiles
  // read and write, one written, are in the same elements of one buffer or share no byte (Buffers::safe_against), so
  // that a tile never overwrites what a later tile reads. Values in scratch slots never reach memory; an aliasing step
  // (a reshape) reads and writes no bytes, while a reader of its output reads its input's.
  void fused_hazards(std::size_t g, const FusedGroup& run, const fusion::Buffers& buffers) const {
    // The run's values in scratch slots (a run holds a few dozen steps: a list, not a flag per plan value).
    std::vector<int> slotted;
    for (std::size_t e = 0; e < run.tiled.size(); ++e)
      if (run.slot[e] >= 0) slotted.push_back(plan_.steps[static_cast<std::size_t>(run.tiled[e])].out);
    const auto in_slot = [&](int v) { return std::find(slotted.begin(), slotted.end(), v) != slotted.end(); };
    std::vector<Access> accesses;
    const auto add = [&](int i, int reads, int writes) {
      const PlanStep& s = plan_.steps[static_cast<std::size_t>(i)];
      if (s.op->aliases_input) return;
      for (int v : s.in)
        if (!in_slot(v)) accesses.push_back({v, i, reads, false});
      if (!in_slot(s.out)) accesses.push_back({s.out, i, writes, true});
    };
    for (int i : run.before) add(i, 0, 0);
    for (int i : run.tiled) add(i, 1, plan_.steps[static_cast<std::size_t>(i)].op->elementwise ? 1 : 2);
    for (int i : run.after) add(i, 2, 2);
    for (const Access& x : accesses) {
      if (!x.write) continue;
      for (const Access& y : accesses) {
        if (&x == &y || (x.value == y.value && y.write)) continue;
        if (x.phase == 1 && y.phase == 1) {
          if (x.value != y.value && !buffers.safe_against(x.value, y.value))
            wrong(
                "fused run {}'s tiles write %{} (step {}) and {} %{} (step {}) in bytes that overlap, not as the same "
                "elements",
                g, x.value, x.step, y.write ? "write" : "read", y.value, y.step);
          continue;
        }
        if (x.step == y.step) continue;
        const bool plan_first = x.step < y.step;
        const bool run_first = x.phase != y.phase ? x.phase < y.phase : x.step < y.step;
        if (plan_first == run_first) continue;
        if (x.value == y.value)
          wrong("fused run {} runs step {}, which reads %{}, before step {} writes it", g, y.step, x.value, x.step);
        if (!buffers.disjoint(x.value, y.value)) {
          const Access& early = plan_first ? x : y;
          const Access& late = plan_first ? y : x;
          wrong("fused run {} runs steps {} and {} in the other order than the plan's, but %{} and %{} share bytes", g,
                early.step, late.step, early.value, late.value);
        }
      }
    }
  }

  void fused_order(std::size_t g, const FusedGroup& run) const {
    std::vector<int> order(run.before);
    order.insert(order.end(), run.tiled.begin(), run.tiled.end());
    order.insert(order.end(), run.after.begin(), run.after.end());
    for (const std::vector<int>* list : {&run.before, &run.tiled, &run.after})
      if (!std::is_sorted(list->begin(), list->end()))
        wrong("fused run {} lists steps out of plan order: [{}]", g, fmt::join(*list, ","));
    std::vector<int> covered(order);
    std::sort(covered.begin(), covered.end());
    bool exact = covered.size() == static_cast<std::size_t>(run.last - run.first);
    for (std::size_t k = 0; exact && k < covered.size(); ++k) exact = covered[k] == run.first + static_cast<int>(k);
    if (!exact)
      wrong("fused run {}'s steps before, tiled and after are not exactly steps [{}, {})", g, run.first, run.last);
    std::vector<int> position(static_cast<std::size_t>(run.last - run.first));
    for (std::size_t k = 0; k < order.size(); ++k)
      position[static_cast<std::size_t>(order[k] - run.first)] = static_cast<int>(k);
    for (std::size_t k = 0; k < order.size(); ++k)
      for (int v : plan_.steps[static_cast<std::size_t>(order[k])].in) {
        const PlanValue& pv = value(v);
        if (pv.kind != PlanValue::Kind::computed || pv.producer < run.first || pv.producer >= run.last) continue;
        if (position[static_cast<std::size_t>(pv.producer - run.first)] > static_cast<int>(k))
          wrong("fused run {} runs step {} before step {}, which makes its input %{}", g, order[k], pv.producer, v);
      }
  }

  void fused_tiles(std::size_t g, const FusedGroup& run, const std::vector<std::vector<int>>& readers,
                   const std::vector<bool>& result) const {
    if (run.slot.size() != run.tiled.size())
      wrong("fused run {} has {} slots for {} tiled steps", g, run.slot.size(), run.tiled.size());
    if (run.lower_triangle && run.mirrored.size() != run.tiled.size())
      wrong("fused run {} marks {} mirrored outputs for {} tiled steps", g, run.mirrored.size(), run.tiled.size());
    const PlanValue& first = value(plan_.steps[static_cast<std::size_t>(run.tiled.front())].out);
    for (std::size_t e = 0; e < run.tiled.size(); ++e) {
      const PlanStep& s = plan_.steps[static_cast<std::size_t>(run.tiled[e])];
      const PlanValue& out = value(s.out);
      if (s.op->elementwise ? out.shape != first.shape || out.batched != first.batched
                            : s.op != &sum_op || numel(out.shape) != 1)
        wrong("fused run {} tiles step {} ({}), neither an elementwise step of the run's shape nor a sum", g,
              run.tiled[e], s.op->name);
      const int slot = run.slot[e];
      if (slot < -1 || slot >= run.slots)
        wrong("fused run {} puts step {} in slot {} of {}", g, run.tiled[e], slot, run.slots);
      if (slot < 0) continue;
      const auto later_tiled = [&](int reader) {
        return std::find(run.tiled.begin() + static_cast<std::ptrdiff_t>(e) + 1, run.tiled.end(), reader) !=
               run.tiled.end();
      };
      const std::vector<int>& read_by = readers[static_cast<std::size_t>(s.out)];
      if (result[static_cast<std::size_t>(s.out)] || !std::all_of(read_by.begin(), read_by.end(), later_tiled))
        wrong("fused run {} keeps %{} in a scratch slot, but a result or a step outside its later tiles reads it", g,
              s.out);
    }
  }

  // b's step takes over a's buffer in place: a dies at that step, its input 0.
  bool handed_over(const Buffer& a, const Buffer& b) const {
    // Under sub-chunks too: the step writes each example over the one it reads.
    if (a.last_read != b.first || a.begin != b.begin) return false;
    const PlanStep& s = plan_.steps[static_cast<std::size_t>(b.first)];
    return s.op->in_place && root(s.in[0]) == a.value;
  }

  std::vector<Buffer> arena_buffers() const {
    std::vector<int> last(plan_.values.size(), -1);
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      for (std::size_t k = 0; k < s.in.size(); ++k)
        if (!(s.op->handle_inputs >> k & 1u) || s.op->aliases_input)
          last[static_cast<std::size_t>(root(s.in[k]))] = static_cast<int>(i);
    }
    std::vector<Buffer> buffers;
    for (std::size_t v = 0; v < plan_.values.size(); ++v) {
      const PlanValue& pv = plan_.values[v];
      const ValueBuffer& b = plan_.buffers[v];
      if (b.root != static_cast<int>(v) || pv.kind != PlanValue::Kind::computed || b.output_buffer || pv.producer < 0)
        continue;
      const std::int64_t bytes = aligned(pv.bytes());
      const int arena = b.local ? 2 : pv.batched ? 0 : 1;
      const std::int64_t size = arena == 2 ? plan_.arena_local : arena == 0 ? plan_.arena_batched : plan_.arena_fixed;
      if (b.offset < 0 || b.offset + bytes > size)
        wrong("%{} lies at [{}, {}), outside its arena of {} bytes", v, b.offset, b.offset + bytes, size);
      const int read = std::max(last[v], pv.producer);
      int end = read;
      // A segment run by sub-chunks runs all its steps for one sub-chunk before the next: a chunk-arena buffer that
      // dies inside it lives to its end.
      for (const Plan::Segment& seg : plan_.segments)
        if (pv.batched && !b.local && seg.by_sub_chunks && static_cast<std::size_t>(end) >= seg.first &&
            static_cast<std::size_t>(end) < seg.last)
          end = static_cast<int>(seg.last) - 1;
      buffers.push_back({static_cast<int>(v), arena, b.offset, b.offset + bytes, pv.producer, end, read});
    }
    std::sort(buffers.begin(), buffers.end(), [](const Buffer& a, const Buffer& b) { return a.first < b.first; });
    return buffers;
  }

  const Plan& plan_;
  std::string_view after_;
};

}  // namespace

void verify_plan(const Plan& plan, std::string_view after) {
  if (plan.runs_op_by_op.empty()) Verifier(plan, after).run();
}

bool verify_after_passes() {
#ifndef NDEBUG
  return true;
#else
  const char* env = std::getenv("VTAPE_JIT_VERIFY");
  return env && *env && std::string_view(env) != "0";
#endif
}

}  // namespace vt::detail
