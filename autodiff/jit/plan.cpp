// Building a plan: the traced graph becomes steps, with common subexpressions merged (Builder),
// then build_plan runs the passes and the memory planner and precomputes each kernel's views, so
// that a call does only what depends on its arguments and batch size.
#include <algorithm>
#include <bit>
#include <atomic>
#include <cstdio>
#include <charconv>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "../../ops/batch.hpp"
#include "plan.hpp"

namespace vt::detail {

// ---------------------------------------------------------------- graph -> steps (with CSE)
namespace {
void mix(std::uint64_t& h, std::uint64_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }
}  // namespace

std::uint64_t computation_hash(const PlanStep& s) {
  std::uint64_t h = std::hash<const void*>{}(s.op);
  mix(h, std::hash<const void*>{}(s.attrs.object.get()));
  for (int v : s.in) mix(h, static_cast<std::uint64_t>(v));
  for (std::int64_t x : s.attrs.ints) mix(h, static_cast<std::uint64_t>(x));
  for (double x : s.attrs.reals) mix(h, std::bit_cast<std::uint64_t>(x));
  return h;
}

bool same_computation(const PlanStep& a, const PlanStep& b) {
  const auto same_bits = [](double x, double y) {
    return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
  };
  return a.op == b.op && a.attrs.object == b.attrs.object && a.in == b.in && a.attrs.ints == b.attrs.ints &&
         std::equal(a.attrs.reals.begin(), a.attrs.reals.end(), b.attrs.reals.begin(), b.attrs.reals.end(), same_bits);
}

int CommonSteps::find_or_add(const std::vector<PlanStep>& steps, int i) {
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Slot> old(slots_.empty() ? 64 : 2 * slots_.size());
    old.swap(slots_);
    for (const Slot& e : old)
      if (e.step >= 0) {
        std::size_t k = e.hash & (slots_.size() - 1);
        while (slots_[k].step >= 0) k = (k + 1) & (slots_.size() - 1);
        slots_[k] = e;
      }
  }
  const PlanStep& s = steps[static_cast<std::size_t>(i)];
  const std::uint64_t hash = computation_hash(s);
  std::size_t k = hash & (slots_.size() - 1);
  for (; slots_[k].step >= 0; k = (k + 1) & (slots_.size() - 1))
    if (slots_[k].hash == hash && same_computation(steps[static_cast<std::size_t>(slots_[k].step)], s))
      return slots_[k].step;
  slots_[k] = {hash, i};
  ++size_;
  return -1;
}

namespace {

class Builder {
 public:
  explicit Builder(Plan& plan) : plan_(plan) {}

  // The plan value of t, made (with those of its inputs, inputs first) where it has none: by an explicit stack, as a
  // long chain of traced ops must not recurse as deep. Inputs are taken in order, so values are numbered as a
  // depth-first walk finishes them.
  int value_of(const Tensor& root) {
    std::vector<const Tensor*> stack{&root};  // the trace's tensors, which outlive the plan's building
    while (!stack.empty()) {
      const Tensor& t = *stack.back();
      const TensorImpl* key = t.impl_ptr().get();
      if (ids_.contains(key)) {
        stack.pop_back();
        continue;
      }
      int id;
      if (!t.is_symbolic()) {
        id = add_value(PlanValue::Kind::constant, t.dtype(), t.shape(), t.is_batched());
        plan_.values[static_cast<std::size_t>(id)].constant = t;
      } else {
        if (!t.impl().node) fail("jit: the function uses a traced tensor from another trace (or a leaked one)");
        const Node& node = *t.impl().node;
        const std::size_t waiting = stack.size();
        for (auto x = node.inputs.rbegin(); x != node.inputs.rend(); ++x)
          if (!ids_.contains(x->impl_ptr().get())) stack.push_back(&*x);
        if (stack.size() > waiting) continue;  // its inputs first
        std::vector<int> in;
        in.reserve(node.inputs.size());
        for (const Tensor& x : node.inputs) in.push_back(ids_.at(x.impl_ptr().get()));
        id = add_step(node.op, node.attrs, std::move(in), t.dtype(), t.shape(), t.is_batched());
        ++plan_.summary.traced_ops;
      }
      ids_.try_emplace(key, id);
      stack.pop_back();
    }
    return ids_.at(root.impl_ptr().get());
  }

  void bind_input(const Tensor& t, int index) {
    const int id = add_value(PlanValue::Kind::input, t.dtype(), t.shape(), t.is_batched());
    plan_.values[id].input = index;
    ids_.try_emplace(t.impl_ptr().get(), id);
  }

  // The value of a step computing this, made where no earlier step does (then the step is the plan's last).
  int add_step(const OpDef* op, const Attrs& attrs, std::vector<int> in, DType dtype, const Shape& shape,
               bool batched) {
    const int out = static_cast<int>(plan_.values.size());
    plan_.steps.emplace_back(op, attrs, std::move(in), out);
    const int same = common_.find_or_add(plan_.steps, static_cast<int>(plan_.steps.size()) - 1);
    if (same >= 0) {
      plan_.steps.pop_back();
      ++plan_.summary.merged;
      return plan_.steps[static_cast<std::size_t>(same)].out;
    }
    add_value(PlanValue::Kind::computed, dtype, shape, batched);
    plan_.values[static_cast<std::size_t>(out)].producer = static_cast<int>(plan_.steps.size()) - 1;
    return out;
  }

 private:
  int add_value(PlanValue::Kind kind, DType dtype, const Shape& shape, bool batched) {
    plan_.values.emplace_back(kind, dtype, shape, batched);
    return static_cast<int>(plan_.values.size()) - 1;
  }
  Plan& plan_;
  PointerMap<int> ids_;
  CommonSteps common_;
};

}  // namespace

void precompute_views(Plan& plan) {
  std::vector<Operand> in;
  plan.views.assign(plan.steps.size(), KernelViews{});
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (s.op->aliases_input) continue;
    in.clear();
    for (int v : s.in) in.push_back(plan.values[static_cast<std::size_t>(v)].operand());
    plan.views[i] = kernel_views(in, plan.values[static_cast<std::size_t>(s.out)].operand(), 0);
  }
  plan.views_computed = true;
}

namespace {

// A plan runs at one batch size. Mapping over a plain argument (vmap or as_batch of it) fixes it;
// a batched argument's is a run-time value. Where the two meet in a step (vmap(f)(plain, batched))
// eager code needs them equal too, and a call checks it; where they never meet, eager code allows
// them to differ but the plan cannot, so such a function runs op by op, whatever the sizes.
void untie_batched_arguments(Plan& plan) {
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
        find(source[static_cast<std::size_t>(&pv - plan.values.data())]) != find(0)) {
      plan.runs_op_by_op = fmt::format(
          "the function maps over a plain argument of {} examples (vmap or as_batch of it inside the function), "
          "which fixes the plan's batch size, and takes a batched argument (argument {}, as_batch) that never meets "
          "it, whose batch size is a run-time value; a plan has one batch size",
          plan.fixed_batch, pv.input);
      return;
    }
}

// A plan's batch size, where a step fixes it, and whether it can be recorded for replay.
void find_batch_size(Plan& plan) {
  for (const PlanStep& step : plan.steps) {
    // A collective's host-side message, or a loop's host-side steps, cannot be recorded for replay:
    // such plans run directly.
    if (step.op->collective || step.op->runs_functions) plan.unrecordable = true;
    const std::int64_t b = fixed_batch(*step.op, step.attrs);
    if (b < 0) continue;
    if (plan.fixed_batch >= 0 && plan.fixed_batch != b) {
      plan.runs_op_by_op = fmt::format(
          "the function maps over plain tensors whose leading axes differ ({} and {}), and a plan has one batch size",
          plan.fixed_batch, b);
      return;
    }
    plan.fixed_batch = b;
  }
  // A batched constant (a value made from constants only, under vmap of a plain tensor) has its batch size too.
  std::int64_t constant_batch = -1;
  for (const PlanValue& v : plan.values) {
    if (v.kind != PlanValue::Kind::constant || !v.batched) continue;
    const std::int64_t b = v.constant.batch_size();
    if (plan.fixed_batch >= 0 && b != plan.fixed_batch) {
      plan.runs_op_by_op = fmt::format(
          "the function maps over a plain tensor of {} examples and captures a batch of {} (a vmap of a constant), "
          "and a plan has one batch size",
          plan.fixed_batch, b);
      return;
    }
    if (constant_batch >= 0 && b != constant_batch) {
      plan.runs_op_by_op = fmt::format(
          "the function captures batches of {} and of {} (vmaps of constants), and a plan has one batch size",
          constant_batch, b);
      return;
    }
    constant_batch = b;
  }
  if (plan.fixed_batch >= 0) untie_batched_arguments(plan);
}

// What a pass changed, cheaply: a hash of each step (what it computes, and its output).
std::uint64_t step_hash(const PlanStep& s) {
  std::uint64_t h = computation_hash(s);
  mix(h, static_cast<std::uint64_t>(s.out) << 32);
  return h;
}

struct PlanShape {
  std::size_t steps, folds, fused, segments;
  bool chunkable;
  bool operator==(const PlanShape&) const = default;
};
PlanShape shape_of(const Plan& plan) {
  return {plan.steps.size(), plan.folds.size(), plan.fused.size(), plan.segments.size(), plan.chunkable};
}

// VTAPE_JIT_DUMP=DIR: each plan's text as traced and after every pass that changed it, one file each,
// DIR/plan<N>-<KK>-<pass>.txt (N counts the process's plans, KK the pass's place in the pipeline).
class Dump {
 public:
  Dump() {
    const char* dir = std::getenv("VTAPE_JIT_DUMP");
    if (!dir || !*dir) return;
    static std::atomic<int> plans{0};
    prefix_ = fmt::format("{}/plan{}", dir, plans++);
  }
  void write(const Plan& plan, int pass, const char* name) const {
    if (prefix_.empty()) return;
    const std::string path = fmt::format("{}-{:02}-{}.txt", prefix_, pass + 1, name);
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) fail("jit: VTAPE_JIT_DUMP cannot write {}; it names a folder that exists", path);
    const std::string text = plan_text(plan);
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !written) fail("jit: VTAPE_JIT_DUMP could not write {}", path);
  }

 private:
  std::string prefix_;
};

// Runs the pipeline; a step that an optional pass makes or changes is marked as its, and the passes that changed
// anything are named in the summary. Verified after every pass where asked (verify_after_passes).
//
// Which steps a pass made or changed is found from the steps' hashes before and after it, taken only after a pass
// that counts a rewrite: a rewrite that adds or changes a step counts it (count_rewrite), and a pass that only drops
// or reorders steps, or sets the schedule, leaves every remaining step's hash among those before it. Where plans are
// verified the hashes are taken after every optional pass, and a pass that changed a step without counting fails.
void run_passes(Plan& plan, const std::string& selection) {
  const std::vector<Pass>& passes = plan_passes();
  std::vector<bool> enabled(passes.size(), true);
  if (const char* env = std::getenv("VTAPE_JIT_PASSES")) select_passes(env, enabled, "VTAPE_JIT_PASSES");
  select_passes(selection, enabled, "JitOptions::passes");
  const bool verify = verify_after_passes();
  const Dump dump;
  if (verify) verify_plan(plan, "the trace");
  dump.write(plan, -1, "trace");
  std::vector<std::uint64_t> before, after;  // the steps' hashes, `before` sorted
  for (const PlanStep& s : plan.steps) before.push_back(step_hash(s));
  std::sort(before.begin(), before.end());
  for (std::size_t k = 0; k < passes.size(); ++k) {
    const Pass& pass = passes[k];
    if (!enabled[k] || (pass.scope == PassScope::cpu && plan.device != Device::cpu())) continue;
    if (!plan.runs_op_by_op.empty()) return;
    if (!pass.optional) {  // a stage every plan needs: taken as a change, whatever it did
      pass.run(plan);
      if (verify) verify_plan(plan, pass.name);
      dump.write(plan, static_cast<int>(k), pass.name);
      continue;
    }
    const PlanShape shape = shape_of(plan);
    const std::int64_t counted = plan.rewrites_counted;
    plan.running_pass = static_cast<int>(k);
    pass.run(plan);
    plan.running_pass = -1;
    const bool counts = plan.rewrites_counted > counted;
    std::int64_t made = 0;
    if (counts || verify) {
      after.clear();
      for (PlanStep& s : plan.steps) {
        after.push_back(step_hash(s));
        if (std::binary_search(before.begin(), before.end(), after.back())) continue;
        s.made_by = static_cast<int>(k);
        ++made;
      }
      if (made > 0 && !counts)
        fail("jit: internal error, the pass {} changed {} steps and counted no rewrite (count_rewrite)", pass.name,
             made);
      std::sort(after.begin(), after.end());
      before.swap(after);
    }
    if (verify) verify_plan(plan, pass.name);
    if (made == 0 && shape_of(plan) == shape) continue;
    plan.summary.passes.emplace_back(pass.name);
    std::int64_t& rewrites = plan.summary.rewrites[pass.name];
    if (rewrites == 0) rewrites = std::max<std::int64_t>(made, 1);
    dump.write(plan, static_cast<int>(k), pass.name);
  }
}

// The one cache size the plan is built for and its calls run with (Plan::chunk_cache_bytes): the option, else
// VTAPE_JIT_CACHE_BYTES, else the backend's; 0 on a backend that runs no plan by chunks, whatever is asked.
std::size_t cache_bytes_for(const JitOptions& options, Device device) {
  const std::size_t backend = backend_for(device).chunk_cache_bytes();
  if (backend == 0) return 0;
  if (options.cache_bytes > 0) return options.cache_bytes;
  if (const char* env = std::getenv("VTAPE_JIT_CACHE_BYTES"); env && *env) {
    const std::string_view text(env);
    std::size_t bytes = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
    if (error != std::errc{} || end != text.data() + text.size())
      fail("jit: VTAPE_JIT_CACHE_BYTES is \"{}\"; it takes a number of bytes (0: the backend's choice)", text);
    if (bytes > 0) return bytes;
  }
  return backend;
}

}  // namespace

const std::vector<Pass>& plan_passes() {
  static const std::vector<Pass> passes{
      {.name = "fold_transposes_into_matmuls",
       .rewrite = fold_transposes_into_matmuls,
       .rule = "a matmul reads x.t() through its GEMM flag; on the CPU any step reads a symmetric x's x.t() as x"},
      {.name = "fold_broadcasts_into_elementwise",
       .rewrite = fold_broadcasts_into_elementwise,
       .rule = "an elementwise step reads broadcast_to's input and broadcasts it itself"},
      {.name = "take_indicator_products",
       .rewrite = take_indicator_products,
       .scope = PassScope::cpu,
       .rule = "x S for a captured S of one 1 per row, 0 elsewhere: a segment sum or a take (a GPU's segment sums use "
               "atomics)"},
      {.name = "reassociate_matmuls",
       .rewrite = reassociate_matmuls,
       .rule = "(P Q) Y = P (Q Y): a chain in the order of fewer flops"},
      {.name = "mark_symmetric_products",
       .rewrite = mark_symmetric_products,
       .rule = "X D X^T and X S X are symmetric: computed over one triangle"},
      {.name = "fold_diagonal_adds",
       .rewrite = fold_diagonal_adds,
       .rule = "A B + D, D a captured diagonal: added inside the product"},
      {.name = "scale_repeated_solves",
       .rewrite = scale_repeated_solves,
       .rule = "A^-1 (s q) = s A^-1 q: a solve the plan already makes, scaled"},
      {.name = "contract_low_rank_row_sums",
       .rewrite = contract_low_rank_row_sums,
       .rule = "sum_rows((U W) * C) = sum_rows(W * (U^T C)) for a rank below the rows"},
      {.name = "move_scalings_out_of_symmetric_sums",
       .rewrite = move_scalings_out_of_symmetric_sums,
       .scope = PassScope::cpu,
       .rule = "sum(c X) = c sum(X) over symmetric matrices"},
      {.name = "merge_common_steps",
       .rewrite = merge_common_steps,
       .rule = "equal steps, and equal small constants, once"},
      {.name = "eliminate_dead_steps", .rewrite = eliminate_dead_steps, .rule = "steps no result needs are dropped"},
      {.name = "mark_lower_only_outputs",
       .rewrite = mark_lower_only_outputs,
       .rule = "a triangle nobody reads is left unwritten"},
      {.name = "find_batch_size",
       .schedule = find_batch_size,
       .optional = false,
       .rule = "the batch size a step fixes, if any"},
      {.name = "fold_constants", .rewrite = fold_constants, .rule = "steps on constants run once, on the first call"},
      {.name = "order_for_chunks", .schedule = order_for_chunks, .rule = "steps ordered to run by chunks of examples"},
      {.name = "split_into_segments",
       .schedule = split_into_segments,
       .scope = PassScope::cpu,
       .rule = "per-chunk steps that read no large shared operand run by sub-chunks that fit the cache"},
      {.name = "plan_memory", .schedule = plan_memory, .optional = false, .rule = "every buffer's arena offset"},
      {.name = "precompute_views",
       .schedule = precompute_views,
       .optional = false,
       .rule = "every kernel's views, once"},
      {.name = "fuse_elementwise",
       .schedule = fuse_elementwise,
       .scope = PassScope::cpu,
       .rule = "runs of elementwise steps tile by tile (on a GPU a tile would be a kernel launch)"},
  };
  return passes;
}

std::string pass_table_markdown() {
  std::string out = "| stage | kind | optional | devices | rule |\n| --- | --- | --- | --- | --- |\n";
  for (const Pass& p : plan_passes())
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", p.name, p.rewrite ? "rewrite" : "schedule",
                       p.optional ? "yes" : "no", p.scope == PassScope::cpu ? "CPU" : "all", p.rule);
  return out;
}

void count_rewrite(PlanIR& plan) {
  ++plan.rewrites_counted;
  if (plan.running_pass >= 0) ++plan.summary.rewrites[plan_passes()[static_cast<std::size_t>(plan.running_pass)].name];
}

void run_pass(Plan& plan, std::string_view name) {
  const std::vector<Pass>& passes = plan_passes();
  const auto it = std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return name == p.name; });
  if (it == passes.end()) fail("jit: no pass is named {}", name);
  plan.running_pass = static_cast<int>(it - passes.begin());
  it->run(plan);
  plan.running_pass = -1;
}

void select_passes(const std::string& selection, std::vector<bool>& enabled, const char* where) {
  const std::vector<Pass>& passes = plan_passes();
  std::size_t at = 0;
  while (at < selection.size()) {
    std::size_t end = selection.find_first_of(", ", at);
    if (end == std::string::npos) end = selection.size();
    const std::string token = selection.substr(at, end - at);
    at = end + 1;
    if (token.empty()) continue;
    const bool on = token[0] == '+';
    if (token[0] != '+' && token[0] != '-')
      fail("jit: {} names passes as -name (off) or +name (on), comma-separated; got \"{}\"", where, token);
    const std::string name = token.substr(1);
    const auto it = std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return name == p.name; });
    if (it == passes.end()) {
      std::vector<std::string> names;
      for (const Pass& p : passes)
        if (p.optional) names.emplace_back(p.name);
      fail("jit: {} names an unknown pass \"{}\"; the passes are {}", where, name, fmt::join(names, ", "));
    }
    if (!it->optional && !on) fail("jit: {} turns off {}, which every plan needs", where, name);
    enabled[static_cast<std::size_t>(it - passes.begin())] = on;
  }
}

std::shared_ptr<const Plan> build_plan(const std::vector<Tensor>& symbolic_inputs, const Traced& traced,
                                       PlanSummary& summary, const JitOptions& options) {
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
      fail(
          "jit: a plan runs on one device, but the function's arguments and captured tensors are on {} and on {}; "
          "move them with to_device before calling it",
          to_string(plan->device), to_string(d));
  plan->chunk_cache_bytes = cache_bytes_for(options, plan->device);
  run_passes(*plan, options.passes);
  PlanSummary& s = plan->summary;
  s.steps = static_cast<std::int64_t>(plan->steps.size());
  for (const PlanStep& step : plan->steps) s.kernels += step.op->aliases_input ? 0 : 1;
  for (const PlanValue& v : plan->values) s.constants += v.kind == PlanValue::Kind::constant ? 1 : 0;
  s.folded = static_cast<std::int64_t>(plan->folds.size());
  for (const FusedGroup& g : plan->fused) {
    s.fused += static_cast<std::int64_t>(g.tiled.size());
    if (g.lower_triangle) s.fused_lower += static_cast<std::int64_t>(g.tiled.size());
  }
  s.arena_bytes_per_example = plan->arena_batched + plan->arena_local;
  s.arena_bytes_fixed = plan->arena_fixed;
  summary = s;
  return plan;
}

}  // namespace vt::detail
