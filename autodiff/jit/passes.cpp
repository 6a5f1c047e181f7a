// Rewrites of a built plan, each keeping its results (up to rounding): apart from the builder so
// that a pass can be added or dropped on its own. build_plan runs them before the memory plan,
// which must see the final steps.
#include <vector>

#include "../../ops/matmul.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

std::vector<int> reader_counts(const Plan& plan) {
  std::vector<int> readers(plan.values.size(), 0);
  for (const PlanStep& s : plan.steps)
    for (int v : s.in) ++readers[static_cast<std::size_t>(v)];
  for (int v : plan.outputs) ++readers[static_cast<std::size_t>(v)];
  return readers;
}

// Whether each value depends on constants only (a constant, or made by a step whose inputs all do):
// what fold_constants computes once per plan.
std::vector<bool> constant_only(const Plan& plan) {
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

bool is_plain_matmul(const Plan& plan, const PlanStep& s) {
  if (s.op != &matmul_op) return false;
  for (int v : s.in)
    if (plan.values[static_cast<std::size_t>(v)].shape.size() != 2) return false;
  return true;
}

}  // namespace

// (P Q) Y -> P (Q Y) and X (Q R) -> (X Q) R when that needs fewer flops by half: the
// cotangents of solves are low-rank products, never worth forming as n x n matrices.
// A product of constants is left alone: fold_constants computes it once per plan.
void reassociate_matmuls(Plan& plan) {
  const std::vector<int> readers = reader_counts(plan);
  const std::vector<bool> fixed = constant_only(plan);
  std::vector<PlanStep> steps;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep s = plan.steps[i];
    for (int side = 0; side < 2 && is_plain_matmul(plan, s); ++side) {
      const int inner = s.in[static_cast<std::size_t>(side)];
      const PlanValue& iv = plan.values[static_cast<std::size_t>(inner)];
      if (iv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(inner)] != 1 ||
          (static_cast<std::size_t>(inner) < fixed.size() && fixed[static_cast<std::size_t>(inner)]))
        continue;
      const PlanStep m1 = steps[static_cast<std::size_t>(iv.producer)];  // producers index the new list
      if (!is_plain_matmul(plan, m1)) continue;
      const int other = s.in[static_cast<std::size_t>(1 - side)];
      const Shape& p = plan.values[static_cast<std::size_t>(m1.in[0])].shape;
      const Shape& q = plan.values[static_cast<std::size_t>(m1.in[1])].shape;
      const Shape& y = plan.values[static_cast<std::size_t>(other)].shape;
      // side 0: (P Q) Y with P [a, k], Q [k, b], Y [b, c]; side 1: Y (P Q) with Y [c, a].
      const double a = static_cast<double>(p[0]), k = static_cast<double>(p[1]), b = static_cast<double>(q[1]);
      const double c = static_cast<double>(side == 0 ? y[1] : y[0]);
      const double before = a * k * b + (side == 0 ? a * b * c : c * a * b);
      const double after = side == 0 ? k * b * c + a * k * c : c * a * k + c * k * b;
      if (after * 2 > before) continue;
      // The new inner product, then the outer one in its place.
      std::vector<int> first = side == 0 ? std::vector<int>{m1.in[1], other} : std::vector<int>{other, m1.in[0]};
      std::vector<Operand> types;
      for (int v : first) types.push_back(plan.values[static_cast<std::size_t>(v)].operand());
      const Operand t = infer_output(*s.op, types, {});
      plan.values.emplace_back(PlanValue::Kind::computed, t.dtype, t.shape, t.batched);
      const int tid = static_cast<int>(plan.values.size()) - 1;
      plan.values.back().producer = static_cast<int>(steps.size());
      steps.push_back({s.op, {}, first, tid});
      s.in = side == 0 ? std::vector<int>{m1.in[0], tid} : std::vector<int>{tid, m1.in[1]};
      ++plan.summary.reassociated;
      break;
    }
    plan.values[static_cast<std::size_t>(s.out)].producer = static_cast<int>(steps.size());
    steps.push_back(std::move(s));
  }
  plan.steps = std::move(steps);
}

// Keeps the steps the outputs need, renumbering producers.
void eliminate_dead_steps(Plan& plan) {
  std::vector<bool> live(plan.values.size(), false);
  for (int v : plan.outputs) live[static_cast<std::size_t>(v)] = true;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    const PlanStep& s = plan.steps[i];
    if (!live[static_cast<std::size_t>(s.out)]) continue;
    for (int v : s.in) live[static_cast<std::size_t>(v)] = true;
  }
  std::vector<PlanStep> kept;
  for (PlanStep& s : plan.steps) {
    if (!live[static_cast<std::size_t>(s.out)]) continue;
    plan.values[static_cast<std::size_t>(s.out)].producer = static_cast<int>(kept.size());
    kept.push_back(std::move(s));
  }
  plan.steps = std::move(kept);
}

// Steps whose inputs are all constants (or folded values) move to plan.folds, their outputs
// becoming folded values: computed on the plan's first run and kept, never per call, never while
// tracing. Run after the other passes (a reassociated chain may make new products of constants)
// and before the memory plan, which leaves folded values out of the arena.
void fold_constants(Plan& plan) {
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

}  // namespace vt::detail
