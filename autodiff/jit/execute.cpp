// Running a plan for one call: placing its values in memory, running its steps (or replaying a
// recording of them, on a backend that records) and handing back the results. Kept apart from
// building and planning so that the executor can be replaced without touching them.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "plan.hpp"

namespace vt::detail {

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

// What calls of one plan keep and count (plan.hpp).
struct PlanRuntime {
  // The folds' values, computed on the plan's first call (run_folds), by plan value.
  std::mutex folds_mutex;
  std::atomic<bool> folds_done{false};
  std::vector<Tensor> folded;
  // Arenas of finished calls, kept for the next ones (ArenaLease): a call takes the smallest idle arena that is large
  // enough, or replaces the largest idle one with one of the size it needs (or adds one, when calls run concurrently
  // and none is idle), and gives it back when it ends. So the plan keeps the largest arena each concurrent call has
  // needed, and a batch size it fits allocates nothing. release_memory hands them back.
  static constexpr std::size_t max_idle_arenas = 16;
  std::mutex arenas_mutex;
  std::vector<std::shared_ptr<Storage>> idle_arenas;
  std::atomic<std::int64_t> arenas_allocated{0};
  // Recordings by batch size, the most recently used kept (each holds its batch's buffers).
  static constexpr std::size_t max_replays = 8;
  std::mutex replays_mutex;
  std::map<std::int64_t, std::shared_ptr<Replay>> replays;
  std::uint64_t replay_clock = 0;
  std::atomic<std::int64_t> recordings{0}, replayed{0};
  // Calls run by chunks, and the examples per chunk of the latest one.
  std::atomic<std::int64_t> chunked_calls{0}, chunk_examples{0};
};

Plan::Plan() : runtime(std::make_unique<PlanRuntime>()) {}
Plan::~Plan() = default;

PlanRuntimeCounts runtime_counts(const Plan& plan) {
  const PlanRuntime& r = *plan.runtime;
  return {r.arenas_allocated, r.chunked_calls, r.chunk_examples, r.recordings, r.replayed};
}

void release_memory(const Plan& plan) {
  PlanRuntime& r = *plan.runtime;
  {
    std::lock_guard lock(r.arenas_mutex);
    r.idle_arenas.clear();
  }
  std::lock_guard lock(r.replays_mutex);  // a call replaying one keeps it until it ends
  r.replays.clear();
}

namespace {

std::int64_t batch_of(const Plan& plan, const std::vector<Tensor>& inputs) {
  std::int64_t batch = std::max<std::int64_t>(plan.fixed_batch, 0);
  bool has_batch = plan.fixed_batch >= 0;
  auto take_batch = [&](const Tensor& t, const char* what) {
    if (!t.is_batched()) return;
    if (has_batch && t.batch_size() != batch) {
      if (plan.fixed_batch >= 0)
        fail(
            "jit: {} has batch size {}, but the function maps over a plain argument of {} examples (vmap or as_batch "
            "of it), which fixes this plan's batch size",
            what, t.batch_size(), batch);
      fail("jit: {} has batch size {}, another batched value has {}", what, t.batch_size(), batch);
    }
    batch = t.batch_size();
    has_batch = true;
  };
  for (const Tensor& t : inputs) take_batch(t, "an argument");
  for (const PlanValue& v : plan.values)
    if (v.kind == PlanValue::Kind::constant) take_batch(v.constant, "a batched constant captured by the function");
  return batch;
}

std::size_t bytes_at(const PlanValue& v, std::int64_t batch) {
  return static_cast<std::size_t>(
      checked_mul(v.bytes(), v.batched ? batch : 1, "jit", "a result's size at this batch size"));
}

// Laid out as the batched values for `batch` examples, the unbatched ones, then the sub-chunk arena's (place).
std::int64_t arena_bytes_at(const Plan& plan, std::int64_t batch) {
  return checked_add(checked_mul(checked_add(plan.arena_batched, plan.arena_local, "jit", "the plan's memory"), batch,
                                 "jit", "the plan's memory at this batch size"),
                     plan.arena_fixed, "jit", "the plan's memory");
}

// One call's arena of `bytes`, taken from the plan's idle ones and given back when the call ends
// (also when it throws): see PlanRuntime::idle_arenas.
class ArenaLease {
 public:
  ArenaLease(const Plan& plan, std::int64_t arena_bytes) : plan_(plan) {
    const auto bytes = static_cast<std::size_t>(std::max<std::int64_t>(arena_bytes, 1));
    {
      std::lock_guard lock(plan.runtime->arenas_mutex);
      auto& idle = plan.runtime->idle_arenas;
      auto fits = idle.end(), largest = idle.end();
      for (auto it = idle.begin(); it != idle.end(); ++it) {
        if ((*it)->bytes >= bytes && (fits == idle.end() || (*it)->bytes < (*fits)->bytes)) fits = it;
        if (largest == idle.end() || (*it)->bytes > (*largest)->bytes) largest = it;
      }
      if (fits != idle.end()) {
        arena_ = std::move(*fits);
        idle.erase(fits);
        return;
      }
      if (largest != idle.end()) idle.erase(largest);  // too small: replaced below, freed first
    }
    arena_ = std::make_shared<Storage>(plan.device, bytes);
    ++plan.runtime->arenas_allocated;
  }
  ~ArenaLease() {
    std::lock_guard lock(plan_.runtime->arenas_mutex);
    auto& idle = plan_.runtime->idle_arenas;
    if (idle.size() >= PlanRuntime::max_idle_arenas) {
      auto smallest =
          std::min_element(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a->bytes < b->bytes; });
      if ((*smallest)->bytes >= arena_->bytes) return;  // this one goes
      idle.erase(smallest);
    }
    idle.push_back(std::move(arena_));
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  const std::shared_ptr<Storage>& arena() const { return arena_; }

 private:
  const Plan& plan_;
  std::shared_ptr<Storage> arena_;
};

// A constant's or a folded value's tensor, for values whose buffer is fixed for the plan's life.
const Tensor* fixed_tensor(const Plan& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (pv.kind == PlanValue::Kind::constant) return &pv.constant;
  if (pv.kind == PlanValue::Kind::folded) return &plan.runtime->folded[static_cast<std::size_t>(v)];
  return nullptr;
}

// Results get buffers of `batch` examples; the arena's batched buffers are laid out for
// `arena_batch` examples (0 when they live elsewhere: per worker, when the call runs by chunks).
template <class ArgumentData>
Placement place(const Plan& plan, std::int64_t batch, std::shared_ptr<Storage> arena, ArgumentData argument,
                std::int64_t arena_batch) {
  Placement p;
  p.arena = std::move(arena);
  char* const base = static_cast<char*>(p.arena->data);
  p.data.assign(plan.values.size(), nullptr);
  p.owned.resize(plan.values.size());
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    if (pv.kind == PlanValue::Kind::input) p.data[v] = argument(pv.input);
    const Tensor* t = fixed_tensor(plan, static_cast<int>(v));
    if (t && t->defined()) p.data[v] = const_cast<void*>(t->raw_data());  // undefined: a fold's intermediate
  }
  for (const PlanStep& s : plan.steps) {  // in step order: a value's root is placed before it
    const auto v = static_cast<std::size_t>(s.out);
    const PlanValue& pv = plan.values[v];
    const ValueBuffer& b = plan.buffers[v];
    if (b.root != s.out) {
      p.data[v] = p.data[static_cast<std::size_t>(b.root)];
    } else if (b.output_buffer) {
      p.owned[v] = std::make_shared<Storage>(plan.device, bytes_at(pv, batch));
      p.data[v] = p.owned[v]->data;
    } else if (b.local) {
      p.data[v] = base + plan.arena_batched * arena_batch + plan.arena_fixed + b.offset * arena_batch;
    } else {
      p.data[v] = base + (pv.batched ? b.offset * arena_batch : plan.arena_batched * arena_batch + b.offset);
    }
  }
  return p;
}

// The folds (Plan::folds) run once, on the plan's first call, by `apply` like eager ops; a failure
// (a constant that is not positive definite, say) raises in that call and the next call tries again.
void run_folds(const Plan& plan) {
  if (plan.folds.empty() || plan.runtime->folds_done.load(std::memory_order_acquire)) return;
  std::lock_guard lock(plan.runtime->folds_mutex);
  if (plan.runtime->folds_done.load(std::memory_order_relaxed)) return;
  std::vector<Tensor> folded(plan.values.size());
  const DeferConstantOps computing(false);
  for (const PlanStep& s : plan.folds) {
    std::vector<Tensor> in;
    for (int v : s.in) {
      const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
      in.push_back(pv.kind == PlanValue::Kind::constant ? pv.constant : folded[static_cast<std::size_t>(v)]);
    }
    folded[static_cast<std::size_t>(s.out)] = apply(*s.op, std::move(in), s.attrs);
  }
  // Keep what the steps and the results read; intermediates of the folds go.
  std::vector<bool> read(plan.values.size(), false);
  for (const PlanStep& s : plan.steps)
    for (int v : s.in) read[static_cast<std::size_t>(v)] = true;
  for (int v : plan.outputs) {
    read[static_cast<std::size_t>(v)] = true;
    read[static_cast<std::size_t>(plan.buffers[static_cast<std::size_t>(v)].root)] = true;
  }
  for (std::size_t v = 0; v < folded.size(); ++v)
    if (!read[v]) folded[v] = Tensor();
  plan.runtime->folded = std::move(folded);
  plan.runtime->folds_done.store(true, std::memory_order_release);
}

// Steps [first, last) over `batch` examples: examples [first_example, first_example + batch) of a
// call over whole_batch (-1: the whole batch). Each step's views are the plan's, with these
// pointers and batch size, copied into one scratch KernelViews that every step reuses (assignment
// keeps the vectors' capacity), so a call computes no strides.
// `at`, when given, is set to each step's index before it runs (so a failure names its step).
// `tiled` false runs fused groups step by step: a recording keeps backend calls only, and a group's tiles live in a
// thread's scratch and its sums are added on the host.
void run_steps(const Plan& plan, std::size_t first, std::size_t last, const std::vector<void*>& data,
               std::int64_t batch, Backend& be, std::int64_t whole_batch = -1, std::int64_t first_example = 0,
               std::size_t* at = nullptr, bool tiled = true) {
  KernelViews views;
  for (std::size_t i = first; i < last; ++i) {
    if (at) *at = i;
    if (const int g = tiled ? plan.group_starting_at(i) : -1; g >= 0) {  // elementwise steps, tile by tile (fuse.cpp)
      run_fused_group(plan, plan.fused[static_cast<std::size_t>(g)], data, batch, be);
      i = static_cast<std::size_t>(plan.fused[static_cast<std::size_t>(g)].last) - 1;
      continue;
    }
    const PlanStep& s = plan.steps[i];
    if (s.op->aliases_input) continue;
    const KernelViews& planned = plan.views[i];
    views.in = planned.in;
    views.out = planned.out;
    views.batched = planned.batched;
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      View& view = views.in[k];
      view.data = data[static_cast<std::size_t>(s.in[k])];
      if (views.batched) view.shape[0] = batch;
    }
    views.out.data = data[static_cast<std::size_t>(s.out)];
    if (plan.values[static_cast<std::size_t>(s.out)].batched) views.out.shape[0] = batch;
    run_kernel(*s.op, s.attrs, views, batch, be, whole_batch, first_example);
  }
}

// The call's results; a computed one's buffer comes from `computed(root)`.
template <class Computed>
std::vector<Tensor> collect(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch,
                            Computed computed) {
  std::vector<Tensor> results;
  for (int v : plan.outputs) {
    const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
    const int root_id = plan.buffers[static_cast<std::size_t>(v)].root;
    const PlanValue& root = plan.values[static_cast<std::size_t>(root_id)];
    const Tensor* fixed = fixed_tensor(plan, root_id);
    if (fixed && root_id == v) {
      results.push_back(*fixed);
      continue;
    }
    if (root.kind == PlanValue::Kind::input && root_id == v) {
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
      impl->storage = computed(root_id);
    } else {  // an alias of an argument, a constant or a folded value
      const Tensor& src = fixed ? *fixed : inputs[static_cast<std::size_t>(root.input)];
      impl->storage = src.impl().storage;
      impl->offset = src.impl().offset;
    }
    results.push_back(Tensor(std::move(impl)));
  }
  return results;
}

std::vector<Tensor> run_directly(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be) {
  const ArenaLease lease(plan, arena_bytes_at(plan, batch));
  const Placement p = place(
      plan, batch, lease.arena(),
      [&](int i) { return const_cast<void*>(inputs[static_cast<std::size_t>(i)].raw_data()); }, batch);
  try {
    run_steps(plan, 0, plan.steps.size(), p.data, batch, be);
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

// The call's arguments into the replay's buffers.
void copy_arguments(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be,
                    const Replay& replay) {
  for (const PlanValue& pv : plan.values)
    if (pv.kind == PlanValue::Kind::input) {
      const Tensor& t = inputs[static_cast<std::size_t>(pv.input)];
      const std::size_t bytes = bytes_at(pv, batch);
      be.copy(flat(pv.dtype, const_cast<void*>(t.raw_data()), bytes),
              flat(pv.dtype, replay.arguments[static_cast<std::size_t>(pv.input)]->data, bytes));
    }
}

// Records the call's steps over the replay's buffers; false when the backend could not.
bool record(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be, Replay& replay) {
  replay.arguments.resize(inputs.size());
  for (const PlanValue& pv : plan.values)
    if (pv.kind == PlanValue::Kind::input)
      replay.arguments[static_cast<std::size_t>(pv.input)] =
          std::make_shared<Storage>(plan.device, bytes_at(pv, batch));
  // A recording keeps its own arena: its addresses are fixed in it.
  auto arena = std::make_shared<Storage>(
      plan.device, static_cast<std::size_t>(std::max<std::int64_t>(arena_bytes_at(plan, batch), 1)));
  replay.placement = std::make_shared<Placement>(place(
      plan, batch, std::move(arena), [&](int i) { return replay.arguments[static_cast<std::size_t>(i)]->data; },
      batch));
  if (!be.begin_recording()) return false;
  try {
    run_steps(plan, 0, plan.steps.size(), replay.placement->data, batch, be, -1, 0, nullptr, false);
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
    std::lock_guard lock(plan.runtime->replays_mutex);
    std::shared_ptr<Replay>& slot = plan.runtime->replays[batch];
    if (!slot) {
      slot = std::make_shared<Replay>();
      first = true;
    }
    replay = slot;
    replay->last_use = ++plan.runtime->replay_clock;
    if (plan.runtime->replays.size() > PlanRuntime::max_replays) {  // forget the least recently used batch size
      auto oldest =
          std::min_element(plan.runtime->replays.begin(), plan.runtime->replays.end(),
                           [](const auto& a, const auto& b) { return a.second->last_use < b.second->last_use; });
      plan.runtime->replays.erase(oldest);
    }
  }
  // The buffers serve one call at a time: a call that finds them busy runs without them.
  std::unique_lock call(replay->mutex, std::defer_lock);
  if (first) {
    call.lock();
  } else if (!call.try_lock()) {
    return std::nullopt;
  }
  if (first) {
    if (record(plan, inputs, batch, be, *replay)) {
      ++plan.runtime->recordings;
    } else {  // this backend cannot record this plan: its buffers go, and later calls run directly
      plan.unrecordable = true;
      replay->arguments.clear();
      replay->placement.reset();
      std::lock_guard lock(plan.runtime->replays_mutex);
      plan.runtime->replays.erase(batch);
    }
  }
  if (!replay->recording) return std::nullopt;
  ++plan.runtime->replayed;
  std::vector<Tensor> results;
  try {
    copy_arguments(plan, inputs, batch, be, *replay);
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

// ------------------------------------------------------------------ running by chunks of examples

thread_local std::int64_t forced_chunk_examples = 0;  // JitChunkExamples

// Partials of the reductions over the batch, all chunks together, stay under this: chunks grow
// instead (a shared weight's gradient of 20 MB, say, times a thousand chunks would not fit).
constexpr std::int64_t max_partials_bytes = std::int64_t{32} << 20;
// A chunk larger than the cache (examples_per_chunk) holds at most this much per worker.
constexpr std::int64_t max_chunk_bytes = std::int64_t{64} << 20;
// The fixed cost of one kernel call in a chunk (its views and dispatch, whatever its examples; a loop's body's kernels
// once per step), as the memory traffic that takes as long (docs/performance.md, "What a chunk costs whatever its
// examples").
constexpr double kernel_call_bytes = 2 * 1024;

std::int64_t round_up(std::int64_t bytes) { return checked_add(bytes, 63, "jit", "the plan's memory") / 64 * 64; }

}  // namespace

// As many as its steps' data fits the cache, at least one.
std::int64_t sub_chunk_examples(const Plan& plan, const Plan::Segment& segment, std::int64_t chunk) {
  if (!segment.by_sub_chunks || segment.bytes_per_example <= 0) return chunk;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(plan.chunk_cache_bytes) / segment.bytes_per_example, 1,
                                  chunk);
}

// Examples per chunk for this call, or 0 for every step over the whole batch. It depends on the
// plan (and the cache it was built for), the batch size and JitChunkExamples, never on the number of threads.
//
// The size minimises estimated memory traffic per example. A chunk whose buffers fit in a core's
// cache keeps the values passed between its steps there: its traffic is what it reads and writes
// outside the arena (arguments, results), plus each large shared operand (an unbatched value a
// per-chunk kernel reads, over a quarter of the cache, which the chunk's own data evicts) streamed
// once per chunk. A larger chunk sends its values through memory (written and read: twice the
// arena) but streams the shared operands once for more examples, and a product of batched values by
// a shared matrix becomes one GEMM over the chunk. The larger size is the smallest whose shared
// traffic is at most an eighth of the rest, within max_chunk_bytes per worker; it is taken when its
// estimate is under three quarters of the cache-sized chunk's. Where it would hold the whole batch,
// the batch is split in two when the batch's own traffic outweighs one pass over the large shared operands, which
// bounds the split's extra traffic by half: results may not depend on the thread count, so the split cannot ask for
// it, and two chunks are the fewest that let a call run on more than one worker. (The second chunk's kernel calls do
// not count against the split: on two workers they run beside the first chunk's, where a second pass over a shared
// operand takes the memory bandwidth the cores share.) Every kernel call a chunk makes (a step's,
// and a loop's body's kernels once per loop step) costs as much whatever its examples: it counts as a shared read of
// kernel_call_bytes, so a plan of many small kernels over large examples (a loop storing its carries) runs them over
// many examples instead of over a cache-sized few. Values
// that only a segment run by sub-chunks makes and reads (split_into_segments) stay in the cache either way: they count
// in the cache-sized chunk's data, not in what a larger chunk sends through memory. A chosen chunk of the whole batch
// is still run as one chunk where a segment then runs by sub-chunks (a forced one, JitChunkExamples, runs the batch
// whole). Larger chunks are made equal: as many as hold the batch, each as large as the batch divided among them.
namespace {

// The cost model's chunk at this batch size (above); `larger`: whether the larger chunk was chosen.
std::int64_t chunk_by_traffic(const Plan& plan, std::int64_t batch, bool& larger) {
  larger = false;
  const std::size_t cache = plan.chunk_cache_bytes;
  const double arena = static_cast<double>(plan.arena_batched), io = static_cast<double>(plan.chunk_io_bytes);
  const double per_example = std::max(arena + static_cast<double>(plan.arena_local) + io, 1.0);
  const auto chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(cache) / per_example));
  double streamed = 0;  // the large shared operands' bytes, streamed once per chunk
  for (std::int64_t r : plan.shared_reads)
    if (large_shared_operand(r, cache)) streamed += static_cast<double>(r);
  const double shared = streamed + static_cast<double>(plan.kernel_calls_per_chunk) * kernel_call_bytes;
  if (shared == 0) return chunk;
  const double spilled = io + 2 * arena;
  double large = std::ceil(8 * shared / std::max(spilled, 1.0));
  const double examples = static_cast<double>(batch);
  large = std::min({large, std::max(1.0, static_cast<double>(max_chunk_bytes) / per_example), examples});
  if (large == examples && examples * spilled >= streamed) large = std::ceil(examples / 2);
  const double at_cache = io + shared / static_cast<double>(chunk), at_large = spilled + shared / large;
  larger = large > static_cast<double>(chunk) && at_large < 0.75 * at_cache;
  if (!larger) return chunk;
  // As many chunks as hold the batch, made equal: the same traffic, and workers that finish together.
  return static_cast<std::int64_t>(std::ceil(examples / std::ceil(examples / large)));
}

}  // namespace

bool larger_chunks_pay(const Plan& plan) {
  bool larger = false;
  if (plan.chunkable && plan.chunk_cache_bytes > 0) chunk_by_traffic(plan, std::int64_t{1} << 40, larger);
  return larger;
}

std::int64_t examples_per_chunk(const Plan& plan, std::int64_t batch) {
  if (!plan.chunkable || plan.chunk_cache_bytes == 0 || batch < 2) return 0;
  std::int64_t chunk = forced_chunk_examples;
  bool larger = false;
  if (chunk <= 0) chunk = chunk_by_traffic(plan, batch, larger);
  if (plan.partial_bytes > 0) {
    const std::int64_t most_chunks = std::max<std::int64_t>(1, max_partials_bytes / plan.partial_bytes);
    chunk = std::max(chunk, (batch + most_chunks - 1) / most_chunks);
  }
  if (chunk < batch) return chunk;
  if (forced_chunk_examples > 0) return 0;  // JitChunkExamples: a batch of at most n runs whole
  for (const Plan::Segment& segment : plan.segments)
    if (sub_chunk_examples(plan, segment, batch) < batch) return batch;
  return 0;
}

namespace {

// A chunk's data pointers: the call's (`call`), with batched values at the chunk's first example
// (arguments, constants and results) or in the worker's arena of `capacity` examples, and the
// reductions' results in the chunk's partials.
void place_chunk(const Plan& plan, const std::vector<void*>& call, std::int64_t first, std::int64_t capacity,
                 char* arena, char* partials, std::vector<void*>& data) {
  data = call;
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    const ValueBuffer& b = plan.buffers[v];
    if (b.root != static_cast<int>(v)) continue;
    if (plan.partial_offset[v] >= 0) {
      data[v] = partials + plan.partial_offset[v];
    } else if (!pv.batched || b.local) {  // a sub-chunk arena's value is placed by place_sub_chunk
      continue;
    } else if (pv.kind == PlanValue::Kind::computed && !b.output_buffer) {
      data[v] = arena + b.offset * capacity;
    } else if (call[v]) {
      data[v] = static_cast<char*>(call[v]) + first * pv.bytes();
    }
  }
  for (std::size_t i = plan.chunk_begin; i < plan.chunk_end; ++i) {
    const auto out = static_cast<std::size_t>(plan.steps[i].out);
    if (plan.steps[i].op->aliases_input) data[out] = data[static_cast<std::size_t>(plan.buffers[out].root)];
  }
}

// A sub-chunk's data pointers: the chunk's (`chunk`), with batched values at the sub-chunk's first example `first` of
// the chunk, and the sub-chunk arena's values in `local`, laid out for `capacity` examples.
void place_sub_chunk(const Plan& plan, const std::vector<void*>& chunk, std::int64_t first, std::int64_t capacity,
                     char* local, std::vector<void*>& data) {
  data = chunk;
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    const ValueBuffer& b = plan.buffers[v];
    if (b.root != static_cast<int>(v) || !pv.batched) continue;
    if (b.local) data[v] = local + b.offset * capacity;
    else if (chunk[v]) data[v] = static_cast<char*>(chunk[v]) + first * pv.bytes();
  }
  for (std::size_t i = plan.chunk_begin; i < plan.chunk_end; ++i) {
    const auto out = static_cast<std::size_t>(plan.steps[i].out);
    if (plan.steps[i].op->aliases_input) data[out] = data[static_cast<std::size_t>(plan.buffers[out].root)];
  }
}

// One chunk's steps, segment by segment: `examples` examples from the call's example `first_example`, with the chunk's
// data pointers. A segment run by sub-chunks (Plan::segments) runs its steps over each sub-chunk in turn; every
// sub-chunk runs up to its own failure, and the failure of the earliest step, then of the lowest sub-chunk, is raised,
// as a run over the whole chunk raises it. `at` is the failing step.
void run_chunk_steps(const Plan& plan, const std::vector<void*>& chunk, std::int64_t examples, Backend& be,
                     std::int64_t whole_batch, std::int64_t first_example, std::int64_t local_capacity, char* local,
                     std::vector<void*>& sub, std::size_t& at) {
  if (plan.segments.empty()) {
    run_steps(plan, plan.chunk_begin, plan.chunk_end, chunk, examples, be, whole_batch, first_example, &at);
    return;
  }
  for (const Plan::Segment& segment : plan.segments) {
    const std::int64_t per = sub_chunk_examples(plan, segment, examples);
    std::exception_ptr failure;
    std::size_t failure_step = 0;
    for (std::int64_t first = 0; first < examples; first += per) {
      std::size_t step = segment.first;
      try {
        place_sub_chunk(plan, chunk, first, local_capacity, local, sub);
        run_steps(plan, segment.first, segment.last, sub, std::min(per, examples - first), be, whole_batch,
                  first_example + first, &step);
      } catch (...) {
        if (!failure || step < failure_step) {
          failure = std::current_exception();
          failure_step = step;
        }
      }
    }
    if (failure) {
      at = failure_step;
      std::rethrow_exception(failure);
    }
  }
}

// The call by chunks of `chunk` examples (Plan::chunkable): the steps before the chunks once, then
// one parallel region whose threads take chunks in order from a counter, each running the batched
// steps over its chunk in an arena of its own, then the reductions' partials combined in chunk
// order, then the steps after the chunks. The arena: the unbatched buffers, every chunk's partials,
// and one batched arena of `chunk` examples per thread.
std::vector<Tensor> run_chunked(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch,
                                std::int64_t chunk, Backend& be) {
  const std::int64_t chunks = (batch + chunk - 1) / chunk;
  const int threads = omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
  const int workers = static_cast<int>(std::min<std::int64_t>(threads, chunks));
  const std::int64_t fixed = round_up(plan.arena_fixed);
  const std::int64_t partials = checked_mul(plan.partial_bytes, chunks, "jit", "the plan's memory");
  // A worker's arena: its chunk's batched values, then the sub-chunk arena for the largest sub-chunk.
  std::int64_t local_capacity = 0;
  for (const Plan::Segment& segment : plan.segments)
    if (segment.by_sub_chunks) local_capacity = std::max(local_capacity, sub_chunk_examples(plan, segment, chunk));
  const std::int64_t per_worker_chunk = round_up(checked_mul(plan.arena_batched, chunk, "jit", "the plan's memory"));
  const std::int64_t per_worker =
      checked_add(per_worker_chunk, round_up(checked_mul(plan.arena_local, local_capacity, "jit", "the plan's memory")),
                  "jit", "the plan's memory");
  const ArenaLease lease(
      plan, checked_add(checked_add(fixed, partials, "jit", "the plan's memory"),
                        checked_mul(per_worker, workers, "jit", "the plan's memory"), "jit", "the plan's memory"));
  const Placement p = place(
      plan, batch, lease.arena(),
      [&](int i) { return const_cast<void*>(inputs[static_cast<std::size_t>(i)].raw_data()); }, 0);
  char* const partial_base = static_cast<char*>(lease.arena()->data) + fixed;
  char* const worker_base = partial_base + partials;
  ++plan.runtime->chunked_calls;
  plan.runtime->chunk_examples = chunk;
  try {
    run_steps(plan, 0, plan.chunk_begin, p.data, batch, be);
    // No exception leaves the parallel region: each chunk's is kept with the step that raised it.
    // A whole-batch run raises at the first failing step, for its first failing example; so every
    // chunk runs (up to its own failure) and the failure of the earliest step, then of the lowest
    // chunk, is raised: the same error, whatever the chunks.
    std::atomic<std::int64_t> next{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    std::size_t failure_step = 0;
    std::int64_t failure_chunk = chunks;
    const auto work = [&](int worker) {
      std::vector<void*> data, sub;
      char* const arena = worker_base + per_worker * worker;
      for (;;) {
        const std::int64_t c = next.fetch_add(1);
        if (c >= chunks) return;
        const std::int64_t first = c * chunk;
        std::size_t step = plan.chunk_begin;
        try {
          place_chunk(plan, p.data, first, chunk, arena, partial_base + c * plan.partial_bytes, data);
          run_chunk_steps(plan, data, std::min(chunk, batch - first), be, batch, first, local_capacity,
                          arena + per_worker_chunk, sub, step);
        } catch (...) {
          const std::lock_guard lock(failure_mutex);
          if (!failure || step < failure_step || (step == failure_step && c < failure_chunk)) {
            failure = std::current_exception();
            failure_step = step;
            failure_chunk = c;
          }
        }
      }
    };
    if (workers == 1) {
      work(0);
    } else {
#pragma omp parallel num_threads(workers)
      work(omp_get_thread_num());
    }
    if (failure) std::rethrow_exception(failure);
    // The partials, combined in chunk order into each reduction's result.
    for (std::size_t i = plan.chunk_begin; i < plan.chunk_end; ++i) {
      const PlanStep& s = plan.steps[i];
      const auto v = static_cast<std::size_t>(s.out);
      const PlanValue& pv = plan.values[v];
      if (pv.batched || pv.bytes() == 0) continue;
      const auto bytes = static_cast<std::size_t>(pv.bytes());
      const View out = flat(pv.dtype, p.data[v], bytes);
      char* const partial = partial_base + plan.partial_offset[v];
      be.copy(flat(pv.dtype, partial, bytes), out);
      const BinaryKind combine = s.op->batch_partials == ReduceKind::max ? BinaryKind::maximum : BinaryKind::add;
      for (std::int64_t c = 1; c < chunks; ++c)
        // maximum(u, v) gives v on ties (+0 and -0): the earlier chunks' result goes second, so that
        // it wins them, as the whole-batch reduction keeps the first example's.
        be.binary(combine, flat(pv.dtype, partial + c * plan.partial_bytes, bytes), out, out);
    }
    run_steps(plan, plan.chunk_end, plan.steps.size(), p.data, batch, be);
  } catch (...) {
    be.raise_deferred();  // a failure deferred by an earlier step came first
    throw;
  }
  be.raise_deferred();
  return collect(plan, inputs, batch, [&](int root) { return p.owned[static_cast<std::size_t>(root)]; });
}

}  // namespace

// The bytes a call touches: its arena, arguments and results (Backend::records).
std::int64_t call_bytes(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch) {
  std::int64_t bytes = arena_bytes_at(plan, batch);
  for (const Tensor& t : inputs)
    bytes = checked_add(bytes, t.numel() * (t.is_batched() ? t.batch_size() : 1) * std::int64_t(size_of(t.dtype())),
                        "jit", "the plan's memory");
  for (int v : plan.outputs)
    bytes = checked_add(bytes, static_cast<std::int64_t>(bytes_at(plan.values[static_cast<std::size_t>(v)], batch)),
                        "jit", "the plan's memory");
  return bytes;
}

namespace {

// Whether a call of `plan` on these inputs is recorded and replayed: the backend records calls of its
// size (or `repeated` ones, a loop body's), and the plan neither holds a step that must run directly nor runs by
// forced chunks (JitChunkExamples, for a plan that may run by chunks). A loop body's plan runs inside one chunk of
// the plan that holds the loop, so forced chunks leave its recording alone: they are forced on the outer call, and a
// chunk's loop runs as it would on any thread (JitChunkExamples is the calling thread's, not its workers').
bool recorded_call(const Plan& plan, const std::vector<Tensor>& inputs, std::int64_t batch, Backend& be,
                   bool repeated) {
  const bool chunks_forced = !repeated && forced_chunk_examples > 0 && plan.chunk_cache_bytes > 0;
  return !plan.unrecordable && !chunks_forced && be.records(call_bytes(plan, inputs, batch), repeated);
}

}  // namespace

std::vector<Tensor> run_plan(const Plan& plan, const std::vector<Tensor>& inputs) {
  const std::int64_t batch = batch_of(plan, inputs);
  run_folds(plan);
  Backend& be = backend_for(plan.device);
  if (recorded_call(plan, inputs, batch, be, false))
    if (std::optional<std::vector<Tensor>> results = run_recorded(plan, inputs, batch, be)) return std::move(*results);
  if (const std::int64_t chunk = examples_per_chunk(plan, batch)) return run_chunked(plan, inputs, batch, chunk, be);
  return run_directly(plan, inputs, batch, be);
}

std::unique_ptr<RepeatedCall> RepeatedCall::make(std::shared_ptr<const Plan> plan, const std::vector<Tensor>& args) {
  const std::int64_t batch = batch_of(*plan, args);
  run_folds(*plan);
  Backend& be = backend_for(plan->device);
  if (!recorded_call(*plan, args, batch, be, true)) return nullptr;
  std::unique_ptr<RepeatedCall> call(new RepeatedCall());
  call->replay_ = std::make_shared<Replay>();
  if (!record(*plan, args, batch, be, *call->replay_)) return nullptr;
  copy_arguments(*plan, args, batch, be, *call->replay_);
  call->plan_ = std::move(plan);
  call->batch_ = batch;
  return call;
}

RepeatedCall::~RepeatedCall() = default;

bool RepeatedCall::serves(const Plan& plan, const std::vector<Tensor>& args) const {
  return &plan == plan_.get() && batch_of(plan, args) == batch_;
}

void RepeatedCall::take_arguments(const std::vector<Tensor>& args) {
  copy_arguments(*plan_, args, batch_, backend_for(plan_->device), *replay_);
}

void* RepeatedCall::argument(std::size_t i) const {
  return i < replay_->arguments.size() && replay_->arguments[i] ? replay_->arguments[i]->data : nullptr;
}

const void* RepeatedCall::result(std::size_t i) const {
  return replay_->placement->data[static_cast<std::size_t>(plan_->outputs[i])];
}

void RepeatedCall::run() {
  Backend& be = backend_for(plan_->device);
  try {
    replay_->recording->replay();
  } catch (...) {
    be.raise_deferred();
    throw;
  }
  be.raise_deferred();
}

std::string explain(const Plan& plan, const std::vector<Tensor>& inputs) {
  return explain_plan(plan, plan.runs_op_by_op.empty() ? batch_of(plan, inputs) : 0);
}

}  // namespace vt::detail

namespace vt {

JitChunkExamples::JitChunkExamples(std::int64_t examples) : previous_(detail::forced_chunk_examples) {
  if (examples < 0)
    fail("JitChunkExamples: examples per chunk must be positive (or 0, the backend's choice), got {}", examples);
  detail::forced_chunk_examples = examples;
}
JitChunkExamples::~JitChunkExamples() { detail::forced_chunk_examples = previous_; }
std::int64_t JitChunkExamples::active() { return detail::forced_chunk_examples; }

}  // namespace vt
