// The CUDA backend's own kernels: strided maps, reductions, and the small matrix steps around
// cuBLAS/cuSOLVER. Every kernel walks its work with a grid-stride loop, so any size runs with a
// bounded grid; maps index in 32 bits where the sizes allow, else in 64.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../../core/dtype.hpp"
#include "../element.hpp"
#include "../special_math.hpp"
#include "element_steps.hpp"
#include "kernels.hpp"

namespace vt::cuda::kernels {

namespace {

constexpr int threads = 256;

// element_steps.hpp's fits_int32 counts on grid-stride steps under 2^24.
static_assert(std::int64_t{65535} * threads < std::int64_t{1} << 24, "a grid-stride step must stay under 2^24");

std::int64_t blocks_for(std::int64_t work) {
  const std::int64_t b = (work + threads - 1) / threads;
  return b < 1 ? 1 : (b > 65535 ? 65535 : b);
}

std::string launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(kernel) + ": " + cudaGetErrorString(e);
}

template <class Index = std::int64_t>
__device__ __forceinline__ Index grid_start() {
  return static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
}
template <class Index = std::int64_t>
__device__ __forceinline__ Index grid_step() {
  return static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
}

using steps::offsets_of;

// ---------------------------------------------------------------- maps
template <class Index, class T>
__global__ void fill_kernel(Layout<1> l, T* out, T value) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[1];
    offsets_of(l, i, off);
    out[off[0]] = value;
  }
}

template <class Index, class In, class Out>
__global__ void copy_kernel(Layout<2> l, const In* in, Out* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[2];
    offsets_of(l, i, off);
    out[off[1]] = element::convert<Out>(in[off[0]]);  // float to integer: truncated, NaN 0, saturated
  }
}

// Integers (apply admits neg, abs and sign for them) wrap as on the CPU (element.hpp).
template <class T>
__device__ __forceinline__ T apply_unary(UnaryKind kind, T x) {
  if constexpr (std::is_integral_v<T>) {
    switch (kind) {
      case UnaryKind::neg: return element::neg(x);
      case UnaryKind::abs: return element::abs_int(x);
      case UnaryKind::sign: return static_cast<T>((x > T(0)) - (x < T(0)));
      default:  // apply refuses every other map for integers first: a bug, as the CPU's internal error
        __trap();
        return x;
    }
  } else {
    constexpr bool f = std::is_same_v<T, float>;
    switch (kind) {
      case UnaryKind::neg: return -x;
      case UnaryKind::exp: return f ? expf(x) : exp(x);
      case UnaryKind::log: return f ? logf(x) : log(x);
      case UnaryKind::log1p: return f ? log1pf(x) : log1p(x);
      case UnaryKind::sqrt: return f ? sqrtf(x) : sqrt(x);
      case UnaryKind::square: return x * x;
      case UnaryKind::sin: return f ? sinf(x) : sin(x);
      case UnaryKind::cos: return f ? cosf(x) : cos(x);
      case UnaryKind::tanh: return f ? tanhf(x) : tanh(x);
      case UnaryKind::abs: return f ? fabsf(x) : fabs(x);
      case UnaryKind::sign:  // NaN stays NaN, as on the CPU
        return x != x ? x : static_cast<T>((x > T(0)) - (x < T(0)));
      case UnaryKind::log10: return f ? log10f(x) : log10(x);
      case UnaryKind::log2: return f ? log2f(x) : log2(x);
      case UnaryKind::exp2: return f ? exp2f(x) : exp2(x);
      case UnaryKind::exp10: return f ? exp10f(x) : exp10(x);
      case UnaryKind::expm1: return f ? expm1f(x) : expm1(x);
      case UnaryKind::erf: return f ? erff(x) : erf(x);
      case UnaryKind::erfc: return f ? erfcf(x) : erfc(x);
      case UnaryKind::lgamma: return f ? lgammaf(x) : lgamma(x);
      case UnaryKind::digamma: return special::digamma(x);
      case UnaryKind::trigamma: return special::trigamma(x);
      case UnaryKind::sigmoid: return special::sigmoid(x);
      case UnaryKind::softplus: return special::softplus(x);
      case UnaryKind::tan: return f ? tanf(x) : tan(x);
      case UnaryKind::arcsin: return f ? asinf(x) : asin(x);
      case UnaryKind::arccos: return f ? acosf(x) : acos(x);
      case UnaryKind::arctan: return f ? atanf(x) : atan(x);
      case UnaryKind::sinh: return f ? sinhf(x) : sinh(x);
      case UnaryKind::cosh: return f ? coshf(x) : cosh(x);
      case UnaryKind::arcsinh: return f ? asinhf(x) : asinh(x);
      case UnaryKind::arccosh: return f ? acoshf(x) : acosh(x);
      case UnaryKind::arctanh: return f ? atanhf(x) : atanh(x);
      case UnaryKind::floor: return f ? floorf(x) : floor(x);
      case UnaryKind::ceil: return f ? ceilf(x) : ceil(x);
    }
    return x;
  }
}

template <class Index, class T>
__global__ void unary_kernel(UnaryKind kind, Layout<2> l, const T* in, T* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[2];
    offsets_of(l, i, off);
    out[off[1]] = apply_unary(kind, in[off[0]]);
  }
}

// Integers (apply admits all but div and pow for them) wrap as on the CPU (element.hpp).
template <class T>
__device__ __forceinline__ T apply_binary(BinaryKind kind, T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    switch (kind) {
      case BinaryKind::add: return element::add(x, y);
      case BinaryKind::sub: return element::sub(x, y);
      case BinaryKind::mul: return element::mul(x, y);
      case BinaryKind::maximum: return x > y ? x : y;
      case BinaryKind::minimum: return x < y ? x : y;
      default:  // apply refuses div and pow for integers first: a bug, as the CPU's internal error
        __trap();
        return x;
    }
  } else {
    constexpr bool f = std::is_same_v<T, float>;
    switch (kind) {
      case BinaryKind::add: return x + y;
      case BinaryKind::sub: return x - y;
      case BinaryKind::mul: return x * y;
      case BinaryKind::div: return x / y;
      case BinaryKind::pow: return f ? powf(x, y) : pow(x, y);
      case BinaryKind::maximum: return x > y || isnan(x) ? x : y;  // NaN propagates, as on the CPU
      case BinaryKind::minimum: return x < y || isnan(x) ? x : y;  // NaN propagates, as on the CPU
      case BinaryKind::pow_base_grad: return y == T(0) ? T(0) : y * (f ? powf(x, y - T(1)) : pow(x, y - T(1)));
      case BinaryKind::arctan2: return f ? atan2f(x, y) : atan2(x, y);
      default:  // comparisons run compare_kernel: a bug, as the CPU's internal error
        __trap();
        return x;
    }
  }
}

template <class Index, class T>
__global__ void binary_kernel(BinaryKind kind, Layout<3> l, const T* a, const T* b, T* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[3];
    offsets_of(l, i, off);
    out[off[2]] = apply_binary(kind, a[off[0]], b[off[1]]);
  }
}

// Comparisons: operands of any one dtype (bool too), bools out.
template <class T>
__device__ __forceinline__ bool apply_compare(BinaryKind kind, T x, T y) {
  switch (kind) {
    case BinaryKind::less: return x < y;
    case BinaryKind::less_equal: return x <= y;
    case BinaryKind::greater: return x > y;
    case BinaryKind::greater_equal: return x >= y;
    case BinaryKind::equal: return x == y;
    case BinaryKind::not_equal: return x != y;
    default: __trap(); return false;  // the other kinds run binary_kernel: a bug
  }
}

template <class Index, class T>
__global__ void compare_kernel(BinaryKind kind, Layout<3> l, const T* a, const T* b, bool* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[3];
    offsets_of(l, i, off);
    out[off[2]] = apply_compare(kind, a[off[0]], b[off[1]]);
  }
}

template <class Index, class T>
__global__ void select_kernel(Layout<4> l, const bool* cond, const T* a, const T* b, T* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(l.total); i += grid_step<Index>()) {
    std::int64_t off[4];
    offsets_of(l, i, off);
    out[off[3]] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

// ---------------------------------------------------------------- scans
template <class Index, class T>
__global__ void cumsum_kernel(Layout<2> lines, std::int64_t n, std::int64_t step_in, std::int64_t step_out,
                              bool reverse, const T* in, T* out) {
  for (Index i = grid_start<Index>(); i < static_cast<Index>(lines.total); i += grid_step<Index>()) {
    std::int64_t off[2];
    offsets_of(lines, i, off);
    steps::cumsum_line(in + off[0], step_in, out + off[1], step_out, n, reverse);
  }
}

// ---------------------------------------------------------------- reductions
// Float sums accumulate in double; integer sums in int64, wrapping (element.hpp), so they are exact
// whenever the result fits, and an int32 result wraps as the CPU's does. max keeps the first NaN
// it meets, as the CPU backend does.
template <class T>
struct Accumulate {
  using Acc = std::conditional_t<std::is_integral_v<T>, std::int64_t, double>;
  static_assert(sizeof(Acc) == sizeof(double), "the two-pass partials are doubles' room");
  ReduceKind kind;
  __device__ __forceinline__ Acc init() const {
    if constexpr (std::is_integral_v<T>) return kind == ReduceKind::sum ? Acc(0) : Acc(element::int_min<T>());
    else return kind == ReduceKind::sum ? 0.0 : -INFINITY;
  }
  __device__ __forceinline__ Acc operator()(Acc a, Acc b) const {
    if constexpr (std::is_integral_v<T>) return kind == ReduceKind::sum ? element::add(a, b) : (b > a ? b : a);
    else {
      if (kind == ReduceKind::sum) return a + b;
      return b > a || isnan(b) ? b : a;
    }
  }
  // Exact: every T converts to Acc without rounding, and an integer result converts back wrapping.
  __device__ __forceinline__ T result(Acc a) const { return element::convert<T>(a); }
};

// One thread per output element: for many outputs over short reduced extents.
template <class T>
__global__ void reduce_by_thread(Accumulate<T> op, Layout<2> kept, Layout<1> reduced, const T* in, T* out) {
  using Acc = typename Accumulate<T>::Acc;
  for (std::int64_t o = grid_start(); o < kept.total; o += grid_step()) {
    std::int64_t base[2];
    offsets_of(kept, o, base);
    Acc acc = op.init();
    for (std::int64_t r = 0; r < reduced.total; ++r) {
      std::int64_t off[1];
      offsets_of(reduced, r, off);
      acc = op(acc, static_cast<Acc>(in[base[0] + off[0]]));
    }
    out[base[1]] = op.result(acc);
  }
}

// A block's threads combine their values; every thread gets the result. Safe to call again
// at once: the last barrier keeps the next call's writes behind this call's reads.
template <class T>
__device__ typename Accumulate<T>::Acc block_combine(Accumulate<T> op, typename Accumulate<T>::Acc acc) {
  using Acc = typename Accumulate<T>::Acc;
  __shared__ Acc partial[threads];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int width = threads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] = op(partial[threadIdx.x], partial[threadIdx.x + width]);
    __syncthreads();
  }
  const Acc result = partial[0];
  __syncthreads();
  return result;
}

// One block per output element: threads share the reduced extent, then combine.
template <class T>
__global__ void reduce_by_block(Accumulate<T> op, Layout<2> kept, Layout<1> reduced, const T* in, T* out) {
  using Acc = typename Accumulate<T>::Acc;
  for (std::int64_t o = blockIdx.x; o < kept.total; o += gridDim.x) {
    std::int64_t base[2];
    offsets_of(kept, o, base);
    Acc acc = op.init();
    for (std::int64_t r = threadIdx.x; r < reduced.total; r += blockDim.x) {
      std::int64_t off[1];
      offsets_of(reduced, r, off);
      acc = op(acc, static_cast<Acc>(in[base[0] + off[0]]));
    }
    acc = block_combine(op, acc);
    if (threadIdx.x == 0) out[base[1]] = op.result(acc);
  }
}

// Full reductions, first pass: every block reduces its grid-stride share into partials[block].
template <class T>
__global__ void reduce_to_partials(Accumulate<T> op, Layout<1> reduced, const T* in,
                                   typename Accumulate<T>::Acc* partials) {
  using Acc = typename Accumulate<T>::Acc;
  Acc acc = op.init();
  for (std::int64_t r = grid_start(); r < reduced.total; r += grid_step()) {
    std::int64_t off[1];
    offsets_of(reduced, r, off);
    acc = op(acc, static_cast<Acc>(in[off[0]]));
  }
  acc = block_combine(op, acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Second pass: one block combines the partials, in a fixed order (results do not vary run to run).
template <class T>
__global__ void reduce_partials(Accumulate<T> op, const typename Accumulate<T>::Acc* partials, int count, T* out) {
  using Acc = typename Accumulate<T>::Acc;
  Acc acc = op.init();
  for (int p = threadIdx.x; p < count; p += blockDim.x) acc = op(acc, partials[p]);
  acc = block_combine(op, acc);
  if (threadIdx.x == 0) *out = op.result(acc);
}

// ---------------------------------------------------------------- gathers and scatters
// The element of the axis that index i addresses, or -1 when it is out of range (as on the CPU).
template <class I>
__device__ __forceinline__ std::int64_t resolve_index(I i, const IndexedAxis& axis) {
  const std::int64_t j = static_cast<std::int64_t>(i) + (i < 0 && axis.negative_from_end ? axis.length : 0);
  return j >= 0 && j < axis.length ? j : -1;
}

// bad[0] keeps the code of the lowest offset seen (steps::bad_index_code: the largest), 0 while
// there is none.
__device__ __forceinline__ void note_bad(std::int64_t* bad, std::int64_t offset) {
  atomicMax(reinterpret_cast<long long*>(bad), static_cast<long long>(steps::bad_index_code(offset)));
}

// The value of the first out-of-range index, once its offset is known (one thread, after the pass).
template <class I>
__global__ void bad_value_kernel(const I* indices, std::int64_t* bad) {
  if (bad[0] != 0) bad[1] = static_cast<std::int64_t>(indices[steps::bad_index_offset(bad[0])]);
}

template <class Index, class T, class I>
__global__ void gather_kernel(Layout<3> l, IndexedAxis axis, const T* in, const I* indices, T* out, std::int64_t* bad) {
  for (Index e = grid_start<Index>(); e < static_cast<Index>(l.total); e += grid_step<Index>()) {
    std::int64_t off[3];
    offsets_of(l, e, off);
    const std::int64_t j = resolve_index(indices[off[1]], axis);
    if (j < 0) {
      note_bad(bad, off[1]);
      out[off[2]] = T(0);
    } else {
      out[off[2]] = in[off[0] + j * axis.stride];
    }
  }
}

__device__ __forceinline__ unsigned int bits_of(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned long long bits_of(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ float value_of(unsigned int b) { return __uint_as_float(b); }
__device__ __forceinline__ double value_of(unsigned long long b) {
  return __longlong_as_double(static_cast<long long>(b));
}

// Integer sums wrap modulo 2^bits, as on the CPU; double atomicAdd needs sm_60.
template <class T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, std::int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  else atomicAdd(p, v);
}

// Floats have no atomicMax: compare-and-swap on the bit pattern until v is stored or is not larger.
// A NaN wins, as on the CPU.
template <class T>
__device__ __forceinline__ void atomic_max(T* p, T v) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    atomicMax(reinterpret_cast<long long*>(p), static_cast<long long>(v));
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    atomicMax(p, v);
  } else {
    using Bits = decltype(bits_of(v));
    Bits* word = reinterpret_cast<Bits*>(p);
    Bits seen = *word;
    for (;;) {
      const T current = value_of(seen);
      if (!(v > current || (isnan(v) && !isnan(current)))) return;
      const Bits previous = atomicCAS(word, seen, bits_of(v));
      if (previous == seen) return;
      seen = previous;
    }
  }
}

template <class Index, class T, class I>
__global__ void scatter_kernel(ScatterKind kind, Layout<3> l, IndexedAxis axis, const T* updates, const I* indices,
                               T* out, std::int64_t* bad, std::int64_t* winners) {
  for (Index e = grid_start<Index>(); e < static_cast<Index>(l.total); e += grid_step<Index>()) {
    std::int64_t off[3];
    offsets_of(l, e, off);
    const std::int64_t j = resolve_index(indices[off[1]], axis);
    if (j < 0) {
      note_bad(bad, off[1]);
      continue;
    }
    const std::int64_t at = off[2] + j * axis.stride;
    switch (kind) {
      case ScatterKind::sum: atomic_add(out + at, updates[off[0]]); break;
      case ScatterKind::max: atomic_max(out + at, updates[off[0]]); break;
      case ScatterKind::assign:  // the last update in row-major order wins: the largest e
        atomicMax(reinterpret_cast<long long*>(winners + at), static_cast<long long>(e));
        break;
    }
  }
}

// assign, second pass: each element gets the update that won it.
template <class Index, class T, class I>
__global__ void assign_kernel(Layout<3> l, IndexedAxis axis, const T* updates, const I* indices, T* out,
                              const std::int64_t* winners) {
  for (Index e = grid_start<Index>(); e < static_cast<Index>(l.total); e += grid_step<Index>()) {
    std::int64_t off[3];
    offsets_of(l, e, off);
    const std::int64_t j = resolve_index(indices[off[1]], axis);
    if (j < 0) continue;
    const std::int64_t at = off[2] + j * axis.stride;
    if (winners[at] == static_cast<std::int64_t>(e)) out[at] = updates[off[0]];
  }
}

// ---------------------------------------------------------------- matrix steps
__global__ void pointer_kernel(void** pointers, const char* base, std::int64_t stride_bytes, std::int64_t count) {
  for (std::int64_t i = grid_start(); i < count; i += grid_step())
    pointers[i] = const_cast<char*>(base) + i * stride_bytes;
}

// The matrix steps: one work item per thread (element_steps.hpp), over count n x n matrices.
template <class T>
__global__ void copy_lower_kernel(std::int64_t count, std::int64_t n, const T* a, std::int64_t sa, T* l,
                                  std::int64_t sl) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step()) steps::copy_lower(t, n, a, sa, l, sl);
}

template <class T>
__global__ void poison_kernel(std::int64_t count, std::int64_t n, T* l, std::int64_t sl, const std::int32_t* info) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step()) steps::poison_failed_rows(t, n, l, sl, info);
}

// in <- the unknowns of op(T) x = in, written to out; `in` is used up. Column by column: once x_k
// is known, every thread removes its multiple from the later right-hand sides it owns. x_k is
// read from `in` at step k and never written again, so one barrier per step suffices. Where op(T)
// = T the threads read a column of T, 32 rows apart, but each row's cache lines serve the next
// columns from L1: a variant that read rows (a warp per row, tiles of 32 unknowns) was slower
// (docs/gpu.md).
template <class T>
__device__ void substitute(const T* t, std::int64_t n, bool lower, bool transpose, T* in, T* out) {
  const bool forward = lower != transpose;  // op(T) is lower triangular
  for (std::int64_t step = 0; step < n; ++step) {
    const std::int64_t k = forward ? step : n - 1 - step;
    const T xk = in[k] / t[k * n + k];
    if (threadIdx.x == 0) out[k] = xk;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
      if (forward ? i > k : i < k) in[i] -= (transpose ? t[k * n + i] : t[i * n + k]) * xk;
    __syncthreads();
  }
}

template <class T>
__global__ void vector_solve_kernel(TrsmArgs a) {
  extern __shared__ unsigned char shared_bytes[];
  T* const x = reinterpret_cast<T*>(shared_bytes);
  T* const y = x + a.n;
  for (std::int64_t m = blockIdx.x; m < a.count; m += gridDim.x) {
    const T* tri = static_cast<const T*>(a.t) + m * a.stride_t;
    T* rhs = static_cast<T*>(a.b) + m * a.stride_b;
    for (std::int64_t i = threadIdx.x; i < a.n; i += blockDim.x) x[i] = rhs[i];
    __syncthreads();
    substitute(tri, a.n, a.lower, a.transpose, x, y);
    const T* result = y;
    if (a.then_transposed) {
      substitute(tri, a.n, a.lower, !a.transpose, y, x);
      result = x;
    }
    for (std::int64_t i = threadIdx.x; i < a.n; i += blockDim.x) rhs[i] = result[i];
    __syncthreads();  // x and y are reused by the next system
  }
}

template <class T>
__global__ void check_diagonal_kernel(std::int64_t count, std::int64_t n, const T* l, std::int64_t sl,
                                      std::int32_t* info) {
  for (std::int64_t m = grid_start(); m < count; m += grid_step()) steps::check_diagonal(m, n, l, sl, info);
}

template <class T>
__global__ void lower_triangle_kernel(std::int64_t count, std::int64_t n, T* x, std::int64_t s, T diagonal_scale) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step())
    steps::lower_triangle(t, n, x, s, diagonal_scale);
}

template <class T>
__global__ void transpose_kernel(std::int64_t count, std::int64_t n, const T* in, std::int64_t si, T* out,
                                 std::int64_t so) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step()) steps::transpose(t, n, in, si, out, so);
}

template <class T>
__global__ void symmetrize_kernel(std::int64_t count, std::int64_t n, T* x, std::int64_t s) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step()) steps::symmetrize(t, n, x, s);
}

// Over count rows x cols matrices (qr, eigh).
template <class T>
__global__ void flag_nonfinite_kernel(std::int64_t count, std::int64_t rows, std::int64_t cols, const T* x,
                                      std::int64_t s, std::int32_t* info) {
  for (std::int64_t t = grid_start(); t < count * rows * cols; t += grid_step())
    steps::flag_nonfinite(t, rows, cols, x, s, info);
}

template <class T>
__global__ void zero_flagged_kernel(std::int64_t count, std::int64_t rows, std::int64_t cols, T* x, std::int64_t s,
                                    const std::int32_t* info) {
  for (std::int64_t t = grid_start(); t < count * rows * cols; t += grid_step())
    steps::zero_flagged(t, rows, cols, x, s, info);
}

template <class T>
__global__ void upper_trapezoid_kernel(std::int64_t count, std::int64_t rows, std::int64_t cols, T* x, std::int64_t s) {
  for (std::int64_t t = grid_start(); t < count * rows * cols; t += grid_step())
    steps::upper_trapezoid(t, rows, cols, x, s);
}

template <class T>
__global__ void mirror_lower_kernel(std::int64_t count, std::int64_t n, T* x, std::int64_t s) {
  for (std::int64_t t = grid_start(); t < count * n * n; t += grid_step()) steps::mirror_lower(t, n, x, s);
}

__global__ void merge_info_kernel(std::int64_t count, std::int32_t* info, const std::int32_t* solver_info) {
  for (std::int64_t m = grid_start(); m < count; m += grid_step()) steps::merge_info(m, info, solver_info);
}

cudaStream_t st(Stream s) { return static_cast<cudaStream_t>(s); }

// Calls fn with the index type a map over `l` can use (element_steps.hpp: fits_int32).
template <int N, class Fn>
void with_index(const Layout<N>& l, Fn&& fn) {
  if (steps::fits_int32(l)) fn(std::int32_t{});
  else fn(std::int64_t{});
}

// Calls fn with a value of the C++ type of an index dtype (the ops refuse other index types).
template <class Fn>
void visit_index_dtype(DType d, Fn&& fn) {
  if (d == DType::i32) fn(std::int32_t{});
  else fn(std::int64_t{});
}

}  // namespace

// ---------------------------------------------------------------- launchers
std::string fill(Stream s, DType dtype, const Layout<1>& l, void* out, double value) {
  if (l.total == 0) return {};
  visit_any_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    with_index(l, [&](auto index) {
      fill_kernel<decltype(index), T>
          <<<blocks_for(l.total), threads, 0, st(s)>>>(l, static_cast<T*>(out), element::convert<T>(value));
    });
  });
  return launched("fill");
}

std::string copy(Stream s, DType in_dtype, DType out_dtype, const Layout<2>& l, const void* in, void* out) {
  if (l.total == 0) return {};
  visit_any_dtype(in_dtype, [&](auto zi) {
    using In = decltype(zi);
    visit_any_dtype(out_dtype, [&](auto zo) {
      using Out = decltype(zo);
      with_index(l, [&](auto index) {
        copy_kernel<decltype(index), In, Out>
            <<<blocks_for(l.total), threads, 0, st(s)>>>(l, static_cast<const In*>(in), static_cast<Out*>(out));
      });
    });
  });
  return launched("copy");
}

std::string unary(Stream s, UnaryKind kind, DType dtype, const Layout<2>& l, const void* in, void* out) {
  if (l.total == 0) return {};
  visit_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    with_index(l, [&](auto index) {
      unary_kernel<decltype(index), T>
          <<<blocks_for(l.total), threads, 0, st(s)>>>(kind, l, static_cast<const T*>(in), static_cast<T*>(out));
    });
  });
  return launched("unary");
}

std::string binary(Stream s, BinaryKind kind, DType dtype, const Layout<3>& l, const void* a, const void* b,
                   void* out) {
  if (l.total == 0) return {};
  if (is_comparison(kind)) {
    visit_any_dtype(dtype, [&](auto z) {
      using T = decltype(z);
      with_index(l, [&](auto index) {
        compare_kernel<decltype(index), T><<<blocks_for(l.total), threads, 0, st(s)>>>(
            kind, l, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<bool*>(out));
      });
    });
    return launched("compare");
  }
  visit_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    with_index(l, [&](auto index) {
      binary_kernel<decltype(index), T><<<blocks_for(l.total), threads, 0, st(s)>>>(
          kind, l, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out));
    });
  });
  return launched("binary");
}

std::string select(Stream s, DType dtype, const Layout<4>& l, const void* cond, const void* a, const void* b,
                   void* out) {
  if (l.total == 0) return {};
  visit_any_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    with_index(l, [&](auto index) {
      select_kernel<decltype(index), T><<<blocks_for(l.total), threads, 0, st(s)>>>(
          l, static_cast<const bool*>(cond), static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out));
    });
  });
  return launched("select");
}

std::string reduce(Stream s, ReduceKind kind, DType dtype, const Layout<2>& kept, const Layout<1>& reduced,
                   const void* in, void* out, double* partials) {
  if (kept.total == 0) return {};
  visit_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    const Accumulate<T> op{kind};
    using Acc = typename Accumulate<T>::Acc;
    if (kept.total == 1 && reduced.total >= two_pass_min && partials) {  // one output: both at offset 0
      const int blocks = static_cast<int>(std::min<std::int64_t>(two_pass_blocks, blocks_for(reduced.total)));
      Acc* const acc_partials = reinterpret_cast<Acc*>(partials);  // doubles' room, as many bytes
      reduce_to_partials<T><<<blocks, threads, 0, st(s)>>>(op, reduced, static_cast<const T*>(in), acc_partials);
      reduce_partials<T><<<1, threads, 0, st(s)>>>(op, acc_partials, blocks, static_cast<T*>(out));
      return;
    }
    // A block per output when the reduced elements are adjacent in memory (its threads read them
    // coalesced) or when there are too few outputs to occupy the GPU otherwise; else a thread per
    // output, so that neighbouring threads read neighbouring outputs' elements (sums over a
    // leading or the batch axis).
    const bool reduced_contiguous = reduced.rank > 0 && reduced.stride[0][reduced.rank - 1] == 1;
    const std::int64_t grid = std::min<std::int64_t>(kept.total, 65535);
    if (reduced.total >= 64 && (reduced_contiguous || kept.total < 4096))
      reduce_by_block<T>
          <<<grid, threads, 0, st(s)>>>(op, kept, reduced, static_cast<const T*>(in), static_cast<T*>(out));
    else
      reduce_by_thread<T><<<blocks_for(kept.total), threads, 0, st(s)>>>(op, kept, reduced, static_cast<const T*>(in),
                                                                         static_cast<T*>(out));
  });
  return launched("reduce");
}

std::string cumsum(Stream s, DType dtype, const Layout<2>& lines, std::int64_t n, std::int64_t step_in,
                   std::int64_t step_out, bool reverse, const void* in, void* out) {
  if (lines.total == 0 || n == 0) return {};
  visit_float_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    with_index(lines, [&](auto index) {
      cumsum_kernel<decltype(index), T><<<blocks_for(lines.total), threads, 0, st(s)>>>(
          lines, n, step_in, step_out, reverse, static_cast<const T*>(in), static_cast<T*>(out));
    });
  });
  return launched("cumsum");
}

std::string gather(Stream s, DType dtype, DType index_dtype, const Layout<3>& l, IndexedAxis axis, const void* in,
                   const void* indices, void* out, std::int64_t* bad) {
  if (l.total == 0) return {};
  visit_any_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    visit_index_dtype(index_dtype, [&](auto zi) {
      using I = decltype(zi);
      with_index(l, [&](auto index) {
        gather_kernel<decltype(index), T, I><<<blocks_for(l.total), threads, 0, st(s)>>>(
            l, axis, static_cast<const T*>(in), static_cast<const I*>(indices), static_cast<T*>(out), bad);
      });
      bad_value_kernel<I><<<1, 1, 0, st(s)>>>(static_cast<const I*>(indices), bad);
    });
  });
  return launched("gather");
}

std::string scatter(Stream s, ScatterKind kind, DType dtype, DType index_dtype, const Layout<3>& l, IndexedAxis axis,
                    const void* updates, const void* indices, void* out, std::int64_t* bad, std::int64_t* winners) {
  if (l.total == 0) return {};
  visit_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    visit_index_dtype(index_dtype, [&](auto zi) {
      using I = decltype(zi);
      const auto* u = static_cast<const T*>(updates);
      const auto* ix = static_cast<const I*>(indices);
      with_index(l, [&](auto index) {
        using Index = decltype(index);
        scatter_kernel<Index, T, I>
            <<<blocks_for(l.total), threads, 0, st(s)>>>(kind, l, axis, u, ix, static_cast<T*>(out), bad, winners);
        if (kind == ScatterKind::assign)
          assign_kernel<Index, T, I>
              <<<blocks_for(l.total), threads, 0, st(s)>>>(l, axis, u, ix, static_cast<T*>(out), winners);
      });
      bad_value_kernel<I><<<1, 1, 0, st(s)>>>(ix, bad);
    });
  });
  return launched("scatter");
}

std::string pointer_array(Stream s, void** pointers, const void* base, std::int64_t stride_bytes, std::int64_t count) {
  if (count == 0) return {};
  pointer_kernel<<<blocks_for(count), threads, 0, st(s)>>>(pointers, static_cast<const char*>(base), stride_bytes,
                                                           count);
  return launched("pointer_array");
}

#define VTAPE_MATRIX_LAUNCH(kernel, ...)                                      \
  do {                                                                        \
    if (count == 0 || n == 0) return {};                                      \
    visit_float_dtype(dtype, [&](auto z) {                                    \
      using T = decltype(z);                                                  \
      kernel<T><<<blocks_for(count* n* n), threads, 0, st(s)>>>(__VA_ARGS__); \
    });                                                                       \
    return launched(#kernel);                                                 \
  } while (0)

std::string copy_lower(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t sa,
                       void* l, std::int64_t sl) {
  VTAPE_MATRIX_LAUNCH(copy_lower_kernel, count, n, static_cast<const T*>(a), sa, static_cast<T*>(l), sl);
}
std::string poison_failed_rows(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* l, std::int64_t sl,
                               const std::int32_t* info) {
  VTAPE_MATRIX_LAUNCH(poison_kernel, count, n, static_cast<T*>(l), sl, info);
}
std::string lower_triangle(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* m, std::int64_t stride,
                           double diagonal_scale) {
  VTAPE_MATRIX_LAUNCH(lower_triangle_kernel, count, n, static_cast<T*>(m), stride, static_cast<T>(diagonal_scale));
}
std::string transpose(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* in, std::int64_t si,
                      void* out, std::int64_t so) {
  VTAPE_MATRIX_LAUNCH(transpose_kernel, count, n, static_cast<const T*>(in), si, static_cast<T*>(out), so);
}
std::string symmetrize(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* m, std::int64_t stride) {
  VTAPE_MATRIX_LAUNCH(symmetrize_kernel, count, n, static_cast<T*>(m), stride);
}
std::string mirror_lower(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* x, std::int64_t stride) {
  VTAPE_MATRIX_LAUNCH(mirror_lower_kernel, count, n, static_cast<T*>(x), stride);
}
#undef VTAPE_MATRIX_LAUNCH

#define VTAPE_RECTANGLE_LAUNCH(kernel, ...)                                         \
  do {                                                                              \
    if (count == 0 || rows == 0 || cols == 0) return {};                            \
    visit_float_dtype(dtype, [&](auto z) {                                          \
      using T = decltype(z);                                                        \
      kernel<T><<<blocks_for(count* rows* cols), threads, 0, st(s)>>>(__VA_ARGS__); \
    });                                                                             \
    return launched(#kernel);                                                       \
  } while (0)

std::string flag_nonfinite(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols,
                           const void* x, std::int64_t stride, std::int32_t* info) {
  VTAPE_RECTANGLE_LAUNCH(flag_nonfinite_kernel, count, rows, cols, static_cast<const T*>(x), stride, info);
}
std::string zero_flagged(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x,
                         std::int64_t stride, const std::int32_t* info) {
  VTAPE_RECTANGLE_LAUNCH(zero_flagged_kernel, count, rows, cols, static_cast<T*>(x), stride, info);
}
std::string upper_trapezoid(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x,
                            std::int64_t stride) {
  VTAPE_RECTANGLE_LAUNCH(upper_trapezoid_kernel, count, rows, cols, static_cast<T*>(x), stride);
}
#undef VTAPE_RECTANGLE_LAUNCH

std::string merge_info(Stream s, std::int64_t count, std::int32_t* info, const std::int32_t* solver_info) {
  if (count == 0) return {};
  merge_info_kernel<<<blocks_for(count), threads, 0, st(s)>>>(count, info, solver_info);
  return launched("merge_info");
}

std::string check_factor_diagonal(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                  std::int64_t sl, std::int32_t* info) {
  if (count == 0 || n == 0) return {};
  visit_float_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    check_diagonal_kernel<T><<<blocks_for(count), threads, 0, st(s)>>>(count, n, static_cast<const T*>(l), sl, info);
  });
  return launched("check_factor_diagonal");
}

std::string vector_solve(Stream s, const TrsmArgs& a) {
  if (a.count == 0 || a.n == 0) return {};
  const int block = a.n <= 64 ? 64 : a.n <= 128 ? 128 : threads;
  const int grid = static_cast<int>(std::min<std::int64_t>(a.count, std::int64_t{1} << 20));
  visit_float_dtype(a.dtype, [&](auto z) {
    using T = decltype(z);
    vector_solve_kernel<T><<<grid, block, 2 * a.n * sizeof(T), st(s)>>>(a);
  });
  return launched("vector_solve");
}

}  // namespace vt::cuda::kernels
