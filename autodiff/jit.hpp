#pragma once
/// @file
/// jit: traces a function once per cache key into a plan, then replays the plan.
///
/// The cache key holds each tensor argument's dtype, device, per-example shape and whether it is
/// batched -- never the batch size. Pass batched tensors (vt::as_batch, or results of vmap) and
/// every batch size runs the same plan: a new batch size never retraces. A plain tensor's whole
/// shape is in the key.
///
/// Batch sizes and retracing: jit(vmap(f))(X) with a plain [B, ...] X (the JAX habit) works and
/// equals vmap(f)(X): X's leading axis is the batch, fixed in that plan, and since B is part of X's
/// shape, which is in the key, each new B traces again (counters().traces shows it). Passing
/// as_batch(X) instead keeps B out of the trace, so one plan serves every B. A plan that fixes B
/// refuses batched arguments of another size, naming both, where they meet X's examples (as in
/// vmap(f)(X, batched)). A plan has one batch size: a function that also takes a batched (as_batch)
/// argument that never meets X's examples (free to have another size in eager code), or that maps
/// over plain tensors of two sizes (two vmaps), gets no plan: its calls run it op by op, with eager
/// code's results (explain says why); pass both batched, or both plain of one size, for a plan.
/// unbatch of a value computed from a plain
/// argument's as_batch traces (its B is known); of a batched argument's, it raises (B is not).
///
/// Tracing runs the function on symbolic tensors, which carry types but no values: reading values
/// (item, to_vector) or the batch size (batch_size) while tracing raises vt::Error, so a trace can
/// never depend on B. Tensors the function creates or captures become constants of the plan, with
/// the values they had when it was traced.
///
/// Ops whose inputs are all constants (captured tensors, or values computed from them only) are not
/// computed while tracing: the trace records them (vt::DeferConstantOps), so compiling costs the
/// same whatever the constants' sizes (an adjoint transposing a large captured matrix, say). The
/// plan folds them: they run once, on the plan's first call, and their values are kept with the plan
/// (PlanSummary::folded counts them; a failure among them, a constant that is not positive
/// definite, raises in that call and the next call tries again). Traced code that reads such a
/// value (item, to_vector) gets it computed then. The plan is the traced graph after
/// common-subexpression elimination, transposes read by a matmul folded into its GEMM flags
/// (x.t() is not copied), matmul reassociation ((P Q) Y -> P (Q Y) when Q's inner size
/// is small, the low-rank cotangents of cho_solve; exact in real arithmetic, so results may differ
/// from eager by rounding, and an Inf or overflow inside such a chain may come out as NaN), on the
/// CPU sums over symmetric matrices that add one triangle, the entries below the diagonal twice, with
/// scalings by one number moved out of them (equal to eager sums up to rounding, and a non-finite
/// factor may give NaN where eager gives +-Inf; docs/ARCHITECTURE.md, "The passes") and
/// dead-code elimination, in execution order, with a memory plan computed once in per-example
/// units: a batched buffer's offset is its per-example offset times B, so a call needs one arena
/// whatever B is (and a buffer per result, which outlives the call). The plan keeps the arenas of
/// finished calls: a call takes the smallest kept arena that fits its B, and only a B larger than any
/// before allocates (replacing the largest kept one), so the plan holds the largest arena each
/// concurrent call has needed; release_memory() hands them back (counters().arenas counts the
/// allocations). Calls may run concurrently, each in an arena of its own; tracing is serialised (the cache's counters
/// stay readable meanwhile; a function asking for its own plan while it is being traced raises). The machinery is in
/// autodiff/jit/: plan, passes, memory, execute, cache.
///
/// Composition: a jitted function called while another traces is inlined into that trace (so jitted
/// pieces compose, and a jitted function may call itself, its recursion ending on static shapes).
/// Inside grad, vjp or jvp, or on a tracked argument, it is one op whose plan runs and whose adjoint
/// and tangent run the plans of its pullback and jvp, each traced once per argument types
/// (detail::Function): grad(jit(f)) traces f once. Where the plan cannot serve as one op (it captured
/// a tensor a transform tracks, or its results are not floats of the float arguments' dtype,
/// batched where an argument is), it runs op by op, recorded for the gradient like an ordinary
/// function, with the tensors it captures as they are at that call.
#include <any>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grad.hpp"
#include "structure.hpp"

namespace vt {

struct JitCounters {
  std::int64_t calls = 0;
  std::int64_t traces = 0;      ///< cache misses: how often the function was traced and planned
  std::int64_t cache_hits = 0;  ///< calls that reused a plan
  double trace_ms = 0;          ///< total time spent tracing
  double plan_ms = 0;           ///< total time spent building plans
  /// Where the backend records a plan (a GPU: every plan; the CPU: plans of at most 64 KiB), it is
  /// recorded once per batch size and replayed:
  std::int64_t recordings = 0;  ///< batch sizes recorded
  std::int64_t replays = 0;     ///< calls that replayed a recording
  /// Arenas allocated for calls run step by step: a plan keeps the arenas of finished calls and
  /// reuses them, growing one only for a batch size larger than any before (see release_memory).
  std::int64_t arenas = 0;
  /// Calls run by chunks of examples (on the CPU: see JitChunkExamples), and the examples per chunk
  /// of the latest such call of any of the plans (0 when none ran by chunks).
  std::int64_t chunked_calls = 0;
  std::int64_t chunk_examples = 0;
};

/// On the CPU, a plan runs its batched steps by chunks of examples: the steps that depend on no
/// batched value run once, then one parallel region (OpenMP) in which each thread takes the next
/// chunk and runs every batched step over it, its per-example working set sized to a core's L2
/// (JitOptions::cache_bytes; at least one example; more when the batched steps read a large shared
/// operand, so that it streams once for many examples: docs/ARCHITECTURE.md, "Running a plan"), with
/// reductions over the batch (batch_sum, batch_mean, a shared parameter's gradient) writing a partial
/// per chunk that is combined in chunk order; then the steps that read those reductions. The chunks
/// depend on the batch size, the plan and the cache it was built for, never on the number of threads,
/// so results are identical whatever it is; they equal a whole-batch run's up to the rounding of the reductions' sums.
/// Memory is one chunk's per thread instead of the whole batch's. A plan runs whole-batch when a batched step reads a
/// reduction over the batch (centring by a batch mean, batch_max's gradient), when it fixes its batch size (vmap of a
/// plain argument), and on a GPU. An error names its example's index in the whole batch, the first failing one as a
/// whole-batch run would.
///
/// JitChunkExamples(n), while it lives, makes the plans this thread calls use chunks of n examples
/// (n > 0; a batch of at most n runs whole), where the backend runs by chunks; 0 restores the
/// backend's choice. Such a call runs step by step, not from a recording; the loops inside it still
/// replay their bodies' recordings, as any chunk's do. For tests and tuning.
class JitChunkExamples {
 public:
  explicit JitChunkExamples(std::int64_t examples);
  ~JitChunkExamples();
  JitChunkExamples(const JitChunkExamples&) = delete;
  JitChunkExamples& operator=(const JitChunkExamples&) = delete;
  static std::int64_t active();  ///< 0: the backend's choice

 private:
  std::int64_t previous_;
};

struct PlanSummary {
  std::int64_t traced_ops = 0;  ///< ops recorded by the trace
  std::int64_t steps = 0;       ///< steps of the plan, aliases included
  std::int64_t kernels = 0;     ///< steps that run a kernel
  std::int64_t constants = 0;
  std::int64_t folded = 0;       ///< steps on constants only: run on the plan's first call, then kept
  std::int64_t merged = 0;       ///< common subexpressions removed: equal steps, and captured numbers of equal bits
  std::int64_t fused = 0;        ///< elementwise steps run tile by tile in groups (CPU plans)
  std::int64_t fused_runs = 0;   ///< groups large enough to run by tiles: each reads and writes memory once a tile
  std::int64_t fused_lower = 0;  ///< of those, steps on symmetric matrices run over the lower triangle
  std::int64_t arena_bytes_per_example = 0;  ///< batched buffers: times B per call
  std::int64_t arena_bytes_fixed = 0;        ///< unbatched buffers
  /// The passes that changed the plan, in the order they ran (docs/ARCHITECTURE.md, "The passes").
  std::vector<std::string> passes;
  /// By the name of each pass that changed the plan: how many rewrites it made, as the pass counts one (a matmul
  /// chain reordered, a transpose read as a GEMM flag, a scaling moved out of a sum), or where it counts none the
  /// steps it made or changed.
  std::map<std::string, std::int64_t> rewrites;
  /// rewrites[pass], or 0 where the pass changed nothing.
  std::int64_t rewrites_by(const std::string& pass) const {
    const auto it = rewrites.find(pass);
    return it == rewrites.end() ? 0 : it->second;
  }
};

/// Options of one jitted function.
struct JitOptions {
  /// Passes to turn off ("-name") or on ("+name"), comma-separated, applied after those of the
  /// environment variable VTAPE_JIT_PASSES (read when a plan is built): to bisect a wrong result or
  /// a slow plan. An unknown name, or a stage every plan needs, raises when the function is traced.
  std::string passes = {};
  /// The cache, in bytes, that a chunk of examples is sized to fit (running by chunks, above): the
  /// planner's one input from the machine. 0: the environment variable VTAPE_JIT_CACHE_BYTES, else
  /// the backend's choice (the CPU: a core's L2). Each plan keeps the size it was built for (the
  /// variable is read when a plan is built), so its segments and chunks agree; a backend that runs
  /// no plan by chunks (a GPU) ignores it. Tests set it so that their plans do not depend on the
  /// host; tuning may too.
  std::size_t cache_bytes = 0;
};

namespace detail {

class Plan;

struct Traced {
  std::vector<Tensor> outputs;  // symbolic or constant
  std::any skeleton;            // the result's structure, tensors left undefined
};

struct CacheEntry {
  std::shared_ptr<const Plan> plan;
  std::any skeleton;
  PlanSummary summary;
  // The trace captured a tensor that a transform tracks (a grad on another thread, a vjp's output):
  // calls run the function op by op so that its gradient is recorded, never a plan constant's zero.
  bool runs_eagerly = false;
};

class JitCache {
 public:
  explicit JitCache(JitOptions options = {}) : options_(std::move(options)) {}
  using Tracer = std::function<Traced(const std::vector<Tensor>&)>;
  std::shared_ptr<const CacheEntry> get(const std::vector<Tensor>& inputs, const Tracer& trace, bool count_call);
  JitCounters counters() const;
  void release_memory();

 private:
  mutable std::mutex mutex_;  // entries_, counters_ and tracer_; never held while tracing
  std::mutex trace_mutex_;    // one trace at a time
  std::map<std::string, std::shared_ptr<const CacheEntry>> entries_;
  JitCounters counters_;
  std::thread::id tracer_;  // the thread tracing now, if any
  const JitOptions options_;
};

std::vector<Tensor> run_plan(const Plan& plan, const std::vector<Tensor>& inputs);

struct Replay;

// A plan called again and again on buffers of its own, where its backend records it (a loop's body at every step):
// the arguments are written into their buffers, the recording replays, the results are read where they are, and
// nothing is allocated per call (execute.cpp).
class RepeatedCall {
 public:
  // The plan recorded for these arguments, which its buffers then hold. Null where the backend would not
  // record the plan for arguments of these types: then it runs by run_plan.
  static std::unique_ptr<RepeatedCall> make(std::shared_ptr<const Plan> plan, const std::vector<Tensor>& args);
  ~RepeatedCall();
  // Whether this recording serves `plan` for arguments like these (their batch size), so that a later loop can take it
  // over by take_arguments instead of recording again.
  bool serves(const Plan& plan, const std::vector<Tensor>& args) const;
  void take_arguments(const std::vector<Tensor>& args);
  // Argument i's buffer (contiguous, over the call's batch when it is batched; null where the plan reads no
  // argument i) and result i's (read only).
  void* argument(std::size_t i) const;
  const void* result(std::size_t i) const;
  void run();

 private:
  RepeatedCall() = default;
  std::shared_ptr<const Plan> plan_;
  std::shared_ptr<Replay> replay_;
  std::int64_t batch_ = 0;
};
// The plan as text at the arguments' batch size (Jitted::explain).
std::string explain(const Plan& plan, const std::vector<Tensor>& inputs);

// A function as jit plans it, and as one op where a transform needs its derivatives (autodiff/jit/call.cpp): the op
// runs the function's plan, and its adjoint and tangent are ops of the same kind over the function's pullback and
// jvp, Functions of their own made on first use and kept here, so each is traced and planned once per argument types.
struct Function {
  FlatFunction code;                // the function on flat tensors: traced by `cache`, or run op by op
  std::shared_ptr<JitCache> cache;  // its plans
  std::mutex mutex;                 // guards the two below
  // By the scopes the function was called in (per example, in a vmap body: call.cpp's Context), which its
  // derivatives run its code in again.
  std::array<std::shared_ptr<Function>, 4> pullback, tangent;
};
// f's results on `args` as one op running `entry` (f's plan for them; looked up when null), or nullopt where a plan
// cannot serve as one op: the plan runs op by op (it captured a tracked tensor), or the results are not all floats of
// the float arguments' dtype, batched exactly where an argument is. The caller then runs f op by op.
std::optional<std::vector<Tensor>> call_as_op(const std::shared_ptr<Function>& f, const std::vector<Tensor>& args,
                                              std::shared_ptr<const CacheEntry> entry = nullptr);

// A function on flat tensors with its C++ types erased: calls the function at `f` (JittedCore's) on `args`, and gives
// its results flattened, with the structure that rebuilds them.
using ErasedTrace = Traced (*)(const void* f, const std::vector<Tensor>& args);

// Jitted<F>'s work that does not depend on F, compiled once (call.cpp) rather than in every file for every jitted
// function: the function (type-erased), its plans, and the function as one op by arity, shared by copies of a Jitted.
class JittedCore {
 public:
  JittedCore(std::shared_ptr<const void> f, JitOptions options);
  const void* f() const { return f_.get(); }
  // The plan for these arguments, traced by `trace` and planned on a miss.
  std::shared_ptr<const CacheEntry> lookup(const std::vector<Tensor>& args, ErasedTrace trace, bool count_call) const;
  // The function's flat results on `args` and the entry whose skeleton rebuilds them, or nullopt where the caller
  // must run the function op by op (jit.hpp's "Composition").
  using Results = std::pair<std::vector<Tensor>, std::shared_ptr<const CacheEntry>>;
  std::optional<Results> call(const std::vector<Tensor>& args, ErasedTrace trace) const;
  JitCounters counters() const { return cache_->counters(); }
  void release_memory() const { cache_->release_memory(); }

 private:
  std::shared_ptr<Function> function(std::size_t arity, ErasedTrace trace) const;  // made on first use

  std::shared_ptr<const void> f_;  // shared with the ops that call it (Function::code)
  std::shared_ptr<JitCache> cache_;
  mutable std::mutex mutex_;  // guards functions_
  mutable std::map<std::size_t, std::shared_ptr<Function>> functions_;
};

// True while a jit traces a function on this thread (or a loop records its body: autodiff/loops).
bool tracing();
struct TracingScope {
  TracingScope();
  ~TracingScope();
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;
};

}  // namespace detail

template <class F>
class Jitted {
 public:
  explicit Jitted(F f, JitOptions options = {})
      : core_(std::make_shared<detail::JittedCore>(std::shared_ptr<const void>(new F(std::move(f)), &destroy),
                                                   std::move(options))) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = decltype(f()(Tensor(args)...));
    if (auto out = core_->call({Tensor(args)...}, &trace<R, sizeof...(Args)>))
      return detail::rebuild(out->first, std::any_cast<const R&>(out->second->skeleton));
    return f()(args...);
  }

  /// Traces and plans for these arguments without running: what a call would compile.
  template <class... Args>
  PlanSummary compile(const Args&... args) const {
    using R = decltype(f()(Tensor(args)...));
    return core_->lookup({Tensor(args)...}, &trace<R, sizeof...(Args)>, false)->summary;
  }

  /// The plan these arguments run, as text to print: a header (steps, chunks at the arguments'
  /// batch size, arena bytes, the passes that changed the plan), then one line per step: its op,
  /// its inputs' and output's shapes (B: the batch axis), when it runs (once before the chunks,
  /// per chunk, once after, or folded: on the first call only), the fused run it is part of, its
  /// buffer (arena offset, a result's own buffer, or a view of another value), and the pass that
  /// made it. What to read when a model is slower than expected; traces as compile() does.
  template <class... Args>
  std::string explain(const Args&... args) const {
    using R = decltype(f()(Tensor(args)...));
    const std::vector<Tensor> in{Tensor(args)...};
    return detail::explain(*core_->lookup(in, &trace<R, sizeof...(Args)>, false)->plan, in);
  }

  JitCounters counters() const { return core_->counters(); }

  /// Hands back the memory the plans keep between calls (their arenas, and on a GPU their
  /// recordings); the next call allocates (and records) again. Plans and their folded constants stay.
  void release_memory() const { core_->release_memory(); }

 private:
  const F& f() const { return *static_cast<const F*>(core_->f()); }
  // A deleter common to every F's shared_ptr: one control block's type for all jitted functions.
  static void destroy(const void* f) { delete static_cast<const F*>(f); }

  // The function of N tensors returning an R, on flat tensors (detail::ErasedTrace).
  template <class R, std::size_t N>
  static detail::Traced trace(const void* f, const std::vector<Tensor>& args) {
    std::array<Tensor, N> a;
    std::copy(args.begin(), args.end(), a.begin());
    const R result = std::apply(*static_cast<const F*>(f), a);
    std::vector<Tensor> flat = detail::flatten(result);
    return detail::Traced{flat, std::any(detail::rebuild(std::vector<Tensor>(flat.size()), result))};
  }

  std::shared_ptr<detail::JittedCore> core_;  ///< shared by copies of this callable
};

template <class F>
Jitted<F> jit(F f, JitOptions options = {}) {
  return Jitted<F>(std::move(f), std::move(options));
}

}  // namespace vt

// A PlanSummary and JitCounters print one line per field: its name, its value and what it counts.
// (Left out of the API reference: doxygen cannot place a specialization of fmt's template.)
/// @cond
template <>
struct fmt::formatter<vt::PlanSummary> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  format_context::iterator format(const vt::PlanSummary& s, format_context& ctx) const;
};

template <>
struct fmt::formatter<vt::JitCounters> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  format_context::iterator format(const vt::JitCounters& c, format_context& ctx) const;
};
/// @endcond
