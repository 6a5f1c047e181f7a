// A jitted function as one op (jit.hpp, detail::Function): called where a transform needs its derivatives, its plan
// runs as one op whose results are packed into one vector, and whose adjoint and tangent are ops of the same kind over
// the function's pullback and jvp, Functions of their own, each traced and planned once per argument types and kept
// with the function that made them: a second call traces nothing, to any order.
#include <optional>

#include "../../ops/creation.hpp"
#include "../../ops/indexing.hpp"
#include "../../ops/layout.hpp"
#include "../jit.hpp"
#include "../kernel_tensors.hpp"
#include "../vmap.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

// The scopes a function's code reads (reductions over all axes exclude the batch per example; a vmap in a vmap body
// maps by a loop): its derivatives run its code in those of its call, not in those of the sweep that differentiates.
struct Context {
  bool per_example, vmap_body;
  static Context now() { return {PerExampleScope::active(), in_vmap_body()}; }
  std::size_t index() const { return (per_example ? 2 : 0) + (vmap_body ? 1 : 0); }
};

std::vector<Tensor> run_in(const FlatFunction& f, const std::vector<Tensor>& args, Context context) {
  const PerExampleScope per_example(context.per_example);
  const InVmapBody vmap_body(context.vmap_body);
  return f(args);
}

// What a call op runs: a function's plan for its arguments' types, and the scopes it was called in.
struct Call {
  std::shared_ptr<Function> function;
  std::shared_ptr<const CacheEntry> entry;
  DType dtype;  // of every result, packed in order
  std::int64_t packed;
  Context context;
};

const Call& call_of(const Attrs& attrs) { return *static_cast<const Call*>(attrs.object.get()); }

ExampleType call_infer(std::span<const ExampleType>, const Attrs& attrs) {
  const Call& c = call_of(attrs);
  return {c.dtype, {c.packed}};
}

void call_forward(const KernelArgs& k) {
  const Call& c = call_of(k.attrs);
  const SuspendCaptures not_the_callers_ops;
  std::vector<Tensor> args;
  for (const View& v : k.in) args.push_back(tensor_of(k, v));
  const std::vector<Tensor> results = run_plan(*c.entry->plan, args);
  std::int64_t at = 0;
  for (const Tensor& r : results) {
    write(k, r, columns(k.out, at, r.numel()));
    at += r.numel();
  }
}

// The results' shapes, to unpack the packed vector.
std::vector<Shape> result_shapes(const Plan& plan) {
  std::vector<Shape> shapes;
  for (int v : plan.outputs) shapes.push_back(plan.values[static_cast<std::size_t>(v)].shape);
  return shapes;
}

std::vector<Tensor> unpack_results(const Tensor& packed, const std::vector<Shape>& shapes) {
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (const Shape& s : shapes) {
    out.push_back(reshape(slice(packed, 0, at, at + numel(s)), s));
    at += numel(s);
  }
  return out;
}

Tensor pack_results(const std::vector<Tensor>& results, DType dtype, Device device) {
  std::vector<Tensor> flat;
  for (const Tensor& r : results) flat.push_back(reshape(r, {r.numel()}));
  if (flat.empty()) return zeros({0}, dtype, device);
  return flat.size() == 1 ? flat[0] : concatenate(flat, 0);
}

std::vector<Tensor> run(const std::shared_ptr<Function>& f, const std::vector<Tensor>& args) {
  if (std::optional<std::vector<Tensor>> out = call_as_op(f, args)) return *out;
  return f->code(args);
}

// The pullback of f as a function of (f's arguments..., the packed results' cotangent): the float arguments'
// cotangents, packed. It runs f's code under a transform of its own, so gradients f takes inside are differentiable
// wherever this pullback is differentiated in turn (its own pullback runs it under another transform). It holds f's
// code, not f, which holds it.
FlatFunction pullback_code(FlatFunction f, Context context) {
  return [f = std::move(f), context](const std::vector<Tensor>& a) {
    std::vector<Tensor> in(a.begin(), a.end() - 1);
    const Tensor& cotangent = a.back();
    TransformScope scope;
    std::vector<Tensor> wrt;
    for (Tensor& x : in)
      if (is_floating(x.dtype())) {
        x = watch(x);
        wrt.push_back(x);
      }
    const Tensor packed = pack_results(run_in(f, in, context), cotangent.dtype(), cotangent.device());
    return std::vector<Tensor>{
        pack_results(backward({packed}, {cotangent}, wrt, scope.nested), cotangent.dtype(), cotangent.device())};
  };
}

// The jvp of f as a function of (f's arguments..., a tangent per float argument): the packed results' tangent.
FlatFunction tangent_code(FlatFunction f, std::size_t arity, Context context) {
  return [f = std::move(f), arity, context](const std::vector<Tensor>& a) {
    std::vector<Tensor> in(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(arity));
    const std::vector<Tensor> tangents(a.begin() + static_cast<std::ptrdiff_t>(arity), a.end());
    TransformScope scope;
    std::vector<Tensor> wrt;
    for (Tensor& x : in)
      if (is_floating(x.dtype())) {
        x = watch(x);
        wrt.push_back(x);
      }
    const std::vector<Tensor> results = run_in(f, in, context);
    const DType dtype = results.empty() ? DType::f64 : results[0].dtype();
    const Device device = results.empty() ? Device{} : results[0].device();
    return std::vector<Tensor>{push_forward({pack_results(results, dtype, device)}, wrt, tangents)[0]};
  };
}

std::shared_ptr<Function> derived(const std::shared_ptr<Function>& f,
                                  std::array<std::shared_ptr<Function>, 4> Function::*which, Context context,
                                  const std::function<FlatFunction()>& code) {
  const std::lock_guard lock(f->mutex);
  std::shared_ptr<Function>& slot = ((*f).*which)[context.index()];
  if (!slot) {
    slot = std::make_shared<Function>();
    slot->code = code();
    slot->cache = std::make_shared<JitCache>();
  }
  return slot;
}

std::vector<Tensor> call_adjoint(const Node& node, const Tensor&, const Tensor& gout, const AdjointContext& context) {
  const Call& c = call_of(node.attrs);
  const std::shared_ptr<Function> pullback =
      derived(c.function, &Function::pullback, c.context, [&] { return pullback_code(c.function->code, c.context); });
  std::vector<Tensor> args = node.inputs;
  args.push_back(gout);
  const Tensor packed = run(pullback, args)[0];
  std::vector<Tensor> grads;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    const Tensor& x = node.inputs[i];
    if (!is_floating(x.dtype())) {
      grads.emplace_back();
      continue;
    }
    grads.push_back(context.needs[i] ? reshape(slice(packed, 0, at, at + x.numel()), x.shape()) : Tensor());
    at += x.numel();
  }
  return grads;
}

Tensor call_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  const Call& c = call_of(node.attrs);
  const std::size_t arity = node.inputs.size();
  const std::shared_ptr<Function> jvp = derived(c.function, &Function::tangent, c.context,
                                                [&] { return tangent_code(c.function->code, arity, c.context); });
  std::vector<Tensor> args = node.inputs;
  for (std::size_t i = 0; i < arity; ++i) {
    const Tensor& x = node.inputs[i];
    if (is_floating(x.dtype()))
      args.push_back(tangents[i].defined() ? tangents[i] : zeros(x.shape(), x.dtype(), x.device()));
  }
  return run(jvp, args)[0];
}

const OpDef call_op{.name = "jit",
                    .inputs = OpDef::any_inputs,
                    .infer = call_infer,
                    .forward = call_forward,
                    .adjoint = call_adjoint,
                    .tangent = call_tangent,
                    .mixed_dtypes = true,
                    .integers = true,
                    .booleans = true,
                    .runs_functions = true};

}  // namespace

JittedCore::JittedCore(std::shared_ptr<const void> f, JitOptions options)
    : f_(std::move(f)), cache_(std::make_shared<JitCache>(std::move(options))) {}

std::shared_ptr<const CacheEntry> JittedCore::lookup(const std::vector<Tensor>& args, ErasedTrace trace,
                                                     bool count_call) const {
  const void* f = f_.get();
  return cache_->get(
      args, [trace, f](const std::vector<Tensor>& symbolic) { return trace(f, symbolic); }, count_call);
}

std::optional<JittedCore::Results> JittedCore::call(const std::vector<Tensor>& args, ErasedTrace trace) const {
  // Called while a jit traces (this function calling itself, or jitted pieces composed): the function is inlined, its
  // ops joining the enclosing trace.
  if (tracing()) return std::nullopt;
  std::shared_ptr<const CacheEntry> entry = lookup(args, trace, true);
  // Called inside grad, vjp or jvp, or on a tensor they track: the plan runs as one op whose derivatives are planned
  // once too (a plan's results carry no tape otherwise). Where it cannot (the function captures a tensor a transform
  // tracks, which may be the enclosing transform's variable), the function runs op by op, recorded like any function.
  bool tracked = differentiating();
  for (const Tensor& t : args) tracked |= t.defined() && t.impl().tracked;
  if (tracked) {
    std::optional<std::vector<Tensor>> out = call_as_op(function(args.size(), trace), args, entry);
    if (!out) return std::nullopt;
    return Results{std::move(*out), std::move(entry)};
  }
  if (entry->runs_eagerly) return std::nullopt;
  std::vector<Tensor> out = run_plan(*entry->plan, args);
  return Results{std::move(out), std::move(entry)};
}

std::shared_ptr<Function> JittedCore::function(std::size_t arity, ErasedTrace trace) const {
  const std::lock_guard lock(mutex_);
  std::shared_ptr<Function>& slot = functions_[arity];
  if (!slot) {
    slot = std::make_shared<Function>();
    slot->code = [trace, f = f_](const std::vector<Tensor>& args) { return trace(f.get(), args).outputs; };
    slot->cache = cache_;
  }
  return slot;
}

std::optional<std::vector<Tensor>> call_as_op(const std::shared_ptr<Function>& f, const std::vector<Tensor>& args,
                                              std::shared_ptr<const CacheEntry> entry) {
  if (!entry)
    entry = f->cache->get(
        args,
        [&f](const std::vector<Tensor>& symbolic) {
          return Traced{f->code(symbolic), std::any()};
        },
        true);
  if (entry->runs_eagerly) return std::nullopt;
  // One op has one output: the results packed into one vector, so they must share a floating-point dtype with the
  // float arguments (whose cotangents are packed likewise), and be batched exactly where the op's output is (a
  // result reduced over the batch, or one that ignores a batched argument, is not a per-example value).
  const Plan& plan = *entry->plan;
  bool batched = false;
  for (const Tensor& a : args) batched |= a.is_batched();
  std::optional<DType> dtype;
  for (const Tensor& a : args)
    if (is_floating(a.dtype())) {
      if (dtype && *dtype != a.dtype()) return std::nullopt;
      dtype = a.dtype();
    }
  std::int64_t packed = 0;
  for (int v : plan.outputs) {
    const PlanValue& out = plan.values[static_cast<std::size_t>(v)];
    if (!is_floating(out.dtype) || (dtype && *dtype != out.dtype) || out.batched != batched) return std::nullopt;
    dtype = out.dtype;
    packed += numel(out.shape);
  }
  if (!dtype || plan.outputs.empty()) return std::nullopt;
  Attrs attrs;
  attrs.object = std::make_shared<const Call>(Call{f, entry, *dtype, packed, Context::now()});
  return unpack_results(apply(call_op, args, std::move(attrs)), result_shapes(plan));
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(call_op, "jit");

}  // namespace vt::detail
