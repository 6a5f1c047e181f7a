// stop_gradient: an alias of its input with no adjoint, so no transform differentiates through it.
#include "stop_gradient.hpp"

#include "../core/graph.hpp"

namespace vt {

namespace {
const OpDef stop_gradient_op{.name = "stop_gradient",
                             .inputs = 1,
                             .infer = same_type,
                             .forward = nullptr,
                             .adjoint = nullptr,
                             .aliases_input = true,
                             .integers = true,
                             .booleans = true};
}  // namespace

Tensor stop_gradient(const Tensor& x) {
  if (!x.impl().tracked && !x.is_symbolic()) return x;
  return apply(stop_gradient_op, {x});
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(stop_gradient_op, "stop_gradient");

}  // namespace vt
