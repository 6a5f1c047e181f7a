#pragma once
/// @file
/// Tangent rules that many op families share (OpDef::tangent, core/graph.hpp), each resting on a
/// property of the op that its OpDef states by choosing it.
#include <vector>

#include "../core/graph.hpp"

namespace vt {

/// For an op linear in its floating-point inputs taken together, its integer inputs (indices,
/// segment ids) fixed: the op itself applied to the tangents, zeros for inputs without one.
Tensor linear_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents);

/// For an op of one input whose Jacobian is symmetric (an elementwise map: diagonal): its adjoint
/// applied to the tangent.
Tensor self_adjoint_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents);

/// For an op of two inputs linear in each (a product): op(da, b) + op(a, db).
Tensor bilinear_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents);

/// a + b where both are defined, else the defined one (tangents: undefined is zero).
Tensor add_tangents(const Tensor& a, const Tensor& b);

/// (x + x^T) / 2 over the last two axes: the tangent a factorization that reads one triangle of a
/// symmetric matrix sees (its adjoint is symmetric, so the two rules agree).
Tensor symmetric_part(const Tensor& x);

}  // namespace vt
