#pragma once
// What the passes over a plan share (defined in passes.cpp): new values, producers renumbered after steps move,
// readers counted, and the matcher every pattern starts from, a value's producer.
#include <vector>

#include "plan.hpp"

namespace vt::detail {

// A value of type t that a pass's new step makes (its producer: the step's index, or renumber_producers).
int add_value(PlanIR& plan, const Operand& t);
// Every step's output's producer, after a pass inserted or replaced steps in place.
void renumber_producers(PlanIR& plan);
// By value: how many step inputs and results read it.
std::vector<int> reader_counts(const PlanIR& plan);
// By value: whether it depends on constants only (a constant, a folded value, or made by a step whose inputs all
// do): what fold_constants moves to the folds.
std::vector<bool> constant_only(const PlanIR& plan);
// The step that makes v, or null for a value no step of plan.steps makes (an argument, a constant, a folded value,
// a dropped step's output).
const PlanStep* producer(const PlanIR& plan, int v);
// The same where that step runs `op`.
inline const PlanStep* producer(const PlanIR& plan, int v, const OpDef& op) {
  const PlanStep* s = producer(plan, v);
  return s && s->op == &op ? s : nullptr;
}
// The same where v has one reader (`readers`, reader_counts): a step a rewrite may replace, nothing else reading it.
inline const PlanStep* sole_producer(const PlanIR& plan, const std::vector<int>& readers, int v, const OpDef& op) {
  return readers[static_cast<std::size_t>(v)] == 1 ? producer(plan, v, op) : nullptr;
}

}  // namespace vt::detail
