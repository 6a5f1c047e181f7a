#pragma once
// vtape's matrices are row-major; cuBLAS is column-major. A row-major matrix read column-major is
// its transpose, so each row-major request maps onto one column-major call on the same memory,
// with no copies. These translations are plain functions so that the CPU-only tests can check them
// against a column-major reference (tests/test_column_major.cpp).
#include <cstdint>

#include "../../core/backend.hpp"

namespace vt::cuda {

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap places.
struct ColumnMajorGemm {
  bool trans_first, trans_second;
  std::int64_t rows, cols, inner;  // of C^T: rows x cols = n x m; inner = k
  const void* first;
  std::int64_t ld_first, stride_first;
  const void* second;
  std::int64_t ld_second, stride_second;
  std::int64_t ldc;
};

inline ColumnMajorGemm column_major(const GemmArgs& g) {
  return {g.trans_b,  g.trans_a, g.n, g.m, g.k, g.b, g.trans_b ? g.k : g.n, g.stride_b, g.a, g.trans_a ? g.m : g.k,
          g.stride_a, g.n};
}

// Row-major op(T) X = B (T n x n, B n x nrhs) is column-major X^T op(T)^T = B^T: a right-side solve
// with the triangle flipped (T's lower triangle is T^T's upper one).
struct ColumnMajorTrsm {
  bool right_side, upper, transpose;
  std::int64_t rows, cols;  // of B^T: nrhs x n
  std::int64_t ld_t, ld_b;
};

// `transpose` is op(T) = T^T for this pass (TrsmArgs::transpose, flipped for the second pass of
// then_transposed).
inline ColumnMajorTrsm column_major(const TrsmArgs& t, bool transpose) {
  return {true, t.lower, transpose, t.nrhs, t.n, t.n, t.nrhs};
}

}  // namespace vt::cuda
