#pragma once
// What each CUDA kernel thread does for one work item, as plain functions that compile for the
// device (kernels.cu wraps each in a grid-stride loop) and for the host, where the CPU-only tests
// run them item by item (tests/test_cuda_steps.cpp): index arithmetic and the matrix steps
// around cuSOLVER are checked without a GPU.
#include <cmath>
#include <cstdint>

#include "kernels.hpp"

#ifdef __CUDACC__
#define VTAPE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define VTAPE_HOST_DEVICE inline
#endif

namespace vt::cuda::steps {

// Offsets (in elements) of the element with linear index i in each of the N operands.
template <int N>
VTAPE_HOST_DEVICE void offsets_of(const kernels::Layout<N>& l, std::int64_t i, std::int64_t (&off)[N]) {
  if (l.rank == 1) {  // contiguous or evenly strided after merging: no 64-bit division
    for (int k = 0; k < N; ++k) off[k] = i * l.stride[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const std::int64_t idx = i % l.shape[d];
    i /= l.shape[d];
    for (int k = 0; k < N; ++k) off[k] += idx * l.stride[k][d];
  }
}

// Work item t over count n x n matrices: matrix m, row i, column j.
VTAPE_HOST_DEVICE void matrix_item(std::int64_t t, std::int64_t n, std::int64_t& m, std::int64_t& i, std::int64_t& j) {
  j = t % n;
  t /= n;
  i = t % n;
  m = t / n;
}

// l's upper triangle <- a's lower triangle, transposed (safe in place: reads only a's lower
// triangle, writes only l's upper one, the diagonal by the item that reads it).
template <class T>
VTAPE_HOST_DEVICE void mirror_lower(std::int64_t t, std::int64_t n, const T* a, std::int64_t sa, T* l, std::int64_t sl) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (j >= i) l[m * sl + i * n + j] = a[m * sa + j * n + i];
}

// The column-major factor's (i, j) sits at row-major (j, i): move it down and zero the upper
// triangle. One item per (i > j) pair, so items never touch each other's elements.
template <class T>
VTAPE_HOST_DEVICE void finish_factor(std::int64_t t, std::int64_t n, T* l, std::int64_t sl) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (i > j) {
    T* base = l + m * sl;
    base[i * n + j] = base[j * n + i];
    base[j * n + i] = T(0);
  }
}

// info[m] <- the first non-finite pivot (1-based) before the minor cuSOLVER reported, if any:
// pivots before a failing minor are final, and the CPU reports the earliest failure.
template <class T>
VTAPE_HOST_DEVICE void check_diagonal(std::int64_t m, std::int64_t n, const T* l, std::int64_t sl, std::int32_t* info) {
  using std::isfinite;
  const std::int64_t limit = info[m] != 0 ? info[m] - 1 : n;
  for (std::int64_t k = 0; k < limit; ++k)
    if (!isfinite(l[m * sl + k * n + k])) {
      info[m] = static_cast<std::int32_t>(k + 1);
      return;
    }
}

// Strict upper triangle set to 0 (assigned, not multiplied: an Inf or NaN there must not survive),
// diagonal scaled.
template <class T>
VTAPE_HOST_DEVICE void lower_triangle(std::int64_t t, std::int64_t n, T* x, std::int64_t s, T diagonal_scale) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  T& v = x[m * s + i * n + j];
  if (j > i) v = T(0);
  else if (j == i) v *= diagonal_scale;
}

template <class T>
VTAPE_HOST_DEVICE void transpose(std::int64_t t, std::int64_t n, const T* in, std::int64_t si, T* out, std::int64_t so) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  out[m * so + i * n + j] = in[m * si + j * n + i];
}

// (x + x^T) / 2 in place, one item per (i > j) pair.
template <class T>
VTAPE_HOST_DEVICE void symmetrize(std::int64_t t, std::int64_t n, T* x, std::int64_t s) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (i > j) {
    T* base = x + m * s;
    const T v = (base[i * n + j] + base[j * n + i]) * T(0.5);
    base[i * n + j] = v;
    base[j * n + i] = v;
  }
}

}  // namespace vt::cuda::steps
