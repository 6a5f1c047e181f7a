#pragma once
/// @file
/// Layout family: ops that move or repeat elements without arithmetic.
#include <vector>

#include "../core/tensor.hpp"

namespace vt {

/// One entry may be -1 (inferred). Shares storage with x: no copy.
Tensor reshape(const Tensor& x, const Shape& shape);
/// Reverses the axes (numpy's x.T), or permutes them by `perm`.
Tensor transpose(const Tensor& x);
Tensor transpose(const Tensor& x, const std::vector<std::int64_t>& perm);
Tensor swapaxes(const Tensor& x, std::int64_t a, std::int64_t b);
/// numpy broadcasting of x to `shape`.
Tensor broadcast_to(const Tensor& x, const Shape& shape);

struct OpDef;
struct Attrs;
/// Whether a recorded op is x.t(), the last two axes swapped and the others in place (jit folds it
/// into a matmul's transpose flag).
bool is_matrix_transpose(const OpDef& op, const Attrs& attrs);
/// reshape's op and its attributes, for plan passes that insert one (jit reshapes a scaling's factor
/// when it moves the scaling onto a sum of another shape).
extern const OpDef reshape_op;
/// broadcast_to's op, which jit's passes recognise by identity.
extern const OpDef broadcast_op;
Attrs reshape_attrs(const Shape& shape);

}  // namespace vt
