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
#include <string>
#include <string_view>
#include <vector>

#include "../../core/graph.hpp"
#include "../jit.hpp"

namespace vt::detail {

// The plan is in three parts, each with its own owner: the IR (PlanIR: values, steps, results), which the rewrites
// read and change and nothing else; the schedule (PlanSchedule: where every buffer lies, the kernels' views, the
// phases, segments and fused runs a call follows), which the scheduling stages set from the IR; and the run-time state
// (PlanRuntime: arenas, recordings, folded values, counters), which only the executor sees.

struct PlanValue {
  // folded: computed by a step on constants only, once, on the plan's first run (PlanIR::folds).
  enum class Kind { input, constant, computed, folded };
  PlanValue(Kind kind, DType dtype, Shape shape, bool batched)
      : kind(kind), dtype(dtype), shape(std::move(shape)), batched(batched) {}
  Kind kind;
  DType dtype;
  Shape shape;
  bool batched;
  int input = -1;     // Kind::input: the argument's index
  Tensor constant;    // Kind::constant
  int producer = -1;  // Kind::computed: the step; Kind::folded: the fold
  std::int64_t bytes() const { return numel(shape) * static_cast<std::int64_t>(size_of(dtype)); }
  // The value as an operand with no data yet, for the shape rules and the kernel views.
  Operand operand() const { return {dtype, shape, batched, nullptr}; }
};

struct PlanStep {
  const OpDef* op;
  Attrs attrs;
  std::vector<int> in;
  int out;
  // The pass that made this step, or last changed it (an index into plan_passes()); -1: the trace.
  int made_by = -1;
};

// What the rewrites read and change: the values, the steps in an order that runs them, and the results.
struct PlanIR {
  std::vector<PlanValue> values;
  std::vector<PlanStep> steps;
  std::vector<int> outputs;
  // Steps on constants only (captured tensors, and what the trace deferred from them), taken out of `steps`
  // (fold_constants): they run once, on the plan's first call (run_folds), and their values are kept with the plan's
  // run-time state, by plan value, for every later call.
  std::vector<PlanStep> folds;
  Device device;
  // The batch size, when a step fixes it (vmap or as_batch of a plain argument), else -1: every call.
  std::int64_t fixed_batch = -1;
  // Why the plan cannot serve the function, whose calls then run it op by op (the pipeline stops there); empty: it
  // runs. A plan has one batch size, where the function maps over plain tensors of two sizes.
  std::string runs_op_by_op;
  PlanSummary summary;
  // The pass of plan_passes() running now (count_rewrite), or -1.
  int running_pass = -1;
  // Rewrites counted so far, by every pass (count_rewrite): run_passes looks for changed steps only after a pass that
  // counted one.
  std::int64_t rewrites_counted = 0;
};

// Where a value's data lies (plan_memory), by plan value.
struct ValueBuffer {
  int root = -1;               // the value whose buffer this one is (itself, unless made by an aliasing op)
  bool output_buffer = false;  // the buffer belongs to a result: allocated per call, outside the arena
  std::int64_t offset = -1;    // in its arena, in bytes (per example when batched)
  // In the sub-chunk arena: a batched value that only the steps of one segment run by sub-chunks make and read
  // (PlanSchedule::segments), so that a sub-chunk's values stay in cache, reused by the next sub-chunk.
  bool local = false;
};

// A run of consecutive elementwise steps [first, last) whose outputs have one shape and batching,
// run tile by tile (autodiff/jit/fuse.hpp) so that each tile's inputs and intermediates stay in
// cache between the steps.
// A run may include sums of its values to one value per example, added tile by tile in the CPU
// reduce kernel's order, and runs of one shape separated by a few unrelated steps are merged into
// one (those steps run before the tiles or after them), so that the values they share are read
// from memory once per tile. A step whose output only the tiled steps read (`slot` >= 0) writes it to a
// tile-sized scratch slot instead of its buffer, so that it never reaches memory.
struct FusedGroup {
  int first = 0, last = 0;
  std::vector<int> tiled;   // steps run tile by tile, in order: elementwise steps, and sums of their values
  std::vector<int> before;  // steps of [first, last) that no tiled step feeds, run before the tiles, in order
  std::vector<int> after;   // the other steps of [first, last), run after the tiles, in order
  std::vector<int> slot;    // by entry of `tiled`: its output's scratch slot, or -1
  int slots = 0;
  std::size_t slot_bytes = 0;    // per slot
  DType sum_dtype = DType::f64;  // the sums' (one for all)
  bool has_sum = false;
  // Every value of the run is, example by example, an exactly symmetric matrix: the tiles cover the
  // lower triangle, the sums add it with the entries below the diagonal twice, and `mirrored` (by
  // entry of `tiled`) outputs, which something else reads whole, are copied above the diagonal (fuse.cpp).
  bool lower_triangle = false;
  std::vector<bool> mirrored;
};

// One batch size's recorded call (autodiff/jit/execute.cpp).
struct Replay;
// What calls of a plan keep and count (autodiff/jit/execute.cpp).
struct PlanRuntime;

// How a call runs the IR, set by the scheduling stages of the pipeline (find_batch_size on): the buffers, the
// kernels' views, the phases of running by chunks, the segments and the fused runs.
struct PlanSchedule {
  // By plan value (plan_memory; empty before it).
  std::vector<ValueBuffer> buffers;
  // By step: the kernel's views, computed once (precompute_views; steps that alias run no kernel and leave them
  // empty): data pointers are null and a leading batch axis has size 0 until a call sets its arguments' pointers and
  // its batch size.
  std::vector<KernelViews> views;
  std::int64_t arena_batched = 0, arena_fixed = 0;
  // Whether precompute_views has set every step's views, and whether plan_memory's layout is that of the steps as they
  // are (split_into_segments plans the memory for its cost model, then changes what the layout depends on).
  bool views_computed = false, memory_planned = false;
  // Groups of steps run tile by tile (fuse_elementwise), and by step the group starting there or -1
  // (empty when there are none).
  std::vector<FusedGroup> fused;
  std::vector<int> fused_at;
  int group_starting_at(std::size_t step) const { return step < fused_at.size() ? fused_at[step] : -1; }

  // The cache, in bytes, that a chunk's working set is sized to fit, fixed when the plan is built (build_plan:
  // JitOptions::cache_bytes, VTAPE_JIT_CACHE_BYTES or the backend's chunk_cache_bytes()), so that its segments and the
  // chunks of its calls are sized for one cache. 0: every call runs over the whole batch (a GPU).
  std::size_t chunk_cache_bytes = 0;
  // Running by chunks of examples (execute.cpp), where chunk_cache_bytes is not 0:
  // steps [0, chunk_begin) are unbatched and read no batched value, and run once, first;
  // [chunk_begin, chunk_end) are the batched steps and the reductions over the batch that read
  // them, and run per chunk, a reduction writing its chunk's partial result (the partials are
  // combined in chunk order); [chunk_end, steps.size()) read reductions' results and run once, last.
  // order_for_chunks sets them; chunkable is false (every step over the whole batch) when a batched
  // step reads a reduction's result (centring by a batch mean, batch_max's adjoint), when the plan
  // fixes its batch size, or when nothing is batched.
  bool chunkable = false;
  std::size_t chunk_begin = 0, chunk_end = 0;
  // Set by plan_memory for a chunkable plan: each reduction result's offset in a chunk's partials
  // (by plan value, -1 for others), the partials' bytes per chunk, and the per-example bytes of the
  // batched values outside the arena that a chunk reads or writes (arguments, constants, results).
  std::vector<std::int64_t> partial_offset;
  std::int64_t partial_bytes = 0, chunk_io_bytes = 0;
  // The bytes of each read of an unbatched value by a per-chunk kernel (a shared operand), for the chunk size's cost
  // model (examples_per_chunk).
  std::vector<std::int64_t> shared_reads;
  // The kernel calls that every chunk makes, each at a fixed cost however many examples it covers, for the same model:
  // one per step that runs a kernel, and a loop's calls of its body's kernels (OpDef::calls_per_run).
  std::int64_t kernel_calls_per_chunk = 0;
  // The per-chunk steps in segments, in order, covering [chunk_begin, chunk_end) (split_into_segments); empty: one
  // segment. A segment run by sub-chunks reads no large shared operand and reduces nothing over the batch, so a chunk
  // made larger than the cache for a large shared operand's sake runs its steps by sub-chunks of examples that fit the
  // cache, one after another (execute.cpp); `bytes_per_example` is what its steps read and write per example.
  struct Segment {
    std::size_t first = 0, last = 0;
    bool by_sub_chunks = false;
    std::int64_t bytes_per_example = 0;
  };
  std::vector<Segment> segments;
  // Whether a step starts a phase of running by chunks or a segment: no fused run crosses it.
  bool starts_segment(std::size_t step) const {
    if (step == chunk_begin || step == chunk_end) return true;
    for (const Segment& s : segments)
      if (s.first == step) return true;
    return false;
  }
  // The sub-chunk arena's bytes per example (ValueBuffer::local), laid out for as many examples as the largest
  // sub-chunk of a call.
  std::int64_t arena_local = 0;
};

class Plan : public PlanIR, public PlanSchedule {
 public:
  // Run directly, never recorded: the plan holds a collective or a loop (find_batch_size), or the backend failed to
  // record it once (execute.cpp).
  mutable std::atomic<bool> unrecordable{false};

  // What calls of the plan keep and count, owned by the executor (execute.cpp): the folded values, the idle arenas,
  // the recordings by batch size, the counters. Passes never see it; every plan starts with an empty one.
  const std::unique_ptr<PlanRuntime> runtime;
  Plan();  // execute.cpp, where PlanRuntime is complete
  ~Plan();
};

// What makes two steps compute the same value: their op, attributes and inputs (common subexpressions). Real
// attributes compare by their bits: 0 and -0 scale differently, and a NaN attribute is its own.
bool same_computation(const PlanStep& a, const PlanStep& b);
std::uint64_t computation_hash(const PlanStep& s);
// The steps of a list seen so far, by what they compute: the first of each computation, found by its hash in one
// array (no allocation per step).
class CommonSteps {
 public:
  // An earlier step of `steps` seen here that computes what steps[i] computes, or -1, and then steps[i] is seen. The
  // steps seen must not change meanwhile.
  int find_or_add(const std::vector<PlanStep>& steps, int i);

 private:
  struct Slot {
    std::uint64_t hash = 0;
    int step = -1;  // -1: empty
  };
  std::vector<Slot> slots_;  // a power of two of them, at most half full
  std::size_t size_ = 0;
};

// graph -> steps, with common subexpressions merged; then the pipeline of plan_passes(), with the passes that
// VTAPE_JIT_PASSES and then JitOptions::passes turn off or on, for the cache of JitOptions::cache_bytes
// (Plan::chunk_cache_bytes).
std::shared_ptr<const Plan> build_plan(const std::vector<Tensor>& symbolic_inputs, const Traced& traced,
                                       PlanSummary& summary, const JitOptions& options = {});

// Where a pass runs: on every device's plans, or on CPU plans only (what it relies on is the CPU backend's kernels).
// The pipeline enforces it; a pass does not check the device itself.
enum class PassScope { every_device, cpu };

// One stage of build_plan's pipeline, one row of plan_passes()'s table: a rewrite, which reads and changes the IR only,
// or a scheduling stage, which sets the schedule from the IR (and may reorder steps). The rewrites state the identity
// they rely on where they are defined (passes.cpp, products.cpp, symmetry.cpp) and keep the plan's results up to
// rounding, so any optional stage may be turned off ("-name") to bisect a wrong result or a slow plan; the stages that
// are not optional are what a plan needs to run.
struct Pass {
  const char* name;
  void (*rewrite)(PlanIR&) = nullptr;  // one of the two
  void (*schedule)(Plan&) = nullptr;
  PassScope scope = PassScope::every_device;
  bool optional = true;
  const char* rule = "";  // one line, for the docs
  void run(Plan& plan) const { rewrite ? rewrite(plan) : schedule(plan); }
};
// The pipeline, in the order build_plan runs it (plan.cpp).
const std::vector<Pass>& plan_passes();
// The table as markdown, one row per stage (name, optional, devices, rule): docs/ARCHITECTURE.md's list of the
// stages, which a test keeps equal to it (and rewrites with VTAPE_UPDATE_DOCS=1).
std::string pass_table_markdown();
// Which passes of plan_passes() run (by index) under a selection such as "-reassociate_matmuls,+name", applied to
// `enabled`; raises for an unknown name or a pass that cannot be turned off.
void select_passes(const std::string& selection, std::vector<bool>& enabled, const char* where);

// The plan as text, one line per step (Jitted::explain), at this batch size (0: unbatched arguments).
std::string explain_plan(const Plan& plan, std::int64_t batch);

// The whole plan as text (autodiff/jit/text.cpp): every value that no step makes, every fold and step with its
// attributes by name and its type, the memory layout and schedule where the pipeline has set them, the results.
// parse_plan reads it back (plan_text(parse_plan(plan_text(p))) == plan_text(p)), taking the data of constants
// written as <elided> (large, batched or on a device) from `constants`, by value index; it raises naming the line
// for text it cannot read, and cannot read a step holding a function (a loop's body). The run-time state (arenas,
// recordings, folded values) is not part of it.
std::string plan_text(const Plan& plan);
std::shared_ptr<Plan> parse_plan(std::string_view text, const std::map<int, Tensor>& constants = {});
// A value's dtype and shape as plan_text writes them, B first for a batched one ("float64[B,3,3]").
std::string type_text(const PlanValue& v);
// A step's op and its attributes by name, as plan_text writes them ("matmul transpose_a=0 ...").
std::string step_text(const Plan& plan, const PlanStep& step);

// Checks what every pass must leave right (autodiff/jit/verify.cpp) and raises std::logic_error naming `after` (the
// pass just run) and the first thing wrong: every value made by one step or fold, which its producer names; no step
// reading a value before a step makes it; each step's output type what its op's shape rule gives; results defined;
// a product marked symmetric square, and a mark that leaves an upper triangle unwritten only where no reader reads
// it; once the memory is planned, every arena buffer inside its arena and disjoint from every buffer alive at the
// same step; once the runs are fused, each run's steps exactly its range, run in an order that makes every input
// before its reader, and its scratch slots read by its own later tiles only. build_plan runs it after every pass where
// VTAPE_JIT_VERIFY is set (not "0"), and always in builds without NDEBUG.
void verify_plan(const Plan& plan, std::string_view after);
// Whether run_passes verifies after every pass (VTAPE_JIT_VERIFY, or a debug build).
bool verify_after_passes();
// One more rewrite by the pass running now, in PlanSummary::rewrites under its name: each pass counts what one rewrite
// is for it. A pass that adds or changes a step counts (run_passes looks for the steps it made only then, and fails
// where plans are verified and one did not); one that only drops or reorders steps need not, and is counted once
// where it changed the plan.
void count_rewrite(PlanIR& plan);
// Runs one pass of plan_passes() by name on a plan (tests, and a plan read from text); raises for an unknown name.
void run_pass(Plan& plan, std::string_view name);

// What every kernel step's views are for any batch size, with no data: a call patches the pointers and the batch
// axis's size instead of recomputing strides and allocating per step.
void precompute_views(Plan& plan);
// By value: some step, fold or result reads more of it than its lower triangle, aliases of one shape passing their
// readers' needs on (mark_lower_only_outputs).
std::vector<bool> values_read_whole(const PlanIR& plan);
// What a plan's calls counted (JitCounters), and handing back the memory they keep (Jitted::release_memory).
struct PlanRuntimeCounts {
  std::int64_t arenas = 0, chunked_calls = 0, chunk_examples = 0, recordings = 0, replayed = 0;
};
PlanRuntimeCounts runtime_counts(const Plan& plan);
void release_memory(const Plan& plan);
// Examples per chunk for a call at this batch size, or 0: every step over the whole batch (execute.cpp).
std::int64_t examples_per_chunk(const Plan& plan, std::int64_t batch);
// Whether a chunk larger than the cache pays for this plan at a large enough batch size: it reads a large shared
// operand (execute.cpp).
bool larger_chunks_pay(const Plan& plan);
// Examples per sub-chunk of one of the plan's segments in chunks of `chunk` examples (execute.cpp).
std::int64_t sub_chunk_examples(const Plan& plan, const Plan::Segment& segment, std::int64_t chunk);

// The passes over a built plan (autodiff/jit/passes.cpp, products.cpp, symmetry.cpp), in the order build_plan runs
// them.
void fold_transposes_into_matmuls(PlanIR& plan);
void fold_broadcasts_into_elementwise(PlanIR& plan);
void take_indicator_products(PlanIR& plan);
void reassociate_matmuls(PlanIR& plan);
void mark_symmetric_products(PlanIR& plan);
void fold_diagonal_adds(PlanIR& plan);
void scale_repeated_solves(PlanIR& plan);
void contract_low_rank_row_sums(PlanIR& plan);
void move_scalings_out_of_symmetric_sums(PlanIR& plan);
void merge_common_steps(PlanIR& plan);
void eliminate_dead_steps(PlanIR& plan);
void mark_lower_only_outputs(PlanIR& plan);
// CPU plans compute a fused run whose values are all symmetric matrices of at least this order over their lower
// triangle (fuse.cpp), and move scalings out of such matrices' sums (move_scalings_out_of_symmetric_sums): the order
// from which one triangle is no slower than the whole matrix, as for the symmetric product's blocks
// (docs/performance.md, "Which runs go by the lower triangle").
constexpr std::int64_t min_lower_triangle_order = 192;

// Which values are, example by example, exactly symmetric square matrices on the CPU backend: captured matrices that
// equal their transpose bit for bit (compared once, up to 2^20 elements); the results of elementwise steps (folded or
// not) on such matrices and on one number per example; matrix transposes of such values; products marked symmetric
// and not lower_only, and cholesky_inverse's (L L^T)^-1, which the CPU backend mirrors. Memoised: a value's answer is
// computed once, on demand; a pass that rewrites steps may keep asking only where a rewrite cannot change an answer
// (moving a scaling does not).
class Symmetry {
 public:
  explicit Symmetry(PlanIR& plan) : plan_(plan) {}
  bool operator()(int v);

 private:
  PlanIR& plan_;
  std::vector<signed char> memo_;  // by value: -1 not known yet
};

// Whether step s reads no more of its input k than the lower triangle (OpDef::lower_triangle_inputs:
// a Cholesky factorization's matrix, a solve's factor), or only holds it as a handle (cho_solve's A).
bool reads_lower_triangle_only(const PlanStep& s, std::size_t k);
void fold_constants(PlanIR& plan);
// What the passes read of captured tensors' values (autodiff/jit/constants.cpp), each answer read once per tensor and
// kept with its storage while it lives, so that building a plan again over the same data does not read it again.
// Whether captured tensors x and y hold the same bits (transposed: y = x^T, matrix by matrix); false
// for anything else, and for constants of more than most_elements elements (comparing costs compile
// time).
bool same_constant_values(const PlanIR& plan, int x, int y, bool transposed, std::int64_t most_elements);
// A captured square matrix equal to its transpose bit for bit (up to 2^20 elements).
bool symmetric_constant(const PlanValue& v);
// A captured square matrix, or a stack of them, zero (+0 or -0) off the diagonal (up to 2^18 elements).
bool diagonal_constant(const PlanValue& v);
// A captured floating tensor of ones (up to 2^18 elements).
bool ones_constant(const PlanValue& v);
// For a captured matrix whose row r is 0 but for one 1, in column c_r: the columns c; empty for any other (up to 2^24
// elements).
std::vector<std::int64_t> indicator_columns(const PlanValue& v);
// Orders the steps as running by chunks needs them and sets Plan::chunkable and its phases; after
// fold_constants, before the memory plan (whose lifetimes follow the step order).
void order_for_chunks(Plan& plan);

// Splits the per-chunk steps of a CPU plan that reads a large shared operand into segments (Plan::segments); after
// order_for_chunks, before the memory plan, which keeps a segment's own values in the sub-chunk arena.
void split_into_segments(Plan& plan);
// Whether a per-chunk read of an unbatched value of these bytes streams it from memory for each chunk: it is over a
// quarter of the cache that a chunk's own data fills (examples_per_chunk).
inline bool large_shared_operand(std::int64_t bytes, std::size_t cache) {
  return static_cast<std::size_t>(bytes) > cache / 4;
}
// Every value's root buffer and arena offset, and the arenas' sizes (autodiff/jit/memory.cpp).
// A buffer's bytes in an arena: its own, rounded up to the arenas' alignment.
std::int64_t aligned(std::int64_t bytes);
void plan_memory(Plan& plan);

// Groups runs of elementwise steps of a CPU plan (autodiff/jit/fuse_groups.cpp), after plan_memory: a run
// ends where running it tile by tile could overwrite a buffer that a later tile still reads.
void fuse_elementwise(Plan& plan);
// Runs one group's steps for one call, tile by tile, with the call's data pointers (by plan value).
void run_fused_group(const Plan& plan, const FusedGroup& group, const std::vector<void*>& data, std::int64_t batch,
                     Backend& be);

}  // namespace vt::detail
