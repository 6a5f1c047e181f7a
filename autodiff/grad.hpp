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
struct TransformScope {
  TransformScope();
  ~TransformScope();
  TransformScope(const TransformScope&) = delete;
  TransformScope& operator=(const TransformScope&) = delete;
  const bool nested;
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
// x marked as a variable of a new transform (connected to x's own history when an outer
// transform watches x).
Tensor watch(const Tensor& x);
// Drops the tape behind a result when no outer transform needs it.
Tensor release(const Tensor& result, bool keep);
Tensor scalar_output(const Tensor& out, const char* transform);
// Raises unless argument `argnum` can be differentiated (it is floating-point).
void check_differentiable(const Tensor& x, int argnum, const char* transform);
std::vector<int> check_argnums(const std::vector<int>& argnums, std::size_t arity, const char* transform);
}  // namespace detail

/// value_and_grad(f, argnums)(args...) -> {f(args...), [d f / d args[i] for i in argnums]}; f must
/// return a scalar.
template <class F>
auto value_and_grad(F f, std::vector<int> argnums) {
  return [f = std::move(f), argnums = std::move(argnums)](const auto&... args) {
    std::array<Tensor, sizeof...(args)> in{Tensor(args)...};
    const std::vector<int> nums = detail::check_argnums(argnums, in.size(), "value_and_grad");
    std::vector<Tensor> wrt;
    detail::TransformScope scope;
    bool outer = scope.nested;
    for (int i : nums) {
      detail::check_differentiable(in[i], i, "grad");
      outer |= in[i].impl().tracked;
      in[i] = detail::watch(in[i]);
      wrt.push_back(in[i]);
    }
    const Tensor out = detail::scalar_output(std::apply(f, in), "grad");
    std::vector<Tensor> grads = backward({out}, {}, wrt, outer);
    for (Tensor& g : grads) g = detail::release(g, outer);
    return std::pair<Tensor, std::vector<Tensor>>{detail::release(out, outer), std::move(grads)};
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
  std::array<Tensor, sizeof...(Args)> in{Tensor(primals)...};
  detail::TransformScope scope;
  bool outer = scope.nested;
  for (Tensor& x : in) {
    outer |= x.impl().tracked;
    if (is_floating(x.dtype())) x = detail::watch(x);  // an integer primal gets a zero cotangent
  }
  const Tensor out = std::apply(f, in);
  std::vector<Tensor> wrt(in.begin(), in.end());
  std::function<std::vector<Tensor>(const Tensor&)> pullback = [out, wrt, outer](const Tensor& cotangent) {
    detail::TransformScope pull;
    const bool keep = outer || pull.nested || cotangent.impl().tracked;
    std::vector<Tensor> grads = backward({out}, {cotangent}, wrt, keep);
    for (Tensor& g : grads) g = detail::release(g, keep);
    return grads;
  };
  return std::pair{detail::release(out, true), pullback};
}

}  // namespace vt
