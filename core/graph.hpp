#pragma once
// The graph (the tape). Every op is described once by an OpDef: its shape rule, its forward
// kernel dispatch and its adjoint. `apply` is the single entry point that runs an op: it checks
// the inputs, infers the output type, runs the forward kernel (or, for symbolic inputs under jit,
// only records), and records a Node when a gradient may flow through the result.
//
// Nodes hold the per-example output type and never the batch size, so a recorded graph is the same
// for every batch size.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "tensor.hpp"

namespace vt {

// Static (non-tensor) arguments of an op: axes, flags, constants. Compared and hashed by jit.
struct Attrs {
  std::vector<std::int64_t> ints;
  std::vector<double> reals;
  friend bool operator==(const Attrs&, const Attrs&) = default;
};

struct TypeInfo {
  DType dtype;
  Shape shape;  // per example
};

// Arguments handed to a forward kernel. When `batched`, every view carries a leading batch axis
// of size `batch` (stride 0 for unbatched inputs, which are broadcast, never copied).
struct KernelArgs {
  std::string_view op;  // for error messages
  Backend& backend;
  const std::vector<View>& in;
  const View& out;
  const Attrs& attrs;
  bool batched;
  std::int64_t batch;
};

struct Node;

struct OpDef {
  std::string_view name;
  // Output type from the per-example input types; raises vt::Error naming the op on bad input.
  TypeInfo (*infer)(const std::vector<TypeInfo>& in, const Attrs& attrs);
  void (*forward)(const KernelArgs& args);
  // Cotangents of the inputs given the output and its cotangent, written with ordinary ops so that
  // the backward pass is itself a recorded graph. An undefined Tensor means "no gradient".
  // Null for ops that are not differentiable (gradients stop there).
  // `needs[i]` says whether input i wants a cotangent, so that work for constants is skipped.
  std::vector<Tensor> (*adjoint)(const Node& node, const Tensor& out, const Tensor& gout,
                                 const std::vector<bool>& needs);
  // Inputs whose dtype may differ from the first one's (casts); by default all must agree.
  bool mixed_dtypes = false;
  // The output is input 0's storage seen with another shape (reshape, identity): no kernel runs.
  bool aliases_input = false;
  // The output is unbatched although inputs are batched: the op reduces over the batch.
  bool reduces_batch = false;
  // The forward also works with the output in input 0's buffer (same size and batching), so a
  // plan may reuse that buffer when input 0 dies here.
  bool in_place = false;
  // Bit i set: the forward never reads input i's data (it is there for the adjoint or the type),
  // so a plan need not keep that buffer alive for this use.
  std::uint32_t handle_inputs = 0;
  // The output lives on the device given by attrs.ints[0] (kind) and ints[1] (index), not on the
  // inputs' device (to_device); the forward gets that device's backend.
  bool moves_device = false;
};

struct Node {
  const OpDef* op;
  Attrs attrs;
  std::vector<Tensor> inputs;
};

Tensor apply(const OpDef& op, std::vector<Tensor> inputs, Attrs attrs = {});

// What a kernel sees of a tensor or of a plan's buffer: dtype, per-example shape, batching, data.
struct Value {
  DType dtype;
  Shape shape;
  bool batched;
  void* data;
};

// The output type and batching of `op` on inputs of these types; raises on bad input. Shared by
// apply and by jit, so both see one set of rules.
Value infer_output(const OpDef& op, const std::vector<Value>& in, const Attrs& attrs);

// Runs op's forward kernel: `batch` is B when any input is batched. Shared by apply and jit plans.
void run_forward(const OpDef& op, const Attrs& attrs, const std::vector<Value>& in, const Value& out,
                 std::int64_t batch, Backend& backend);

// Outside vmap, a batched tensor is a batch of examples and a reduction over all of its axes
// includes the batch. Inside vmap bodies and reverse sweeps every op is per example; this scope
// (per thread) marks those regions.
class PerExampleScope {
 public:
  PerExampleScope();
  ~PerExampleScope();
  PerExampleScope(const PerExampleScope&) = delete;
  PerExampleScope& operator=(const PerExampleScope&) = delete;
  static bool active();

 private:
  bool previous_;
};

// Counts, on this thread and while it lives, each op that `apply` runs or records and each
// adjoint the reverse sweep calls, by op name: what a computation really did, observable.
class OpCounter {
 public:
  OpCounter();
  ~OpCounter();
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  int forward(std::string_view op) const;
  int adjoint(std::string_view op) const;
  std::map<std::string, int, std::less<>> forwards, adjoints;
  static OpCounter* active();

 private:
  OpCounter* previous_;
};

// `in` broadcast (stride 0) to the physical shape of `out`, numpy-style on the per-example axes;
// the leading batch axis, present in both when `batched`, is matched as it is.
View expand_view(const View& in, const View& out, bool batched);

// `v` with its shape replaced by `shape` (same element count, contiguous).
View reshaped_view(const View& v, const Shape& shape);

}  // namespace vt
