#pragma once
// A jit plan: the values and steps a trace becomes, shared by the files of autodiff/jit/. The
// builder, the passes, the memory planner and the executor each live in their own file and meet
// only through these types, so one can change (another executor, another pass) without the rest.
// Internal to the library; users reach jit through autodiff/jit.hpp.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "../../core/graph.hpp"
#include "../jit.hpp"

namespace vt::detail {

struct PlanValue {
  enum class Kind { input, constant, computed };
  PlanValue(Kind kind, DType dtype, Shape shape, bool batched)
      : kind(kind), dtype(dtype), shape(std::move(shape)), batched(batched) {}
  Kind kind;
  DType dtype;
  Shape shape;
  bool batched;
  int input = -1;        // Kind::input: the argument's index
  Tensor constant;       // Kind::constant
  int producer = -1;     // Kind::computed: the step
  int root = -1;         // the value whose buffer this one is (itself, unless made by an aliasing op)
  bool output_buffer = false;  // the buffer belongs to a result: allocated per call, outside the arena
  std::int64_t offset = -1;    // in its arena, in bytes (per example when batched)
  std::int64_t bytes() const { return numel(shape) * static_cast<std::int64_t>(size_of(dtype)); }
  // The value as an operand with no data yet, for the shape rules and the kernel views.
  Operand operand() const { return {dtype, shape, batched, nullptr}; }
};

struct PlanStep {
  const OpDef* op;
  Attrs attrs;
  std::vector<int> in;
  int out;
  // The kernel's views, computed once when the plan is built (steps that alias run no kernel and
  // leave them empty): data pointers are null and a leading batch axis has size 0 until a call
  // sets its arguments' pointers and its batch size.
  KernelViews views{};
};

// One batch size's recorded call (autodiff/jit/execute.cpp).
struct Replay;

class Plan {
 public:
  std::vector<PlanValue> values;
  std::vector<PlanStep> steps;
  std::vector<int> outputs;
  std::int64_t arena_batched = 0, arena_fixed = 0;
  Device device;
  PlanSummary summary;

  // Recordings by batch size, the most recently used kept (each holds its batch's buffers).
  static constexpr std::size_t max_replays = 8;
  mutable std::mutex replays_mutex;
  mutable std::map<std::int64_t, std::shared_ptr<Replay>> replays;
  mutable std::uint64_t replay_clock = 0;
  mutable std::atomic<bool> unrecordable{false};  // the backend failed to record it once: run directly
  mutable std::atomic<std::int64_t> recordings{0}, replayed{0};
};

// graph -> steps, with common subexpressions merged; then the passes and the memory plan.
std::shared_ptr<const Plan> build_plan(const std::vector<Tensor>& symbolic_inputs, const Traced& traced,
                                       PlanSummary& summary);

// Passes over a built plan (autodiff/jit/passes.cpp), in the order build_plan runs them.
void fold_transposes_into_matmuls(Plan& plan);
void reassociate_matmuls(Plan& plan);
void eliminate_dead_steps(Plan& plan);

// Every value's root buffer and arena offset, and the arenas' sizes (autodiff/jit/memory.cpp).
void plan_memory(Plan& plan);

}  // namespace vt::detail
