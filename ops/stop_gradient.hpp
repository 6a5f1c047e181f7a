#pragma once
#include "../core/tensor.hpp"

namespace vt {

/// x with the gradient cut: it behaves as a constant for every enclosing transform.
Tensor stop_gradient(const Tensor& x);

}  // namespace vt
