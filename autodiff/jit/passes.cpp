// The passes that tidy and order a plan (plan.hpp): broadcasts read in place, common steps merged, dead steps
// dropped, steps on constants folded, steps ordered to run by chunks; and what every pass shares (rewrite.hpp). The
// rewrites of products and solves are in products.cpp, those that rest on symmetry in symmetry.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/backend.hpp"
#include "../../ops/cholesky.hpp"
#include "../../ops/elementwise.hpp"
#include "../../ops/gather.hpp"
#include "../../ops/indexing.hpp"
#include "../../ops/layout.hpp"
#include "../../ops/matmul.hpp"
#include "../../ops/reduce.hpp"
#include "rewrite.hpp"

namespace vt::detail {

int add_value(PlanIR& plan, const Operand& t) {
  plan.values.emplace_back(PlanValue::Kind::computed, t.dtype, t.shape, t.batched);
  return static_cast<int>(plan.values.size()) - 1;
}

void renumber_producers(PlanIR& plan) {
  for (std::size_t k = 0; k < plan.steps.size(); ++k)
    plan.values[static_cast<std::size_t>(plan.steps[k].out)].producer = static_cast<int>(k);
}

std::vector<int> reader_counts(const PlanIR& plan) {
  std::vector<int> readers(plan.values.size(), 0);
  for (const PlanStep& s : plan.steps)
    for (int v : s.in) ++readers[static_cast<std::size_t>(v)];
  for (int v : plan.outputs) ++readers[static_cast<std::size_t>(v)];
  return readers;
}

const PlanStep* producer(const PlanIR& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (pv.kind != PlanValue::Kind::computed || pv.producer < 0) return nullptr;
  return &plan.steps[static_cast<std::size_t>(pv.producer)];
}

std::vector<bool> constant_only(const PlanIR& plan) {
  std::vector<bool> fixed(plan.values.size(), false);
  for (std::size_t v = 0; v < plan.values.size(); ++v)
    fixed[v] = plan.values[v].kind == PlanValue::Kind::constant || plan.values[v].kind == PlanValue::Kind::folded;
  for (const PlanStep& s : plan.steps) {
    bool all = true;
    for (int v : s.in) all = all && fixed[static_cast<std::size_t>(v)];
    fixed[static_cast<std::size_t>(s.out)] = all;
  }
  return fixed;
}

// op(..., broadcast_to(x, S), ...) -> op(..., x, ...) for an elementwise op, whose kernel broadcasts its operands
// itself, where the step's output keeps its type (S is then still the broadcast of the operands' shapes): the same
// values, read where they are instead of from a copy of S's size, and broadcast_to, when nothing else reads it, is a
// dead step (a per-example number spread over a gradient's rows, in every vmap of value_and_grad). Bitwise.
void fold_broadcasts_into_elementwise(PlanIR& plan) {
  for (PlanStep& s : plan.steps) {
    if (!s.op->elementwise) continue;
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      const PlanStep* broadcast = producer(plan, s.in[k], broadcast_op);
      if (!broadcast) continue;
      std::vector<Operand> operands;
      for (std::size_t j = 0; j < s.in.size(); ++j)
        operands.push_back(plan.values[static_cast<std::size_t>(j == k ? broadcast->in[0] : s.in[j])].operand());
      const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
      try {
        const Operand folded = infer_output(*s.op, operands, s.attrs);
        if (folded.dtype != out.dtype || folded.shape != out.shape || folded.batched != out.batched) continue;
      } catch (const Error&) {
        continue;
      }
      s.in[k] = broadcast->in[0];
      count_rewrite(plan);
    }
  }
}

// The trace merges equal steps as it records them (plan.cpp's Builder). This finds the ones it cannot see: captured
// constants of a few elements with the same bits are one value (a model's several -0.5s), so the steps that read them
// may be equal; and the passes above rewrite steps into equal ones (a moved scaling leaves K_bar * k twice). A step
// equal to an earlier one (op, attributes, inputs so merged) is read as that one; eliminate_dead_steps drops it. A
// collective keeps its step (processes run equally many, whatever their constants hold), and so does a result (its
// readers read the earlier step's value; PlanSummary::merged does not count it).
void merge_common_steps(PlanIR& plan) {
  // Each small constant's bits are read once (copied from a device once), keyed with its type: linear in their number.
  constexpr std::int64_t most_compared = 16;
  std::vector<int> same(plan.values.size());
  std::unordered_map<std::string, int> constants;
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    same[v] = static_cast<int>(v);
    const PlanValue& pv = plan.values[v];
    if (pv.kind != PlanValue::Kind::constant || pv.batched || numel(pv.shape) > most_compared) continue;
    std::string bits(static_cast<std::size_t>(numel(pv.shape)) * size_of(pv.dtype), '\0');
    if (bits.empty())
      ;  // no bits to read: its dtype and shape are the key
    else if (pv.constant.device() == Device::cpu()) std::memcpy(bits.data(), pv.constant.raw_data(), bits.size());
    else backend_for(pv.constant.device()).to_host(bits.data(), pv.constant.raw_data(), bits.size());
    const std::string key = fmt::format("{}|{}|{}|", static_cast<int>(pv.dtype), fmt::join(pv.shape, ","),
                                        to_string(pv.constant.device())) +
                            bits;
    const auto [it, first] = constants.emplace(key, static_cast<int>(v));
    if (first) continue;
    same[v] = it->second;
    ++plan.summary.merged;
  }
  std::vector<bool> result(plan.values.size(), false);
  for (int v : plan.outputs) result[static_cast<std::size_t>(v)] = true;
  CommonSteps made;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep& s = plan.steps[i];
    bool reads_merged = false;
    for (int& v : s.in) {
      reads_merged |= v != same[static_cast<std::size_t>(v)];
      v = same[static_cast<std::size_t>(v)];
    }
    if (reads_merged) count_rewrite(plan);
    if (s.op->collective) continue;
    const int earlier = made.find_or_add(plan.steps, static_cast<int>(i));
    if (earlier < 0) continue;
    same[static_cast<std::size_t>(s.out)] = plan.steps[static_cast<std::size_t>(earlier)].out;
    if (!result[static_cast<std::size_t>(s.out)]) ++plan.summary.merged;
  }
}

// Keeps the steps the outputs need, renumbering producers.
void eliminate_dead_steps(PlanIR& plan) {
  std::vector<bool> live(plan.values.size(), false);
  for (int v : plan.outputs) live[static_cast<std::size_t>(v)] = true;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    const PlanStep& s = plan.steps[i];
    if (!live[static_cast<std::size_t>(s.out)]) continue;
    for (int v : s.in) live[static_cast<std::size_t>(v)] = true;
  }
  std::vector<PlanStep> kept;
  for (PlanStep& s : plan.steps) {
    if (!live[static_cast<std::size_t>(s.out)]) {
      plan.values[static_cast<std::size_t>(s.out)].producer = -1;  // no step makes it any more
      continue;
    }
    plan.values[static_cast<std::size_t>(s.out)].producer = static_cast<int>(kept.size());
    kept.push_back(std::move(s));
  }
  plan.steps = std::move(kept);
}

// Steps whose inputs are all constants (or folded values) move to plan.folds, their outputs
// becoming folded values: computed on the plan's first run and kept, never per call, never while
// tracing. Run after the other passes (a reassociated chain may make new products of constants)
// and before the memory plan, which leaves folded values out of the arena.
void fold_constants(PlanIR& plan) {
  const std::vector<bool> fixed = constant_only(plan);
  std::vector<PlanStep> kept;
  for (PlanStep& s : plan.steps) {
    PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    if (fixed[static_cast<std::size_t>(s.out)]) {
      out.kind = PlanValue::Kind::folded;
      out.producer = static_cast<int>(plan.folds.size());
      plan.folds.push_back(std::move(s));
    } else {
      out.producer = static_cast<int>(kept.size());
      kept.push_back(std::move(s));
    }
  }
  plan.steps = std::move(kept);
}

// Steps fall in four phases: S, unbatched and depending on no batched value (run once, first); E,
// batched, and R, reductions over the batch of E values (run per chunk of examples; an R writes a
// partial result); A, unbatched and reading an R or A value (run once, last, on the combined
// results). Stable-partitioned into S | E R | A, which keeps every step after its inputs. A batched
// step or a reduction that reads an R or A value needs the whole batch's reduction first: such a
// plan runs whole-batch, as does one with a fixed batch size (as_batch and unbatch of a plain
// argument alias the whole batch).
void order_for_chunks(Plan& plan) {
  plan.chunkable = false;
  plan.chunk_begin = plan.chunk_end = 0;
  if (plan.fixed_batch >= 0) return;
  enum class Phase : unsigned char { S, E, R, A };
  std::vector<Phase> phase(plan.values.size(), Phase::S);
  for (std::size_t v = 0; v < plan.values.size(); ++v)
    if (plan.values[v].batched) phase[v] = Phase::E;  // batched arguments and constants
  std::vector<Phase> step_phase;
  std::size_t per_chunk = 0;
  for (const PlanStep& s : plan.steps) {
    bool batched_in = false, reduced_in = false;
    for (int v : s.in) {
      const Phase p = phase[static_cast<std::size_t>(v)];
      batched_in |= p == Phase::E;
      reduced_in |= p == Phase::R || p == Phase::A;
    }
    Phase p;
    if (plan.values[static_cast<std::size_t>(s.out)].batched) {
      if (reduced_in) return;
      p = Phase::E;
    } else if (s.op->reduces_batch) {
      if (reduced_in || !batched_in) return;
      p = Phase::R;
    } else {
      if (batched_in) return;  // an unbatched alias of a batched value
      p = reduced_in ? Phase::A : Phase::S;
    }
    phase[static_cast<std::size_t>(s.out)] = p;
    step_phase.push_back(p);
    per_chunk += p == Phase::E || p == Phase::R ? 1 : 0;
  }
  if (per_chunk == 0) return;
  std::vector<PlanStep> ordered;
  ordered.reserve(plan.steps.size());
  const auto take = [&](auto in_phase) {
    for (std::size_t i = 0; i < plan.steps.size(); ++i)
      if (in_phase(step_phase[i])) {
        plan.values[static_cast<std::size_t>(plan.steps[i].out)].producer = static_cast<int>(ordered.size());
        ordered.push_back(std::move(plan.steps[i]));
      }
  };
  take([](Phase p) { return p == Phase::S; });
  plan.chunk_begin = ordered.size();
  take([](Phase p) { return p == Phase::E || p == Phase::R; });
  plan.chunk_end = ordered.size();
  take([](Phase p) { return p == Phase::A; });
  plan.steps = std::move(ordered);
  plan.chunkable = true;
}

}  // namespace vt::detail
