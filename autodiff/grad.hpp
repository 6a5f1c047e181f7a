#pragma once
/// @file
/// Reverse mode over the recorded graph: grad, value_and_grad, vjp (and stop_gradient, from ops/).
///
/// The transforms take a C++ callable of tensors and return another callable. Arguments are
/// marked as variables, the function runs (recording the ops that depend on them), and the reverse
/// sweep walks the recorded nodes from the output back, calling each op's adjoint. Adjoints are
/// ordinary ops, so the backward pass is recorded too whenever an outer transform watches: grad of
/// grad works.
#include <array>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/tensor.hpp"
#include "../ops/stop_gradient.hpp"

namespace vt {

/// The cotangents of `wrt` for `outputs` seeded with `cotangents` (same shapes as the outputs;
/// empty means ones). Tensors in `wrt` that the outputs do not depend on get zeros.
/// `differentiable`: an outer transform will differentiate the result, so adjoints must be written
/// with differentiable ops; otherwise they may use faster kernels that have no adjoint.
std::vector<Tensor> backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                             const std::vector<Tensor>& wrt, bool differentiable = true);

/// The tangents of `outputs` along the tangents of the variables `wrt` (one each; an undefined one
/// is zero): a forward sweep over the recorded graph, each op's tangent rule in turn. The rules are
/// ordinary ops, so the sweep is recorded too (a forward sweep over a gradient's graph is forward
/// over reverse). A batch of tangents for an unbatched variable gives one tangent per example.
std::vector<Tensor> push_forward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& wrt,
                                 const std::vector<Tensor>& tangents);

namespace detail {
// Marks a differentiating transform (grad, vjp) as running on this thread. `nested`: another one
// was already running, so it may differentiate this one's results through captured variables.
// `id` orders transforms by age (process-wide, increasing): watch() marks its variables with it.
struct TransformScope {
  TransformScope();
  ~TransformScope();
  TransformScope(const TransformScope&) = delete;
  TransformScope& operator=(const TransformScope&) = delete;
  const bool nested;
  const std::uint64_t id;
  // Whether any of `results` depends on an older transform's variables (a tensor the function closed
  // over that an enclosing grad tracks, also where no transform is open on this thread: inside a jit
  // trace): that transform differentiates these results too, so their graph must be kept, written with
  // differentiable ops.
  bool differentiated_by_older(const std::vector<Tensor>& results) const;

 private:
  std::uint64_t previous_;
};
// True while a differentiating transform runs on this thread (its function, its reverse sweep or a
// pullback): ops may be recorded for a gradient, also through tensors a function captures.
bool differentiating();
// While jit traces, the transforms around the call do not reach into the trace: the trace starts
// from no open transform, so a plan (the Cholesky adjoint's form, say, which depends on whether a
// backward pass is itself differentiated) is the same wherever it was first traced. (A jitted call
// inside a transform runs op by op and never traces; `compile` may trace there.)
struct IsolatedTrace {
  IsolatedTrace();
  ~IsolatedTrace();
  IsolatedTrace(const IsolatedTrace&) = delete;
  IsolatedTrace& operator=(const IsolatedTrace&) = delete;

 private:
  int open_transforms_;
};
// Zeros like x that stand for no cotangent at all: a backward pass skips them (and concatenate's adjoint passes on a
// cotangent joined from pieces at its own seams piece by piece, so a piece of these reaches nothing).
Tensor no_cotangent(const Tensor& x);
// x marked as a variable of a new transform (connected to x's own history when an outer
// transform watches x).
Tensor watch(const Tensor& x);
// Drops the tape behind a result when no outer transform needs it.
Tensor release(const Tensor& result, bool keep);
Tensor scalar_output(const Tensor& out, const char* transform);
// Raises unless argument `argnum` can be differentiated (it is floating-point).
void check_differentiable(const Tensor& x, int argnum, const char* transform);
std::vector<int> check_argnums(const std::vector<int>& argnums, std::size_t arity, const char* transform);
// The variables of a transform: arguments `argnums` checked and watched in place in `in`; `outer` is set when an
// outer transform differentiates through them.
std::vector<Tensor> watch_arguments(std::vector<Tensor>& in, const std::vector<int>& argnums, const char* transform,
                                    bool& outer);

// The transforms over flat lists of tensors, which the templates here and front ends without C++ types (the Python
// module) share: a function of a list of arguments returning a list of results.
using FlatFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// f's one result (a scalar) and its gradients with respect to the arguments `argnums`.
std::pair<Tensor, std::vector<Tensor>> value_and_grad_flat(const FlatFunction& f, std::vector<Tensor> in,
                                                           const std::vector<int>& argnums);
// f's results and a pullback: one cotangent per result (each of its result's shape) in, one cotangent per argument
// out (zeros for an integer argument).
using FlatPullback = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::pair<std::vector<Tensor>, FlatPullback> vjp_flat(const FlatFunction& f, std::vector<Tensor> in);
// f, a function of N tensors returning one, as a FlatFunction (that refers to f: used while f lives).
template <std::size_t N, class F>
FlatFunction flat_call(F& f) {
  return [&f](const std::vector<Tensor>& args) {
    std::array<Tensor, N> a;
    std::copy(args.begin(), args.end(), a.begin());
    return std::vector<Tensor>{Tensor(std::apply(f, a))};
  };
}
}  // namespace detail

/// value_and_grad(f, argnums)(args...) -> {f(args...), [d f / d args[i] for i in argnums]}; f must
/// return a scalar.
template <class F>
auto value_and_grad(F f, std::vector<int> argnums) {
  return [f = std::move(f), argnums = std::move(argnums)](const auto&... args) {
    return detail::value_and_grad_flat(detail::flat_call<sizeof...(args)>(f), {Tensor(args)...}, argnums);
  };
}

/// value_and_grad with respect to the first argument: returns {value, gradient}.
template <class F>
auto value_and_grad(F f) {
  return [vg = value_and_grad(std::move(f), std::vector<int>{0})](const auto&... args) {
    auto [value, grads] = vg(args...);
    return std::pair<Tensor, Tensor>{value, grads[0]};
  };
}

/// grad(f)(args...) is the gradient of scalar f with respect to its first argument;
/// grad(f, argnums) returns one gradient per listed argument.
template <class F>
auto grad(F f) {
  return [vg = value_and_grad(std::move(f))](const auto&... args) { return vg(args...).second; };
}
template <class F>
auto grad(F f, std::vector<int> argnums) {
  return [vg = value_and_grad(std::move(f), std::move(argnums))](const auto&... args) { return vg(args...).second; };
}

/// vjp(f, primals...) -> {f(primals...), pullback}, where pullback(cotangent) returns the
/// cotangents of every primal. f returns one tensor of any shape; the cotangent has its shape. A
/// batch of cotangents for an unbatched result (vmap of the pullback) gives one result per
/// cotangent.
template <class F, class... Args>
auto vjp(F f, const Args&... primals) {
  auto [out, pull] = detail::vjp_flat(detail::flat_call<sizeof...(Args)>(f), {Tensor(primals)...});
  std::function<std::vector<Tensor>(const Tensor&)> pullback = [pull](const Tensor& cotangent) {
    return pull({cotangent});
  };
  return std::pair{out[0], pullback};
}

}  // namespace vt
