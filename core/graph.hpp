#pragma once
/// @file
/// The graph (the tape). Every op is described once by an OpDef: its shape rule, its forward
/// kernel dispatch and its adjoint. `apply` is the single entry point that runs an op: it checks
/// the inputs, infers the output type, runs the forward kernel (or, for symbolic inputs under jit,
/// only records), and records a Node when a gradient may flow through the result.
///
/// Nodes hold the per-example output type and never the batch size, so a recorded graph is the same
/// for every batch size.
///
/// Four descriptions of a value, from the most abstract to the most physical:
///
///     Tensor       what users hold: dtype, device, per-example shape, batching, storage, history.
///     ExampleType  dtype and per-example shape: what an op's shape rule sees (no batch, no data).
///     Operand      an ExampleType with its batching and its data pointer: an op's input or output
///                  as apply and jit's plan building see it (infer_output, kernel_views); B travels
///                  beside it.
///     View         the strided window a backend kernel reads or writes (core/view.hpp): the batch
///                  axis, when there is one, is an ordinary leading axis of stride 0 or one example.
/// (jit's plans describe their values as PlanValue, autodiff/jit/plan.hpp: an ExampleType, its
/// batching, and where the value comes from: an argument, a constant or a step.)
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "pointer_map.hpp"
#include "tensor.hpp"

namespace vt {

/// Static (non-tensor) arguments of an op (axes, flags, constants), packed as jit compares and
/// hashes them. Ops never index them by position: each op with attributes declares a struct of
/// named fields whose `fields()` ties them in order, and pack_attrs / unpack_attrs below are the one
/// place that converts. A field is an integer, bool or enum, a double, a Shape (or a std::vector<std::int64_t> of
/// axes) or a Device.
struct Attrs {
  /// A Shape for its inline storage: most ops' integers fit it, so that packing, copying and comparing them (every
  /// traced op, every plan step) allocates nothing.
  Shape ints;
  std::vector<double> reals;
  /// State that is not a number: a loop's body (autodiff/loops), compared by identity.
  std::shared_ptr<const void> object;
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

namespace attrs_detail {
template <class T>
concept IntLike = std::is_integral_v<T> || std::is_enum_v<T>;

template <IntLike T>
void put(Attrs& a, T v) {
  a.ints.push_back(static_cast<std::int64_t>(v));
}
inline void put(Attrs& a, double v) { a.reals.push_back(v); }
template <class List>  // a Shape or a list of axes: its length first
requires std::same_as<List, Shape> || std::same_as<List, std::vector<std::int64_t>>
void put(Attrs& a, const List& v) {
  a.ints.push_back(static_cast<std::int64_t>(v.size()));
  a.ints.insert(a.ints.end(), v.begin(), v.end());
}
inline void put(Attrs& a, Device d) {
  put(a, d.kind);
  put(a, d.index);
}

struct Reader {
  const Attrs& a;
  std::size_t i = 0, r = 0;
  template <IntLike T>
  void get(T& v) {
    v = static_cast<T>(a.ints.at(i++));
  }
  void get(double& v) { v = a.reals.at(r++); }
  template <class List>
  requires std::same_as<List, Shape> || std::same_as<List, std::vector<std::int64_t>>
  void get(List& v) {
    const auto n = static_cast<std::size_t>(a.ints.at(i++));
    v.assign(a.ints.begin() + static_cast<std::ptrdiff_t>(i), a.ints.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
  }
  void get(Device& d) {
    get(d.kind);
    get(d.index);
  }
};
}  // namespace attrs_detail

template <class Typed>
Attrs pack_attrs(Typed typed) {
  Attrs a;
  std::apply([&](const auto&... field) { (attrs_detail::put(a, field), ...); }, typed.fields());
  return a;
}

template <class Typed>
Typed unpack_attrs(const Attrs& a) {
  Typed typed{};
  attrs_detail::Reader reader{a};
  std::apply([&](auto&... field) { (reader.get(field), ...); }, typed.fields());
  return typed;
}

struct ExampleType {
  DType dtype;
  Shape shape;  ///< per example
};

/// An op's input or output as apply sees it (see the list at the top).
struct Operand {
  DType dtype;
  Shape shape;  ///< per example
  bool batched;
  void* data;
};

/// Arguments handed to a forward kernel. When `batched`, every view carries a leading batch axis
/// of size `batch` (stride 0 for unbatched inputs, which are broadcast, never copied).
struct KernelArgs {
  std::string_view op;  ///< for error messages
  Backend& backend;
  const std::vector<View>& in;
  const View& out;
  const Attrs& attrs;
  bool batched;
  std::int64_t batch;
  /// The examples [first_example, first_example + batch) of a call over whole_batch examples: a jit
  /// plan on the CPU runs its batched steps by chunks of examples. Ops that divide by the batch size
  /// (batch_mean) use whole_batch, and errors name an example by its index in the whole batch. An
  /// eager op or a whole-batch step has whole_batch == batch and first_example == 0.
  std::int64_t whole_batch = 0;
  std::int64_t first_example = 0;
  /// How many leading axes of the views are the batch's (0 or 1): a per-example axis d is view axis
  /// lead() + d.
  std::size_t lead() const { return batched ? 1 : 0; }
};

/// What an adjoint is told besides its node, the node's output and that output's cotangent.
struct AdjointContext {
  /// Whether input i wants a cotangent, so that work for constants is skipped.
  std::vector<bool> needs;
  /// An outer transform differentiates this backward pass: cotangents must be written with
  /// differentiable ops. When false, an adjoint may use faster kernels that have no adjoint.
  bool differentiated = true;
  /// The differentiated outputs are unbatched (a loss over the batch): the cotangent of an unbatched
  /// input that batched examples use is the sum of the examples' cotangents. An adjoint may then
  /// return that sum itself, unbatched (say, one GEMM over the batch), instead of one cotangent per
  /// example for the reverse sweep to sum.
  bool sums_over_batch = false;
  /// The tensors of the differentiated program that read the node's output, where its cotangent comes from (an
  /// undefined tensor among them: the output is itself one of the program's outputs, read whole). An adjoint may
  /// skip its work for the parts nothing reads; for a loop that work is harmful (a carry nothing reads meets 0 x inf
  /// in the body's derivative). Valid during the adjoint's call; null where not known: then every part is read.
  const std::function<std::vector<Tensor>(const Tensor&)>* readers = nullptr;
};

struct Node;

struct OpDef {
  std::string_view name;
  /// How many inputs the op takes, or any_inputs (concatenate, loops, a jitted call). infer_output refuses another
  /// count, naming the op, before its shape rule reads them; an op that a plan text may name (VT_REGISTER_OP) says.
  int inputs = undeclared_inputs;
  /// Output type from the per-example input types; raises vt::Error naming the op on bad input.
  ExampleType (*infer)(std::span<const ExampleType> in, const Attrs& attrs);
  void (*forward)(const KernelArgs& args);
  /// Cotangents of the inputs given the output and its cotangent, written with ordinary ops so that
  /// the backward pass is itself a recorded graph. An undefined Tensor means "no gradient".
  /// Null for ops that are not differentiable (gradients stop there).
  std::vector<Tensor> (*adjoint)(const Node& node, const Tensor& out, const Tensor& gout,
                                 const AdjointContext& context);
  /// The output's tangent given the node, its output and its inputs' tangents (one per input; an
  /// undefined one is zero, and at least one is defined), written with ordinary ops so that the
  /// forward sweep is itself a recorded graph (forward over reverse: hessian). Every op with an
  /// adjoint has one; ops without an adjoint carry no tangent either.
  Tensor (*tangent)(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents) = nullptr;
  /// Inputs whose dtype may differ from the first one's (casts); by default all must agree.
  bool mixed_dtypes = false;
  /// The output is input 0's storage seen with another shape (reshape, identity): no kernel runs.
  bool aliases_input = false;
  /// The output is unbatched although inputs are batched: the op reduces over the batch.
  bool reduces_batch = false;
  /// How a reduces_batch op's results over parts of the batch combine into its result over the whole
  /// batch (a jit plan runs them by chunks of examples and combines the chunks' results in order).
  ReduceKind batch_partials = ReduceKind::sum;
  /// The forward also works with the output in input 0's buffer (same size and batching), so a
  /// plan may reuse that buffer when input 0 dies here.
  bool in_place = false;
  /// Bit i set: the forward never reads input i's data (it is there for the adjoint or the type),
  /// so a plan need not keep that buffer alive for this use.
  std::uint32_t handle_inputs = 0;
  /// Bit i set: of input i's matrices (its last two axes), the forward reads only the lower triangle,
  /// diagonal included (a factorization's A, a solve's factor), on every backend: a plan may leave
  /// the strict upper triangle unwritten where every reader is so.
  std::uint32_t lower_triangle_inputs = 0;
  /// When set, the output lives on this device rather than the inputs' (to_device); the forward
  /// gets that device's backend.
  Device (*output_device)(const Attrs& attrs) = nullptr;
  /// The op accepts integer tensors (core/dtype.hpp lists which do). Every other op is for floats
  /// only: infer_output refuses integer inputs to it, naming the op and the dtype.
  bool integers = false;
  /// The op accepts boolean tensors (core/dtype.hpp lists which do: those that move data, where,
  /// comparisons); infer_output refuses them to every other op, naming it.
  bool booleans = false;
  /// Each output element depends only on the inputs' elements at the same (broadcast) position, and
  /// the forward works on any sub-block of the output with the inputs' matching views (maps, where,
  /// casts): jit may run a run of such steps tile by tile (autodiff/jit/fuse.cpp).
  bool elementwise = false;
  /// The forward talks to other processes (vt::mpi's all-reduce): it must run exactly once per
  /// call, on the calling thread, so a plan holding one is never recorded for replay. Its inputs
  /// are unbatched, so a chunked plan runs it before or after the chunks, never inside them.
  bool collective = false;
  /// The forward runs other ops on the host (a loop runs its body's plan once per step): a backend
  /// that records kernels for replay cannot capture it, so a plan holding one runs directly.
  bool runs_functions = false;
  /// For a runs_functions op: how many kernel calls one run makes (a scan: its steps times its body's kernels). Each
  /// costs a fixed overhead however many examples it covers, which jit's chunk cost model spreads over a chunk's
  /// examples (autodiff/jit/execute.cpp). Null: unknown (a while_loop's), counted as one.
  std::int64_t (*calls_per_run)(const Attrs& attrs) = nullptr;
  /// The op on other inputs, for ops that do not run through apply (as_batch and unbatch, whose
  /// batching apply's rule does not give): what replaying a recorded function (a loop's body) calls
  /// for their nodes. Null: apply.
  Tensor (*reapply)(const std::vector<Tensor>& inputs, const Attrs& attrs) = nullptr;

  static constexpr int any_inputs = -1;
  static constexpr int undeclared_inputs = -2;  // no check; register_op refuses it
};

/// The shape rule of ops whose output has input 0's type.
inline ExampleType same_type(std::span<const ExampleType> in, const Attrs&) { return in[0]; }

struct Node {
  const OpDef* op;
  Attrs attrs;
  std::vector<Tensor> inputs;
};

Tensor apply(const OpDef& op, std::vector<Tensor> inputs, Attrs attrs = {});

/// A recorded node's op run again on other inputs (replaying a recorded function): apply, or the
/// op's own `reapply`.
Tensor reapply(const Node& node, std::vector<Tensor> inputs);

/// Ops by name, for reading a plan back from text (jit's plan text, autodiff/jit/text.cpp): each op's file
/// registers it once (VT_REGISTER_OP) under a name unique among ops (its `name`, unless two ops share one) with
/// the names of its attributes' fields in the order of its `fields()`: "axis", a Shape as "axes[]", a DType as
/// "dtype:dtype", a Device as two integers. An op is found only if its file is linked into the program.
struct OpRegistration {
  const OpDef* op = nullptr;
  std::string_view name;
  std::string_view attr_names;  ///< space-separated; empty: no attributes, or printed as raw integers
};
bool register_op(const OpDef& op, std::string_view name, std::string_view attr_names = {});
/// By the registered name; null for a name no linked file registered.
const OpRegistration* registered_op(std::string_view name);
/// By identity; null for an op no file registered.
const OpRegistration* registration_of(const OpDef& op);
#define VT_REGISTER_OP_JOIN(a, b) a##b
#define VT_REGISTER_OP_NAME(a, b) VT_REGISTER_OP_JOIN(a, b)
/// At namespace scope beside the OpDef: VT_REGISTER_OP(matmul_op, "matmul", "transpose_a transpose_b ...").
#define VT_REGISTER_OP(op, ...)                                                         \
  [[maybe_unused]] static const bool VT_REGISTER_OP_NAME(vt_registered_, __COUNTER__) = \
      ::vt::register_op(op, __VA_ARGS__)

/// The output type and batching of `op` on inputs of these types; raises on bad input. Shared by
/// apply and by jit, so both see one set of rules.
Operand infer_output(const OpDef& op, std::span<const Operand> in, const Attrs& attrs);

/// The views a forward kernel gets for these operands: when any input is batched, every input view
/// has a leading batch axis of size `batch` (stride 0 for an unbatched input, broadcast without a
/// copy), and so does the output when it is batched. Apart from that axis's size and the data
/// pointers, they depend only on the operands' types and batching: jit computes them once per plan.
struct KernelViews {
  std::vector<View> in;
  View out;
  bool batched = false;  ///< any input is batched
};
KernelViews kernel_views(std::span<const Operand> in, const Operand& out, std::int64_t batch);

/// Runs op's forward kernel over these views (nothing runs for an empty output). Shared by apply and
/// jit plans. The views hold examples [first_example, first_example + batch) of whole_batch (-1: the
/// whole batch, `batch`).
void run_kernel(const OpDef& op, const Attrs& attrs, const KernelViews& views, std::int64_t batch, Backend& backend,
                std::int64_t whole_batch = -1, std::int64_t first_example = 0);

/// Outside vmap, a batched tensor is a batch of examples and a reduction over all of its axes
/// includes the batch. Inside vmap bodies and reverse sweeps every op is per example; this scope
/// (per thread) marks those regions.
class PerExampleScope {
 public:
  /// `on` false: ops are not per example while it lives (a function run as it was where it was called).
  explicit PerExampleScope(bool on = true);
  ~PerExampleScope();
  PerExampleScope(const PerExampleScope&) = delete;
  PerExampleScope& operator=(const PerExampleScope&) = delete;
  static bool active();

 private:
  bool previous_;
};

/// While jit traces (per thread), an op whose inputs are all concrete or deferred constants is not
/// computed: apply records it, and the result is a deferred tensor (TensorImpl::deferred) that the
/// plan computes on its first run, so tracing costs nothing proportional to the constants (an
/// adjoint transposing a captured matrix, say). Not deferred: ops on tensors a gradient tracks,
/// aliases of concrete tensors (free), transfers between devices, ops without inputs.
/// DeferConstantOps(false) suspends it (computing a deferred tensor's values, a plan's folding).
class DeferConstantOps {
 public:
  explicit DeferConstantOps(bool on = true);
  ~DeferConstantOps();
  DeferConstantOps(const DeferConstantOps&) = delete;
  DeferConstantOps& operator=(const DeferConstantOps&) = delete;
  static bool active();

 private:
  bool previous_;
};

/// Closure conversion for functions that an op calls (a loop's body, autodiff/loops): while a
/// CaptureScope lives on this thread, apply notes each result as made inside it (recording its node,
/// so that the function can be replayed on other inputs) and collects the
/// inputs that nothing inside it made: the tensors the function reads from outside. Scopes nest:
/// what an inner one's function makes counts as made for the outer ones too. SuspendCaptures hides
/// them (an op's kernel, which runs ops of its own, is not the function).
///
/// A scope given a `substitute` also replaces what the function reads from outside, when it is the
/// innermost scope: each such tensor x is read as substitute(x) (once per tensor; substitute runs in
/// the enclosing scopes, and may return x). cond's branches read their inputs masked by the
/// predicate this way (autodiff/loops.cpp).
class CaptureScope {
 public:
  using Substitute = std::function<Tensor(const Tensor&)>;
  explicit CaptureScope(Substitute substitute = nullptr);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
  /// The tensors read from outside, in the order first read.
  const std::vector<Tensor>& captured() const { return captured_; }
  /// What was made inside (by an op, or marked by made()), taken from the scope (which is left with none).
  PointerSet take_made_inside() { return std::move(made_); }
  /// Counts `t` as made inside (the function's arguments).
  void made(const Tensor& t);
  static CaptureScope* active();
  /// apply's hook, before an op runs on `inputs`: notes those read from outside, and substitutes them.
  void see(std::vector<Tensor>& inputs);
  /// The same for ops that do not run through apply (ops/batch's aliases), through the active scope if any: read()
  /// before making the result, wrote() after (whether a node must be recorded for the result).
  static void read(std::vector<Tensor>& inputs);
  static bool wrote(const Tensor& result);

 private:
  PointerSet made_;
  std::vector<Tensor> captured_;
  PointerSet captured_set_;
  Substitute substitute_;
  PointerMap<Tensor> substituted_;
  CaptureScope* previous_;
  friend class SuspendCaptures;
};

class SuspendCaptures {
 public:
  SuspendCaptures();
  ~SuspendCaptures();
  SuspendCaptures(const SuspendCaptures&) = delete;
  SuspendCaptures& operator=(const SuspendCaptures&) = delete;

 private:
  CaptureScope* previous_;
};

/// Counts, on this thread and while it lives, each op that `apply` runs or records, each adjoint
/// the reverse sweep calls and each tangent rule the forward sweep calls, by op name: what a
/// computation really did, observable.
class OpCounter {
 public:
  OpCounter();
  ~OpCounter();
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  int forward(std::string_view op) const;
  int adjoint(std::string_view op) const;
  int tangent(std::string_view op) const;
  std::map<std::string, int, std::less<>> forwards, adjoints, tangents;
  static OpCounter* active();

 private:
  OpCounter* previous_;
};

}  // namespace vt
