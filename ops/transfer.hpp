#pragma once
/// @file
/// Moving tensors between devices. Transfers are explicit: ops refuse inputs on different devices.
#include "../core/tensor.hpp"

namespace vt {

/// x's values on `device` (x itself when it is there already). Differentiable: the cotangent moves
/// back. Batching is kept. Not traceable by jit: a plan runs on one device, so move arguments before
/// calling a jitted function.
Tensor to_device(const Tensor& x, Device device);

}  // namespace vt
