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

// An index check's code for an out-of-range index at `offset` (>= 0) into the indices: positive,
// and larger for a lower offset, so that an atomic max over the codes of a pass keeps the first
// one, and 0 (the buffer as cleared) means that every index was in range.
VTAPE_HOST_DEVICE std::int64_t bad_index_code(std::int64_t offset) { return INT64_MAX - offset; }
VTAPE_HOST_DEVICE std::int64_t bad_index_offset(std::int64_t code) { return INT64_MAX - code; }

// Whether linear indices of `l` (and a grid-stride step past the last: grids are capped at 65,535
// blocks of 256 threads, under 2^24) fit in 32 bits: then the kernels divide in 32 bits, several
// times cheaper on a GPU than 64-bit division.
template <int N>
VTAPE_HOST_DEVICE bool fits_int32(const kernels::Layout<N>& l) {
  return l.total <= (std::int64_t{1} << 30);
}

// Offsets (in elements) of the element with linear index i in each of the N operands. Index is
// the type the index arithmetic runs in (std::int32_t where fits_int32).
template <class Index, int N>
VTAPE_HOST_DEVICE void offsets_of(const kernels::Layout<N>& l, Index i, std::int64_t (&off)[N]) {
  if (l.rank == 1) {  // contiguous or evenly strided after merging: no division
    for (int k = 0; k < N; ++k) off[k] = static_cast<std::int64_t>(i) * l.stride[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const Index extent = static_cast<Index>(l.shape[d]);
    const Index idx = i % extent;
    i /= extent;
    for (int k = 0; k < N; ++k) off[k] += static_cast<std::int64_t>(idx) * l.stride[k][d];
  }
}

// Work item t over count n x n matrices: matrix m, row i, column j. In 32 bits while t fits
// (a batch of matrices up to 2^32 elements), as 64-bit division costs several times more.
VTAPE_HOST_DEVICE void matrix_item(std::int64_t t, std::int64_t n, std::int64_t& m, std::int64_t& i, std::int64_t& j) {
  if (t <= std::int64_t{UINT32_MAX}) {
    const auto t32 = static_cast<std::uint32_t>(t), n32 = static_cast<std::uint32_t>(n), rest = t32 / n32;
    j = t32 % n32;
    i = rest % n32;
    m = rest / n32;
    return;
  }
  j = t % n;
  t /= n;
  i = t % n;
  m = t / n;
}

// l's lower triangle <- a's, before the factorization of l in place when l is another buffer;
// any garbage above a's diagonal is not read.
template <class T>
VTAPE_HOST_DEVICE void copy_lower(std::int64_t t, std::int64_t n, const T* a, std::int64_t sa, T* l, std::int64_t sl) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (j <= i) l[m * sl + i * n + j] = a[m * sa + i * n + j];
}

// For checked factorizations: the rows of a failed factor from its failing minor on become NaN.
template <class T>
VTAPE_HOST_DEVICE void poison_failed_rows(std::int64_t t, std::int64_t n, T* l, std::int64_t sl,
                                          const std::int32_t* info) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (info[m] != 0 && i >= info[m] - 1) l[m * sl + i * n + j] = T(NAN);
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
VTAPE_HOST_DEVICE void transpose(std::int64_t t, std::int64_t n, const T* in, std::int64_t si, T* out,
                                 std::int64_t so) {
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

// One line of a running sum (cumsum): n elements, step_in and step_out apart, summed in order
// (from the last element back when `reverse`) in double, as the CPU backend sums them.
template <class T>
VTAPE_HOST_DEVICE void cumsum_line(const T* in, std::int64_t step_in, T* out, std::int64_t step_out, std::int64_t n,
                                   bool reverse) {
  double acc = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t k = reverse ? n - 1 - j : j;
    acc += static_cast<double>(in[k * step_in]);
    out[k * step_out] = static_cast<T>(acc);
  }
}

// ---- around the QR and eigendecomposition calls (qr, eigh)

// Work item t over count rows x cols matrices: matrix m, row i, column j.
VTAPE_HOST_DEVICE void rectangle_item(std::int64_t t, std::int64_t rows, std::int64_t cols, std::int64_t& m,
                                      std::int64_t& i, std::int64_t& j) {
  j = t % cols;
  t /= cols;
  i = t % rows;
  m = t / rows;
}

// info[m] <- -1 where matrix m has a non-finite entry (every thread that finds one writes the same).
template <class T>
VTAPE_HOST_DEVICE void flag_nonfinite(std::int64_t t, std::int64_t rows, std::int64_t cols, const T* x, std::int64_t s,
                                      std::int32_t* info) {
  using std::isfinite;
  std::int64_t m, i, j;
  rectangle_item(t, rows, cols, m, i, j);
  if (!isfinite(x[m * s + i * cols + j])) info[m] = -1;
}

// The flagged matrices (info[m] != 0) set to 0, so that no solver iterates on NaN.
template <class T>
VTAPE_HOST_DEVICE void zero_flagged(std::int64_t t, std::int64_t rows, std::int64_t cols, T* x, std::int64_t s,
                                    const std::int32_t* info) {
  std::int64_t m, i, j;
  rectangle_item(t, rows, cols, m, i, j);
  if (info[m] != 0) x[m * s + i * cols + j] = T(0);
}

// Row-major rows x cols matrices with 0 below the diagonal (R from geqrf's packed reflectors).
template <class T>
VTAPE_HOST_DEVICE void upper_trapezoid(std::int64_t t, std::int64_t rows, std::int64_t cols, T* x, std::int64_t s) {
  std::int64_t m, i, j;
  rectangle_item(t, rows, cols, m, i, j);
  if (i > j) x[m * s + i * cols + j] = T(0);
}

// Square matrices' strict upper triangle <- the lower one, mirrored: symmetric matrices made from
// the triangle eigh reads, so that no solver meets what lies in the other.
template <class T>
VTAPE_HOST_DEVICE void mirror_lower(std::int64_t t, std::int64_t n, T* x, std::int64_t s) {
  std::int64_t m, i, j;
  matrix_item(t, n, m, i, j);
  if (j > i) x[m * s + i * n + j] = x[m * s + j * n + i];
}

// A solver's info kept where info[m] has no failure of its own yet; a bad argument's (< 0) shifted
// clear of flag_nonfinite's -1.
VTAPE_HOST_DEVICE void merge_info(std::int64_t m, std::int32_t* info, const std::int32_t* solver_info) {
  if (info[m] == 0) info[m] = solver_info[m] < 0 ? kernels::solver_bad_argument + solver_info[m] : solver_info[m];
}

}  // namespace vt::cuda::steps
