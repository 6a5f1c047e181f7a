#pragma once
#include "../core/tensor.hpp"

namespace vt {

// numpy's matmul: vector.vector (dot), matrix.vector, vector.matrix, matrix.matrix, with
// broadcast leading batch axes. One batched GEMM call over all the matrices.
Tensor matmul(const Tensor& a, const Tensor& b);

// The op itself, for passes that recognise it by identity (jit reassociates chains of matmuls).
struct OpDef;
extern const OpDef matmul_op;

}  // namespace vt
