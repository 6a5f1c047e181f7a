// Building a plan: the traced graph becomes steps, with common subexpressions merged (Builder),
// then build_plan runs the passes and the memory planner and precomputes each kernel's views, so
// that a call does only what depends on its arguments and batch size.
#include <string>
#include <unordered_map>

#include "../../ops/batch.hpp"
#include "plan.hpp"

namespace vt::detail {

// ---------------------------------------------------------------- graph -> steps (with CSE)
std::string step_key(const OpDef* op, const Attrs& attrs, const std::vector<int>& in) {
  return fmt::format("{}|{}|{}|{}", static_cast<const void*>(op), fmt::join(in, ","), fmt::join(attrs.ints, ","),
                     fmt::join(attrs.reals, ","));
}

namespace {

class Builder {
 public:
  explicit Builder(Plan& plan) : plan_(plan) {}

  int value_of(const Tensor& t) {
    const TensorImpl* key = t.impl_ptr().get();
    if (auto it = ids_.find(key); it != ids_.end()) return it->second;
    int id;
    if (!t.is_symbolic()) {
      id = add_value(PlanValue(PlanValue::Kind::constant, t.dtype(), t.shape(), t.is_batched()));
      plan_.values[id].constant = t;
    } else {
      if (!t.impl().node) fail("jit: the function uses a traced tensor from another trace (or a leaked one)");
      const Node& node = *t.impl().node;
      std::vector<int> in;
      for (const Tensor& x : node.inputs) in.push_back(value_of(x));
      id = add_step(node.op, node.attrs, in, t.dtype(), t.shape(), t.is_batched());
      ++plan_.summary.traced_ops;
    }
    ids_.emplace(key, id);
    return id;
  }

  void bind_input(const Tensor& t, int index) {
    const int id = add_value(PlanValue(PlanValue::Kind::input, t.dtype(), t.shape(), t.is_batched()));
    plan_.values[id].input = index;
    ids_.emplace(t.impl_ptr().get(), id);
  }

  int add_step(const OpDef* op, const Attrs& attrs, const std::vector<int>& in, DType dtype, const Shape& shape,
               bool batched) {
    std::string key = step_key(op, attrs, in);
    if (auto it = cse_.find(key); it != cse_.end()) {
      ++plan_.summary.merged;
      return it->second;
    }
    const int id = add_value(PlanValue(PlanValue::Kind::computed, dtype, shape, batched));
    plan_.values[id].producer = static_cast<int>(plan_.steps.size());
    plan_.steps.push_back({op, attrs, in, id});
    cse_.emplace(std::move(key), id);
    return id;
  }

 private:
  int add_value(PlanValue v) {
    plan_.values.push_back(std::move(v));
    return static_cast<int>(plan_.values.size()) - 1;
  }
  Plan& plan_;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::unordered_map<std::string, int> cse_;
};

// What every kernel step's views are for any batch size, with no data: a call patches the
// pointers and the batch axis's size instead of recomputing strides and allocating per step.
void precompute_views(Plan& plan) {
  std::vector<Operand> in;
  for (PlanStep& s : plan.steps) {
    if (s.op->aliases_input) continue;
    in.clear();
    for (int v : s.in) in.push_back(plan.values[static_cast<std::size_t>(v)].operand());
    s.views = kernel_views(in, plan.values[static_cast<std::size_t>(s.out)].operand(), 0);
  }
}

// A plan runs at one batch size. Mapping over a plain argument (vmap or as_batch of it) fixes it;
// a batched argument's is a run-time value. Where the two meet in a step (vmap(f)(plain, batched))
// eager code needs them equal too, and a call checks it; where they never meet, eager code allows
// them to differ but the plan cannot, so such a function is refused here, whatever the sizes.
void refuse_untied_batched_arguments(const Plan& plan) {
  // Union-find over batch sources: 0 is the fixed batch, 1 + i batched argument i.
  std::vector<int> parent(1, 0);
  auto find = [&](int a) {
    while (parent[static_cast<std::size_t>(a)] != a) a = parent[static_cast<std::size_t>(a)];
    return a;
  };
  std::vector<int> source(plan.values.size(), -1);
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    if (pv.kind != PlanValue::Kind::input || !pv.batched) continue;
    source[v] = static_cast<int>(parent.size());
    parent.push_back(source[v]);
  }
  for (const PlanStep& step : plan.steps) {
    int joined = fixed_batch(*step.op, step.attrs) >= 0 ? 0 : -1;
    for (int v : step.in) {
      const int s = source[static_cast<std::size_t>(v)];
      if (s < 0) continue;
      if (joined < 0) joined = find(s);
      else parent[static_cast<std::size_t>(find(s))] = find(joined);
    }
    if (plan.values[static_cast<std::size_t>(step.out)].batched) source[static_cast<std::size_t>(step.out)] = joined;
  }
  for (const PlanValue& pv : plan.values)
    if (pv.kind == PlanValue::Kind::input && pv.batched &&
        find(source[static_cast<std::size_t>(&pv - plan.values.data())]) != find(0))
      fail("jit: the function maps over a plain argument of {} examples (vmap or as_batch of it inside the "
           "function), which fixes the plan's batch size, and takes a batched argument (argument {}, as_batch) that "
           "never meets it, whose batch size is a run-time value; a plan has one batch size: pass both batched "
           "(as_batch before the call) or both plain, of one batch size, or call the function without jit",
           plan.fixed_batch, pv.input);
}

}  // namespace

std::shared_ptr<const Plan> build_plan(const std::vector<Tensor>& symbolic_inputs, const Traced& traced,
                                       PlanSummary& summary) {
  auto plan = std::make_shared<Plan>();
  plan->device = symbolic_inputs.empty() ? Device{} : symbolic_inputs[0].device();
  Builder builder(*plan);
  for (std::size_t i = 0; i < symbolic_inputs.size(); ++i) builder.bind_input(symbolic_inputs[i], static_cast<int>(i));
  for (const Tensor& out : traced.outputs) {
    if (!out.defined()) fail("jit: the function returned an undefined tensor");
    plan->outputs.push_back(builder.value_of(out));
  }
  // A plan runs every step on one backend: the arguments' and captured tensors' device. Ops
  // already refuse mixed inputs; this catches parts of a function that never meet.
  std::vector<Device> used;
  for (const Tensor& t : symbolic_inputs) used.push_back(t.device());
  for (const PlanValue& v : plan->values)
    if (v.kind == PlanValue::Kind::constant) used.push_back(v.constant.device());
  if (!used.empty()) plan->device = used.front();
  for (Device d : used)
    if (d != plan->device)
      fail("jit: a plan runs on one device, but the function's arguments and captured tensors are on {} and on {}; "
           "move them with to_device before calling it",
           to_string(plan->device), to_string(d));
  fold_transposes_into_matmuls(*plan);
  reassociate_matmuls(*plan);
  share_transposed_constants(*plan);
  mark_symmetric_products(*plan);
  fold_diagonal_adds(*plan);
  scale_repeated_solves(*plan);
  contract_low_rank_row_sums(*plan);
  move_scalings_out_of_symmetric_sums(*plan);
  merge_common_steps(*plan);
  eliminate_dead_steps(*plan);
  mark_lower_only_outputs(*plan);
  for (const PlanStep& step : plan->steps) {
    // A collective's host-side message cannot be recorded for replay: such plans run directly.
    if (step.op->collective) plan->unrecordable = true;
    const std::int64_t b = fixed_batch(*step.op, step.attrs);
    if (b < 0) continue;
    if (plan->fixed_batch >= 0 && plan->fixed_batch != b)
      fail("jit: the function maps over plain tensors whose leading axes differ ({} and {}); vmap needs one batch size",
           plan->fixed_batch, b);
    plan->fixed_batch = b;
  }
  if (plan->fixed_batch >= 0) refuse_untied_batched_arguments(*plan);
  fold_constants(*plan);
  order_for_chunks(*plan);
  plan_memory(*plan);
  precompute_views(*plan);
  fuse_elementwise(*plan);
  PlanSummary& s = plan->summary;
  s.steps = static_cast<std::int64_t>(plan->steps.size());
  for (const PlanStep& step : plan->steps) s.kernels += step.op->aliases_input ? 0 : 1;
  for (const PlanValue& v : plan->values) s.constants += v.kind == PlanValue::Kind::constant ? 1 : 0;
  s.folded = static_cast<std::int64_t>(plan->folds.size());
  for (const FusedGroup& g : plan->fused) {
    s.fused += static_cast<std::int64_t>(g.tiled.size());
    if (g.lower_triangle) s.fused_lower += static_cast<std::int64_t>(g.tiled.size());
  }
  s.arena_bytes_per_example = plan->arena_batched;
  s.arena_bytes_fixed = plan->arena_fixed;
  summary = s;
  return plan;
}

}  // namespace vt::detail
