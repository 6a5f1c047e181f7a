#pragma once
// Reductions over all axes (empty `axes`) or the given ones, with numpy's keepdims. Integer
// tensors: sum and max keep the dtype (sums wrap modulo 2^bits, exact whenever the result fits);
// mean is float64, as numpy's.
#include <vector>

#include "../core/tensor.hpp"

namespace vt {

using Axes = std::vector<std::int64_t>;

Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
// Ties share the gradient evenly; NaN propagates.
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// Sums a broadcast result back down to `shape` (the adjoint of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace vt
