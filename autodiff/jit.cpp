#include "jit.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "../core/graph.hpp"
#include "../ops/matmul.hpp"

namespace vt::detail {

namespace {

constexpr std::int64_t alignment = 64;
std::int64_t aligned(std::int64_t bytes) {
  return checked_add(bytes, alignment - 1, "jit", "a buffer's size") / alignment * alignment;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

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
};

struct PlanStep {
  const OpDef* op;
  Attrs attrs;
  std::vector<int> in;
  int out;
};

// Where every value of one call lives: arguments where `argument` says, constants in their
// tensors, results in buffers of their own, everything else in one arena.
struct Placement {
  std::shared_ptr<Storage> arena;
  std::vector<std::shared_ptr<Storage>> owned;  // indexed by plan value: the results' buffers
  std::vector<void*> data;                      // indexed by plan value
};

// One batch size's recorded call, where the backend records (a GPU: one graph launch instead of a
// launch per step). A recording reads and writes fixed addresses, so its buffers stay put: the
// arguments are copied into `arguments`, the results out of the placement's own buffers.
struct Replay {
  std::mutex mutex;  // one call at a time: the buffers are shared
  std::vector<std::shared_ptr<Storage>> arguments;
  std::shared_ptr<Placement> placement;
  std::unique_ptr<Recording> recording;  // null: could not be recorded
  std::uint64_t last_use = 0;
};

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

namespace {

// ---------------------------------------------------------------- graph -> steps (with CSE)
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
    std::string key = fmt::format("{}|{}|{}|{}", static_cast<const void*>(op), fmt::join(in, ","),
                                  fmt::join(attrs.ints, ","), fmt::join(attrs.reals, ","));
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

std::vector<int> reader_counts(const Plan& plan) {
  std::vector<int> readers(plan.values.size(), 0);
  for (const PlanStep& s : plan.steps)
    for (int v : s.in) ++readers[static_cast<std::size_t>(v)];
  for (int v : plan.outputs) ++readers[static_cast<std::size_t>(v)];
  return readers;
}

// ---------------------------------------------------------------- passes
bool is_plain_matmul(const Plan& plan, const PlanStep& s) {
  if (s.op != &matmul_op) return false;
  for (int v : s.in)
    if (plan.values[static_cast<std::size_t>(v)].shape.size() != 2) return false;
  return true;
}

// (P Q) Y -> P (Q Y) and X (Q R) -> (X Q) R when that needs fewer flops by half: the
// cotangents of solves are low-rank products, never worth forming as n x n matrices.
void reassociate_matmuls(Plan& plan) {
  const std::vector<int> readers = reader_counts(plan);
  std::vector<PlanStep> steps;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep s = plan.steps[i];
    for (int side = 0; side < 2 && is_plain_matmul(plan, s); ++side) {
      const int inner = s.in[static_cast<std::size_t>(side)];
      const PlanValue& iv = plan.values[static_cast<std::size_t>(inner)];
      if (iv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(inner)] != 1) continue;
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
      for (int v : first) {
        const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
        types.push_back({pv.dtype, pv.shape, pv.batched, nullptr});
      }
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

// ---------------------------------------------------------------- memory plan
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

void plan_memory(Plan& plan) {
  // Roots: a value made by an aliasing op shares its input's buffer.
  for (std::size_t v = 0; v < plan.values.size(); ++v) plan.values[v].root = static_cast<int>(v);
  for (const PlanStep& s : plan.steps)
    if (s.op->aliases_input) plan.values[static_cast<std::size_t>(s.out)].root = plan.values[static_cast<std::size_t>(s.in[0])].root;
  for (int v : plan.outputs) {
    PlanValue& root = plan.values[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(v)].root)];
    if (root.kind == PlanValue::Kind::computed) root.output_buffer = true;
  }
  // The last step that reads each root's data (handle inputs are not reads).
  std::vector<int> last_read(plan.values.size(), -1);
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    for (std::size_t k = 0; k < s.in.size(); ++k)
      if (!(s.op->handle_inputs >> k & 1u) || s.op->aliases_input)
        last_read[static_cast<std::size_t>(plan.values[static_cast<std::size_t>(s.in[k])].root)] = static_cast<int>(i);
  }
  Arena batched, fixed;
  auto in_arena = [&](const PlanValue& v) { return v.kind == PlanValue::Kind::computed && !v.output_buffer; };
  // The buffers to free after each step: their last read, or their making when never read.
  std::vector<std::vector<int>> dies_after(plan.steps.size());
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    if (static_cast<int>(v) != pv.root || !in_arena(pv)) continue;
    const int step = last_read[v] >= 0 ? last_read[v] : pv.producer;
    if (step >= 0) dies_after[static_cast<std::size_t>(step)].push_back(static_cast<int>(v));
  }
  std::vector<bool> handed_over(plan.values.size(), false);
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    if (!s.op->aliases_input && in_arena(out)) {
      // In place: the output takes input 0's buffer when input 0 dies here and is read exactly as
      // the output is written (same shape, dtype and batching; no other input reads it differently).
      bool reused = false;
      if (s.op->in_place) {
        const PlanValue& first = plan.values[static_cast<std::size_t>(s.in[0])];
        PlanValue& in0 = plan.values[static_cast<std::size_t>(first.root)];
        bool same_reads = first.shape == out.shape && first.dtype == out.dtype && first.batched == out.batched;
        for (std::size_t k = 1; k < s.in.size(); ++k) {
          const PlanValue& other = plan.values[static_cast<std::size_t>(s.in[k])];
          if (other.root == first.root) same_reads &= other.shape == out.shape && other.batched == out.batched;
        }
        if (same_reads && in_arena(in0) && last_read[static_cast<std::size_t>(first.root)] == static_cast<int>(i) &&
            aligned(in0.bytes()) == aligned(out.bytes()) && in0.batched == out.batched) {
          out.offset = in0.offset;
          handed_over[static_cast<std::size_t>(first.root)] = true;
          reused = true;
        }
      }
      if (!reused) out.offset = (out.batched ? batched : fixed).allocate(aligned(out.bytes()));
    }
    for (int v : dies_after[i]) {
      PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
      if (handed_over[static_cast<std::size_t>(v)] || pv.offset < 0) continue;
      (pv.batched ? batched : fixed).release(pv.offset, aligned(pv.bytes()));
    }
  }
  plan.arena_batched = batched.size();
  plan.arena_fixed = fixed.size();
}

}  // namespace

// ---------------------------------------------------------------- execution
namespace {

std::int64_t batch_of(const Plan& plan, const std::vector<Tensor>& inputs) {
  std::int64_t batch = 0;
  bool has_batch = false;
  auto take_batch = [&](const Tensor& t, const char* what) {
    if (!t.is_batched()) return;
    if (has_batch && t.batch_size() != batch)
      fail("jit: {} has batch size {}, another batched value has {}", what, t.batch_size(), batch);
    batch = t.batch_size();
    has_batch = true;
  };
  for (const Tensor& t : inputs) take_batch(t, "an argument");
  for (const PlanValue& v : plan.values)
    if (v.kind == PlanValue::Kind::constant) take_batch(v.constant, "a batched constant captured by the function");
  return batch;
}

std::size_t bytes_at(const PlanValue& v, std::int64_t batch) {
  return static_cast<std::size_t>(checked_mul(v.bytes(), v.batched ? batch : 1, "jit", "a result's size at this batch size"));
}

template <class ArgumentData>
Placement place(const Plan& plan, std::int64_t batch, ArgumentData argument) {
  Placement p;
  const std::int64_t arena_bytes = checked_add(checked_mul(plan.arena_batched, batch, "jit", "the plan's memory at this batch size"),
                                              plan.arena_fixed, "jit", "the plan's memory");
  p.arena = std::make_shared<Storage>(plan.device, static_cast<std::size_t>(std::max<std::int64_t>(arena_bytes, 1)));
  char* const base = static_cast<char*>(p.arena->data);
  p.data.assign(plan.values.size(), nullptr);
  p.owned.resize(plan.values.size());
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    if (pv.kind == PlanValue::Kind::input) p.data[v] = argument(pv.input);
    if (pv.kind == PlanValue::Kind::constant) p.data[v] = const_cast<void*>(pv.constant.raw_data());
  }
  for (const PlanStep& s : plan.steps) {  // in step order: a value's root is placed before it
    const auto v = static_cast<std::size_t>(s.out);
    const PlanValue& pv = plan.values[v];
    if (pv.root != s.out) {
      p.data[v] = p.data[static_cast<std::size_t>(pv.root)];
    } else if (pv.output_buffer) {
      p.owned[v] = std::make_shared<Storage>(plan.device, bytes_at(pv, batch));
      p.data[v] = p.owned[v]->data;
    } else {
      p.data[v] = base + (pv.batched ? pv.offset * batch : plan.arena_batched * batch + pv.offset);
    }
  }
  return p;
}

void run_steps(const Plan& plan, const std::vector<void*>& data, std::int64_t batch, Backend& be) {
  std::vector<Operand> in;
  for (const PlanStep& s : plan.steps) {
    if (s.op->aliases_input) continue;
    in.clear();
    for (int v : s.in) {
      const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
      in.push_back({pv.dtype, pv.shape, pv.batched, data[static_cast<std::size_t>(v)]});
    }
    const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    const Operand o{out.dtype, out.shape, out.batched, data[static_cast<std::size_t>(s.out)]};
    run_kernel(*s.op, s.attrs, kernel_views(in, o, batch), batch, be);
  }
}

// The call's results; a computed one's buffer comes from `computed(root)`.
template <class Computed>
std::vector<Tensor> collect(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Computed computed) {
  std::vector<Tensor> results;
  for (int v : plan.outputs) {
    const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
    const PlanValue& root = plan.values[static_cast<std::size_t>(pv.root)];
    if (root.kind == PlanValue::Kind::constant && pv.root == v) {
      results.push_back(root.constant);
      continue;
    }
    if (root.kind == PlanValue::Kind::input && pv.root == v) {
      results.push_back(inputs[static_cast<std::size_t>(root.input)]);
      continue;
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = pv.dtype;
    impl->shape = pv.shape;
    impl->batched = pv.batched;
    impl->batch = pv.batched ? batch : 0;
    impl->device = plan.device;
    if (root.kind == PlanValue::Kind::computed) {
      impl->storage = computed(pv.root);
    } else {  // an alias of an argument or a constant
      const Tensor& src = root.kind == PlanValue::Kind::input ? inputs[static_cast<std::size_t>(root.input)] : root.constant;
      impl->storage = src.impl().storage;
      impl->offset = src.impl().offset;
    }
    results.push_back(Tensor(std::move(impl)));
  }
  return results;
}

std::vector<Tensor> run_directly(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be) {
  const Placement p =
      place(plan, batch, [&](int i) { return const_cast<void*>(inputs[static_cast<std::size_t>(i)].raw_data()); });
  try {
    run_steps(plan, p.data, batch, be);
  } catch (...) {
    be.raise_deferred();  // a failure deferred by an earlier step came first
    throw;
  }
  be.raise_deferred();  // a failure inside the plan (a GPU's factorization info) raises before results exist
  return collect(plan, inputs, batch, [&](int root) { return p.owned[static_cast<std::size_t>(root)]; });
}

// A flat view of a whole buffer, for copies between buffers of one value.
View flat(DType dtype, void* data, std::size_t bytes) {
  const auto count = static_cast<std::int64_t>(bytes / size_of(dtype));
  return View{dtype, data, {count}, {1}};
}

// Records the call's steps over the replay's buffers; false when the backend could not.
bool record(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be, Replay& replay) {
  replay.arguments.resize(inputs.size());
  for (const PlanValue& pv : plan.values)
    if (pv.kind == PlanValue::Kind::input)
      replay.arguments[static_cast<std::size_t>(pv.input)] = std::make_shared<Storage>(plan.device, bytes_at(pv, batch));
  replay.placement =
      std::make_shared<Placement>(place(plan, batch, [&](int i) { return replay.arguments[static_cast<std::size_t>(i)]->data; }));
  if (!be.begin_recording()) return false;
  try {
    run_steps(plan, replay.placement->data, batch, be);
  } catch (...) {  // not recordable (or a real failure, which running directly raises again)
    (void)be.end_recording();
    return false;
  }
  replay.recording = be.end_recording();
  return replay.recording != nullptr;
}

// The call through the plan's recording for this batch size (recorded on first use): the
// arguments are copied into the recording's buffers, it is replayed, and the results are copied
// out into buffers of their own. Nothing when the backend cannot record this plan.
std::optional<std::vector<Tensor>> run_recorded(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch,
                                                Backend& be) {
  std::shared_ptr<Replay> replay;
  bool first = false;
  {
    std::lock_guard lock(plan.replays_mutex);
    std::shared_ptr<Replay>& slot = plan.replays[batch];
    if (!slot) {
      slot = std::make_shared<Replay>();
      first = true;
    }
    replay = slot;
    replay->last_use = ++plan.replay_clock;
    if (plan.replays.size() > Plan::max_replays) {  // forget the least recently used batch size
      auto oldest = std::min_element(plan.replays.begin(), plan.replays.end(),
                                     [](const auto& a, const auto& b) { return a.second->last_use < b.second->last_use; });
      plan.replays.erase(oldest);
    }
  }
  std::unique_lock call(replay->mutex);  // the buffers serve one call at a time
  if (first) {
    if (record(plan, inputs, batch, be, *replay)) {
      ++plan.recordings;
    } else {  // this backend cannot record this plan: its buffers go, and later calls run directly
      plan.unrecordable = true;
      replay->arguments.clear();
      replay->placement.reset();
      std::lock_guard lock(plan.replays_mutex);
      plan.replays.erase(batch);
    }
  }
  if (!replay->recording) return std::nullopt;
  ++plan.replayed;
  std::vector<Tensor> results;
  try {
    for (const PlanValue& pv : plan.values)
      if (pv.kind == PlanValue::Kind::input) {
        const Tensor& t = inputs[static_cast<std::size_t>(pv.input)];
        const std::size_t bytes = bytes_at(pv, batch);
        be.copy(flat(pv.dtype, const_cast<void*>(t.raw_data()), bytes),
                flat(pv.dtype, replay->arguments[static_cast<std::size_t>(pv.input)]->data, bytes));
      }
    replay->recording->replay();
    std::map<int, std::shared_ptr<Storage>> copied;  // by root: outputs sharing a buffer share the copy
    results = collect(plan, inputs, batch, [&](int root) {
      std::shared_ptr<Storage>& own = copied[root];
      if (own) return own;
      const PlanValue& pv = plan.values[static_cast<std::size_t>(root)];
      const std::size_t bytes = bytes_at(pv, batch);
      own = std::make_shared<Storage>(plan.device, bytes);
      be.copy(flat(pv.dtype, replay->placement->owned[static_cast<std::size_t>(root)]->data, bytes),
              flat(pv.dtype, own->data, bytes));
      return own;
    });
  } catch (...) {
    call.unlock();
    be.raise_deferred();  // the replay's own failure comes first, and none may outlive the call
    throw;
  }
  call.unlock();
  be.raise_deferred();
  return results;
}

}  // namespace

std::vector<Tensor> run_plan(const Plan& plan, const std::vector<Tensor>& inputs) {
  const std::int64_t batch = batch_of(plan, inputs);
  Backend& be = backend_for(plan.device);
  if (be.records() && !plan.unrecordable)
    if (std::optional<std::vector<Tensor>> results = run_recorded(plan, inputs, batch, be)) return std::move(*results);
  return run_directly(plan, inputs, batch, be);
}

// ---------------------------------------------------------------- cache
namespace {

std::string key_of(const std::vector<Tensor>& inputs) {
  std::string key = PerExampleScope::active() ? "per-example;" : "";
  for (const Tensor& t : inputs) {
    if (!t.defined()) fail("jit: argument is an undefined tensor");
    key += fmt::format("{}:{}:{}:{};", name_of(t.dtype()), to_string(t.device()), t.is_batched() ? "b" : "u",
                       to_string(t.shape()));
  }
  return key;
}

Tensor symbolic_like(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = t.dtype();
  impl->shape = t.shape();
  impl->batched = t.is_batched();
  impl->device = t.device();
  return Tensor(std::move(impl));
}

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
  reassociate_matmuls(*plan);
  eliminate_dead_steps(*plan);
  plan_memory(*plan);
  PlanSummary& s = plan->summary;
  s.steps = static_cast<std::int64_t>(plan->steps.size());
  for (const PlanStep& step : plan->steps) s.kernels += step.op->aliases_input ? 0 : 1;
  for (const PlanValue& v : plan->values) s.constants += v.kind == PlanValue::Kind::constant ? 1 : 0;
  s.arena_bytes_per_example = plan->arena_batched;
  s.arena_bytes_fixed = plan->arena_fixed;
  summary = s;
  return plan;
}

}  // namespace

namespace {
thread_local int active_traces = 0;
}  // namespace

bool tracing() { return active_traces > 0; }

std::shared_ptr<const CacheEntry> JitCache::get(const std::vector<Tensor>& inputs, const Tracer& trace,
                                                bool count_call) {
  const std::string key = key_of(inputs);
  auto cached = [&]() -> std::shared_ptr<const CacheEntry> {  // with mutex_ held
    const auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    if (count_call) ++counters_.cache_hits;
    return it->second;
  };
  {
    std::lock_guard lock(mutex_);
    if (count_call) ++counters_.calls;
    if (auto hit = cached()) return hit;
    if (tracer_ == std::this_thread::get_id())
      fail("jit: the function asks for a plan of its own (compile) while it is being traced");
  }
  // Traces run one at a time, without the cache's lock: the function may read the counters.
  std::lock_guard one_trace(trace_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (auto hit = cached()) return hit;  // another thread traced it meanwhile
    tracer_ = std::this_thread::get_id();
  }
  struct ClearTracer {  // also when the trace throws
    JitCache& cache;
    ~ClearTracer() {
      std::lock_guard lock(cache.mutex_);
      cache.tracer_ = {};
    }
  } clear_tracer{*this};
  std::vector<Tensor> symbolic;
  for (const Tensor& t : inputs) symbolic.push_back(symbolic_like(t));
  const auto t0 = std::chrono::steady_clock::now();
  const Traced traced = [&] {
    struct Active {
      Active() { ++active_traces; }
      ~Active() { --active_traces; }
    } active;
    IsolatedTrace isolated;
    return trace(symbolic);
  }();
  const double trace_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  auto entry = std::make_shared<CacheEntry>();
  entry->plan = build_plan(symbolic, traced, entry->summary);
  entry->skeleton = traced.skeleton;
  for (const PlanValue& v : entry->plan->values)
    entry->runs_eagerly |= v.kind == PlanValue::Kind::constant && v.constant.impl().tracked;
  std::lock_guard lock(mutex_);
  ++counters_.traces;
  counters_.trace_ms += trace_ms;
  counters_.plan_ms += ms_since(t1);
  entries_.emplace(key, entry);
  return entry;
}

JitCounters JitCache::counters() const {
  std::lock_guard lock(mutex_);
  JitCounters c = counters_;
  for (const auto& [key, entry] : entries_) {
    c.recordings += entry->plan->recordings;
    c.replays += entry->plan->replayed;
  }
  return c;
}

}  // namespace vt::detail
