#pragma once
/// @file
/// Reductions over all axes (empty `axes`) or the given ones, with numpy's keepdims. Integer
/// tensors: sum and max keep the dtype (sums wrap modulo 2^bits, exact whenever the result fits);
/// mean is float64, as numpy's. Bool tensors (as numpy): sum counts the trues in int64, mean is
/// float64, max is any.
#include <vector>

#include "../core/tensor.hpp"

namespace vt {

using Axes = std::vector<std::int64_t>;

Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Ties share the gradient evenly; NaN propagates.
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Whether any, or every, element along `axes` is nonzero (true): bool tensors, from any dtype. Over
/// no elements, any is false and all is true.
Tensor any(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor all(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

/// log(sum(exp(x))) over `axes`, computed stably with the maximum subtracted: all -inf gives -inf,
/// any +inf gives +inf, NaN propagates, an empty reduction gives -inf. Gradient softmax(x) along the
/// axes (itself differentiable); NaN where the result is infinite.
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

/// Running sums along `axis` (negative counts from the end), each line summed in order in double.
/// Gradient: the cotangent's running sums taken from the end of the axis back.
Tensor cumsum(const Tensor& x, std::int64_t axis);

/// Sums a broadcast result back down to `shape` (the adjoint of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

struct OpDef;
struct Attrs;
/// For plan passes that rewrite reductions: whether a step of `op` with `attrs` is sum over exactly the per-example
/// axes `axes` (sorted), their size-1 axes kept or not.
bool is_sum_over(const OpDef& op, const Attrs& attrs, const Axes& axes);
/// sum's op, which jit's passes recognise by identity.
extern const OpDef sum_op;

}  // namespace vt
