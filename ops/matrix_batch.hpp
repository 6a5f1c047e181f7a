#pragma once
// Shared by the matrix op families (matmul, linear algebra): their shape rules, and the layout of
// an operand with broadcast leading axes as `count` matrices at one stride, as batched
// BLAS/LAPACK-style kernels want.
#include <memory>
#include <string>

#include "../core/graph.hpp"

namespace vt {

struct MatrixOperand {
  void* data;
  std::int64_t stride;  // elements between consecutive matrices; 0 reuses one matrix
};

// `v` is a view whose last two axes are a row-major rows x cols matrix and whose leading axes
// broadcast to `batch`. With `lead` (a batched kernel), axis 0 of both is the vmap batch axis and
// is matched as it is; the other leading axes are right-aligned, numpy-style. A fully broadcast
// operand reads one matrix (stride 0), a full one is used in place; one that broadcasts only partly
// is copied into `scratch`.
MatrixOperand matrix_operand(Backend& backend, const View& v, const Shape& batch, std::int64_t rows, std::int64_t cols,
                             std::shared_ptr<Storage>& scratch, bool lead);

// The leading (batch) axes of a matrix shape.
inline Shape batch_axes(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Raises, naming `op`, unless `shape` is a stack of square matrices [..., n, n].
void check_square(std::string_view op, const Shape& shape);

// Raises, naming `op`, unless a Cholesky factor has its matrices' shape (the ops that take both).
void check_factor(std::string_view op, const ExampleType& a, const ExampleType& l);

// Shape rule shared by the solves: a matrix `t` [..., n, n] against a right-hand side `b` that is
// a vector [n] or matrices [..., n, k]; leading axes broadcast.
ExampleType solve_type(std::string_view op, const ExampleType& t, const ExampleType& b);

// Copies the right-hand side (input b_input) into the output and returns the output as matrices
// [batch..., n, k], ready for in-place triangular solves against input t_input.
struct SolveLayout {
  View x;
  Shape batch;
  std::int64_t n, k;
};
SolveLayout solve_layout(const KernelArgs& args, std::size_t t_input, std::size_t b_input);

// A solve's vectors [..., n] as one-column matrices [..., n, 1], so adjoints work on matrices.
Tensor as_columns(const Tensor& x);

// Where matrix `flat` (row-major among a kernel call's matrices, whose leading axes are `lead`)
// lies, for a factorization's error: `where` reads "the matrix", "matrix 2 of the batch [4]",
// "matrix [5, 1] of the batch [8, 3]" or, when `batched` (lead[0] is the vmap batch), "example 5
// of the batch of 8 (matrix 1 of the batch [3])". `example` is the index an error reports: the
// vmap example when batched, else `flat`.
struct MatrixLocation {
  std::string where;
  long example;
};
// When batched, the call's matrices may be a chunk of a jit call's batch: examples [first_example, ...)
// of whole_batch (-1: lead[0]), and the location names the example's index in the whole batch.
MatrixLocation locate_matrix(const Shape& lead, bool batched, std::int64_t flat, std::int64_t first_example = 0,
                             std::int64_t whole_batch = -1);

}  // namespace vt
