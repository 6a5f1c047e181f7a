#pragma once
#include "../core/tensor.hpp"

namespace vt {

/// numpy's matmul: vector.vector (dot), matrix.vector, vector.matrix, matrix.matrix, with
/// broadcast leading batch axes. One batched GEMM call over all the matrices; when one operand is
/// shared by every example (unbatched, or broadcast over the leading axes) and the other's rows
/// allow it, one GEMM over the whole batch (x_i W for every i as X W; W x_i as X W^T).
Tensor matmul(const Tensor& a, const Tensor& b);
/// op(a) op(b), where op swaps the last two axes of an operand whose flag is set (a matrix or a
/// stack of them): the transpose is a GEMM flag, never a copy. matmul(a, b, false, true) is a b^T.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

struct OpDef;
struct Attrs;
/// The op itself, for passes that recognise it by identity (jit reassociates chains of matmuls),
/// and its transposes, read from and written to a step's attributes.
extern const OpDef matmul_op;
struct MatmulTransposes {
  bool a = false, b = false;
};
MatmulTransposes matmul_transposes(const Attrs& attrs);
/// A plan pass (mark_symmetric_products) marks a product it knows to be symmetric, X D X^T: the
/// forward then lets the backend compute one triangle and mirror it (GemmArgs::symmetric). Never set
/// by user code, so the mark changes neither eager results nor the attributes CSE compares.
bool matmul_symmetric(const Attrs& attrs);
/// And a pass (mark_lower_only_outputs) marks a symmetric product whose readers all read only its
/// lower triangle (a Cholesky factorization, a handle): the backend may leave the strict upper triangle
/// unwritten (GemmArgs::lower_only).
bool matmul_lower_only(const Attrs& attrs);
Attrs matmul_attrs(MatmulTransposes transposes, bool symmetric = false, bool lower_only = false);

/// op(a) op(b) + diag(d), d the diagonal of a square matrix input D ([.., n, n], broadcast like the
/// product's batch axes), with matmul's attributes: the plan's rewrite of matmul(a, b) + D for a
/// captured D whose other entries are all zeros (fold_diagonal_adds), which adds n entries where
/// the add it replaces read and wrote n^2. Only D's diagonal is read. Made by plans only, never
/// differentiated.
extern const OpDef matmul_add_diagonal_op;

}  // namespace vt
