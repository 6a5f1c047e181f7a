// Small batched Cholesky factors, inverses and triangular solves, interleaved (interleaved.hpp). Every matrix of a
// group goes through the same vector instructions in its own lane, and a group is always matrices [gW, gW + W) of
// the call, the last one padded with copies of its first: a matrix's result depends neither on the batch size nor on
// the thread count.
#include "interleaved.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../../core/dtype.hpp"
#include "parallel.hpp"

namespace vt::cpu {

namespace {

// One vector register of lanes (AVX2's width; where the target has narrower registers the compiler splits them).
using Doubles = double __attribute__((vector_size(32)));
using Floats = float __attribute__((vector_size(32)));
// The same, at any address of an element (a matrix's width consecutive elements), loaded and stored whole.
using UnalignedDoubles = double __attribute__((vector_size(32), aligned(alignof(double)), may_alias));
using UnalignedFloats = float __attribute__((vector_size(32), aligned(alignof(float)), may_alias));
template <class T>
struct Lanes;
template <>
struct Lanes<double> {
  using V = Doubles;
  using Unaligned = UnalignedDoubles;
};
template <>
struct Lanes<float> {
  using V = Floats;
  using Unaligned = UnalignedFloats;
};
template <class T>
constexpr int width = static_cast<int>(32 / sizeof(T));

constexpr std::int64_t most = interleaved_max_order;

// body(first, used) for every group of width<T> matrices, across the threads where the work pays (for_each_matrix);
// `work` counts one group's vector multiply-adds.
template <class T, class Body>
void for_each_group(std::int64_t count, std::int64_t work, Body&& body) {
  constexpr int w = width<T>;
  for_each_matrix((count + w - 1) / w, work, [&](NoState&, std::int64_t g) {
    body(g * w, static_cast<int>(std::min<std::int64_t>(w, count - g * w)));
  });
}

// The matrices of a group by lane: matrix first + lane, and for the padding lanes after `used` the group's first
// again (whatever they compute is not read, and a copy of a valid matrix neither fails nor raises).
template <class T>
std::array<const T*, width<T>> lanes_of(const T* data, std::int64_t stride, std::int64_t first, int used) {
  std::array<const T*, width<T>> lanes;
  for (int lane = 0; lane < width<T>; ++lane)
    lanes[static_cast<std::size_t>(lane)] = data + (first + (lane < used ? lane : 0)) * stride;
  return lanes;
}

// A square block of registers transposed: lane c of v[r] becomes lane r of v[c]. Packing and unpacking a group then
// moves whole registers (width elements of one matrix, or one element of width matrices), not one element at a time.
[[gnu::always_inline]] inline void transpose(Doubles* v) {
  const Doubles t0 = __builtin_shufflevector(v[0], v[1], 0, 4, 2, 6),
                t1 = __builtin_shufflevector(v[0], v[1], 1, 5, 3, 7);
  const Doubles t2 = __builtin_shufflevector(v[2], v[3], 0, 4, 2, 6),
                t3 = __builtin_shufflevector(v[2], v[3], 1, 5, 3, 7);
  v[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  v[1] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  v[2] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  v[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

[[gnu::always_inline]] inline void transpose(Floats* v) {
  Floats s[8], u[8];
  // Pairs of rows interleaved (lanes 2c, 2c + 1 of s[r] hold column 2c of rows r, r + 1), then fours of rows, then
  // the two halves.
  for (int r = 0; r < 8; r += 2) {
    s[r] = __builtin_shufflevector(v[r], v[r + 1], 0, 8, 2, 10, 4, 12, 6, 14);
    s[r + 1] = __builtin_shufflevector(v[r], v[r + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  for (int r = 0; r < 8; r += 4)
    for (int odd = 0; odd < 2; ++odd) {
      u[r + odd] = __builtin_shufflevector(s[r + odd], s[r + 2 + odd], 0, 1, 8, 9, 4, 5, 12, 13);
      u[r + 2 + odd] = __builtin_shufflevector(s[r + odd], s[r + 2 + odd], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int c = 0; c < 4; ++c) {
    v[c] = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    v[c + 4] = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// p[e] = element e of each lane's matrix, for e in [0, size).
template <class T, class V = typename Lanes<T>::V>
void pack(V* p, const T* src, std::int64_t stride, std::int64_t first, int used, std::int64_t size) {
  constexpr int w = width<T>;
  const auto lanes = lanes_of(src, stride, first, used);
  std::int64_t e = 0;
  for (; e + w <= size; e += w) {
    V block[w];
    for (int lane = 0; lane < w; ++lane)
      block[lane] = *reinterpret_cast<const typename Lanes<T>::Unaligned*>(lanes[static_cast<std::size_t>(lane)] + e);
    transpose(block);
    for (int r = 0; r < w; ++r) p[e + r] = block[r];
  }
  for (; e < size; ++e)
    for (int lane = 0; lane < w; ++lane) p[e][lane] = lanes[static_cast<std::size_t>(lane)][e];
}

// Element e of each used lane's matrix from p[e], for e in [0, size): pack's inverse.
template <class T, class V = typename Lanes<T>::V>
void unpack(const V* p, T* dst, std::int64_t stride, std::int64_t first, int used, std::int64_t size) {
  constexpr int w = width<T>;
  std::int64_t e = 0;
  for (; e + w <= size; e += w) {
    V block[w];
    for (int r = 0; r < w; ++r) block[r] = p[e + r];
    transpose(block);
    for (int lane = 0; lane < used; ++lane)
      *reinterpret_cast<typename Lanes<T>::Unaligned*>(dst + (first + lane) * stride + e) = block[lane];
  }
  for (; e < size; ++e)
    for (int lane = 0; lane < used; ++lane) dst[(first + lane) * stride + e] = p[e][lane];
}

// Every loop below runs along rows of the packed matrices (a column of a group is strided by n registers, and with
// n = 32, 1 KiB, a column's lines fall in a few of L1's sets) as dot products summed in registers, R of them at once
// with a shared operand: R independent chains of multiply-adds, and no store per multiply-add. Each element is summed
// in order of k whatever R, so the blocking does not change a bit.

// sum[r] -= (or +=, unless subtract) rows[r n + k] shared[k] for k in [begin, end), in order of k, for r < R.
template <int R, class V>
[[gnu::always_inline]] inline void dots(V* sum, const V* rows, std::int64_t n, const V* shared, std::int64_t begin,
                                        std::int64_t end, bool subtract) {
  for (std::int64_t k = begin; k < end; ++k) {
    const V x = shared[k];
    for (int r = 0; r < R; ++r) {
      if (subtract) sum[r] -= rows[r * n + k] * x;
      else sum[r] += rows[r * n + k] * x;
    }
  }
}

// f(first, R) over [begin, end) in blocks of 8, then 4, then 1.
template <class F>
[[gnu::always_inline]] inline void in_blocks(std::int64_t begin, std::int64_t end, F&& f) {
  std::int64_t i = begin;
  for (; i + 8 <= end; i += 8) f(i, std::integral_constant<int, 8>{});
  for (; i + 4 <= end; i += 4) f(i, std::integral_constant<int, 4>{});
  for (; i < end; ++i) f(i, std::integral_constant<int, 1>{});
}

// Left-looking, column j at a time (LAPACK's potf2): L(i, j) = (A(i, j) - row i . row j up to column j) / L(j, j).
template <class T, class V = typename Lanes<T>::V>
void cholesky_group(const T* a, std::int64_t stride_a, T* l, std::int64_t stride_l, std::int64_t first, int used,
                    std::int64_t n, bool lower_only, bool nan_rows, std::int32_t* info) {
  V p[most * most];
  pack<T>(p, a, stride_a, first, used, n * n);
  std::array<std::int64_t, width<T>> failed;
  failed.fill(-1);
  for (std::int64_t j = 0; j < n; ++j) {
    const V* row_j = p + j * n;
    V pivot = row_j[j];
    dots<1>(&pivot, row_j, n, row_j, 0, j, true);
    V root;
    for (int lane = 0; lane < width<T>; ++lane) {
      const T x = pivot[lane];
      if (failed[static_cast<std::size_t>(lane)] < 0 && !(x > T(0) && x <= std::numeric_limits<T>::max()))
        failed[static_cast<std::size_t>(lane)] = j;
      root[lane] = std::sqrt(x);  // NaN past a failure: those rows are not the result
    }
    p[j * n + j] = root;
    const V inverse = T(1) / root;
    in_blocks(j + 1, n, [&](std::int64_t i, auto rows) {
      constexpr int r_count = decltype(rows)::value;
      V sum[r_count];
      for (int r = 0; r < r_count; ++r) sum[r] = p[(i + r) * n + j];
      dots<r_count>(sum, p + i * n, n, row_j, 0, j, true);
      for (int r = 0; r < r_count; ++r) p[(i + r) * n + j] = sum[r] * inverse;
    });
  }
  // Above the diagonal: zeros, or A's elements as they were (lower_only); a failed lane's rows from its failure on NaN.
  if (!lower_only)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = i + 1; j < n; ++j) p[i * n + j] = V{};
  for (int lane = 0; lane < used; ++lane) {
    const std::int64_t f = failed[static_cast<std::size_t>(lane)];
    info[first + lane] = f < 0 ? 0 : static_cast<std::int32_t>(f + 1);
    if (f >= 0 && nan_rows)
      for (std::int64_t e = f * n; e < n * n; ++e) p[e][lane] = std::numeric_limits<T>::quiet_NaN();
  }
  unpack<T>(p, l, stride_l, first, used, n * n);
}

// With Y = L^-T (upper triangular), (L L^T)^-1 = Y Y^T. Row i of L^-1 (column i of Y) by forward substitution,
// Y(j, i) = -(row i of L . row j of Y from column j to i) / L(i, i), for the j < i in blocks (Y's zeros left of its
// diagonal let a block's rows share the range of its first); then the inverse's (i, j), j <= i, as rows i and j of Y
// dotted from column i on.
template <class T, class V = typename Lanes<T>::V>
void cholesky_inverse_group(const T* l, std::int64_t stride_l, T* out, std::int64_t stride_out, std::int64_t first,
                            int used, std::int64_t n) {
  V p[most * most], y[most * most];
  pack<T>(p, l, stride_l, first, used, n * n);
  for (std::int64_t e = 0; e < n * n; ++e) y[e] = V{};
  for (std::int64_t i = 0; i < n; ++i) {
    const V* l_row = p + i * n;
    const V reciprocal = T(1) / l_row[i];
    in_blocks(0, i, [&](std::int64_t j, auto rows) {
      constexpr int r_count = decltype(rows)::value;
      V sum[r_count] = {};
      dots<r_count>(sum, y + j * n, n, l_row, j, i, false);
      for (int r = 0; r < r_count; ++r) y[(j + r) * n + i] = -sum[r] * reciprocal;
    });
    y[i * n + i] = reciprocal;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const V* y_row = y + i * n;
    in_blocks(0, i + 1, [&](std::int64_t j, auto rows) {
      constexpr int r_count = decltype(rows)::value;
      V sum[r_count] = {};
      dots<r_count>(sum, y + j * n, n, y_row, i, n, false);
      for (int r = 0; r < r_count; ++r) p[i * n + j + r] = p[(j + r) * n + i] = sum[r];
    });
  }
  unpack<T>(p, out, stride_out, first, used, n * n);
}

// op(T) X = B in place over q (n x nrhs) with T in p. op(T) = T: each row of X is its row of B less T's row dotted
// with the rows of X already known; op(T) = T^T: each row of X, once known, is taken from the rows of B still to
// come, times T's row. Either way T is read by rows, and only its triangle.
template <class T, class V = typename Lanes<T>::V>
void solve_group(const V* p, const V* reciprocal, V* q, std::int64_t n, std::int64_t nrhs, bool lower, bool transpose) {
  const bool forward = lower != transpose;
  for (std::int64_t step = 0; step < n; ++step) {
    const std::int64_t i = forward ? step : n - 1 - step;
    const V* row = p + i * n;
    // The row's part off the diagonal: left of it for a lower T, right of it for an upper one.
    const std::int64_t begin = lower ? 0 : i + 1, end = lower ? i : n;
    V* x = q + i * nrhs;
    if (!transpose) {
      for (std::int64_t c = 0; c < nrhs; ++c) {
        V sum = x[c];
        for (std::int64_t k = begin; k < end; ++k) sum -= row[k] * q[k * nrhs + c];
        x[c] = sum * reciprocal[i];
      }
    } else {
      for (std::int64_t c = 0; c < nrhs; ++c) x[c] *= reciprocal[i];
      for (std::int64_t k = begin; k < end; ++k)
        for (std::int64_t c = 0; c < nrhs; ++c) q[k * nrhs + c] -= row[k] * x[c];
    }
  }
}

template <class T, class V = typename Lanes<T>::V>
void trsm_group(const TrsmArgs& s, const T* t, T* b, std::int64_t first, int used) {
  const std::int64_t n = s.n, nrhs = s.nrhs;
  V p[most * most], q[most * most], reciprocal[most];
  pack<T>(p, t, s.stride_t, first, used, n * n);
  for (std::int64_t i = 0; i < n; ++i) reciprocal[i] = T(1) / p[i * n + i];
  pack<T>(q, b, s.stride_b, first, used, n * nrhs);
  solve_group<T>(p, reciprocal, q, n, nrhs, s.lower, s.transpose);
  if (s.then_transposed) solve_group<T>(p, reciprocal, q, n, nrhs, s.lower, !s.transpose);
  unpack<T>(q, b, s.stride_b, first, used, n * nrhs);
}

// Murray (2016)'s unblocked reverse mode, column j from the last: the cotangent of L's column below the pivot and of
// the pivot, then row j of the cotangent and the rows below it updated from L's rows, each along the row. Then the
// symmetric cotangent of A: (T + T^T) / 2 from T's lower triangle.
template <class T, class V = typename Lanes<T>::V>
void cholesky_backward_group(const T* l, std::int64_t stride_l, T* g, std::int64_t stride_g, std::int64_t first,
                             int used, std::int64_t n) {
  V p[most * most], q[most * most];
  pack<T>(p, l, stride_l, first, used, n * n);
  pack<T>(q, g, stride_g, first, used, n * n);
  for (std::int64_t j = n - 1; j >= 0; --j) {
    const V* l_j = p + j * n;
    V* g_j = q + j * n;
    const V reciprocal = T(1) / l_j[j];
    V column_dot{};
    for (std::int64_t i = j + 1; i < n; ++i) column_dot += p[i * n + j] * q[i * n + j];
    const V d_bar = (g_j[j] - column_dot * reciprocal) * reciprocal;
    for (std::int64_t k = 0; k < j; ++k) g_j[k] -= d_bar * l_j[k];
    for (std::int64_t i = j + 1; i < n; ++i) {
      const V c_bar = q[i * n + j] *= reciprocal;
      const V* l_i = p + i * n;
      V* g_i = q + i * n;
      for (std::int64_t k = 0; k < j; ++k) {
        g_j[k] -= c_bar * l_i[k];
        g_i[k] -= c_bar * l_j[k];
      }
    }
    g_j[j] = d_bar * T(0.5);
  }
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < i; ++j) q[j * n + i] = q[i * n + j] *= T(0.5);
  unpack<T>(q, g, stride_g, first, used, n * n);
}

}  // namespace

void interleaved_cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                          void* l, std::int64_t stride_l, bool lower_only, bool nan_rows, std::int32_t* info) {
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_each_group<T>(count, n * n * n / 6, [&](std::int64_t first, int used) {
      cholesky_group<T>(static_cast<const T*>(a), stride_a, static_cast<T*>(l), stride_l, first, used, n, lower_only,
                        nan_rows, info);
    });
  });
}

void interleaved_cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                                  void* out, std::int64_t stride_out) {
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_each_group<T>(count, n * n * n / 3, [&](std::int64_t first, int used) {
      cholesky_inverse_group<T>(static_cast<const T*>(l), stride_l, static_cast<T*>(out), stride_out, first, used, n);
    });
  });
}

void interleaved_trsm(const TrsmArgs& s) {
  visit_float_dtype(s.dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t solves = s.then_transposed ? 2 : 1;
    for_each_group<T>(s.count, solves * s.n * s.n * s.nrhs / 2, [&](std::int64_t first, int used) {
      trsm_group<T>(s, static_cast<const T*>(s.t), static_cast<T*>(s.b), first, used);
    });
  });
}

void interleaved_cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                   std::int64_t stride_l, void* g, std::int64_t stride_g) {
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_each_group<T>(count, n * n * n / 3, [&](std::int64_t first, int used) {
      cholesky_backward_group<T>(static_cast<const T*>(l), stride_l, static_cast<T*>(g), stride_g, first, used, n);
    });
  });
}

}  // namespace vt::cpu
