#pragma once
// The CUDA backend's own kernels (kernels.cu), behind plain C++ declarations so that the rest of
// the backend compiles with the host compiler. Every launcher enqueues on `stream` and returns
// without waiting; launch errors come back as a message (empty on success).
#include <array>
#include <cstdint>
#include <string>

#include "../../core/dtype.hpp"
#include "../../core/backend.hpp"

namespace vt::cuda::kernels {

using Stream = void*;  // a cudaStream_t

// Kernels take at most this many axes after merging contiguous ones (merged_axes.hpp).
constexpr int max_rank = 8;

// N strided operands of one shape, flattened for a kernel argument.
template <int N>
struct Layout {
  int rank = 0;
  std::int64_t total = 1;  // elements visited
  std::int64_t shape[max_rank] = {};
  std::int64_t stride[N][max_rank] = {};
};

std::string fill(Stream s, DType dtype, const Layout<1>& layout, void* out, double value);
std::string copy(Stream s, DType in_dtype, DType out_dtype, const Layout<2>& layout, const void* in, void* out);
std::string unary(Stream s, UnaryKind kind, DType dtype, const Layout<2>& layout, const void* in, void* out);
// dtype is the operands'; a comparison (is_comparison) writes bools, any other kind that dtype.
std::string binary(Stream s, BinaryKind kind, DType dtype, const Layout<3>& layout, const void* a, const void* b,
                   void* out);
// cond is bool; dtype is a's, b's and out's.
std::string select(Stream s, DType dtype, const Layout<4>& layout, const void* cond, const void* a, const void* b,
                   void* out);
// out[o] = reduce over r of in[kept(o) + reduced(r)]: `kept` walks (in, out) over the output's
// elements, `reduced` walks in over the reduced axes.
// A full reduction (one output) over at least `two_pass_min` elements runs in two passes: up to
// `two_pass_blocks` blocks each leave a partial result in `partials` (device memory for that many
// doubles, the caller's), then one block combines them. Else `partials` may be null.
constexpr std::int64_t two_pass_min = std::int64_t{1} << 16;
constexpr int two_pass_blocks = 1024;
std::string reduce(Stream s, ReduceKind kind, DType dtype, const Layout<2>& kept, const Layout<1>& reduced,
                   const void* in, void* out, double* partials);

// Running sums along one axis: `lines` walks (in, out) over the first element of every line,
// each line has n elements step_in and step_out apart. One thread per line (element_steps.hpp:
// cumsum_line).
std::string cumsum(Stream s, DType dtype, const Layout<2>& lines, std::int64_t n, std::int64_t step_in,
                   std::int64_t step_out, bool reverse, const void* in, void* out);
// Gathers and scatters along an indexed axis (Backend::gather, scatter): `l` walks (in or updates,
// indices, out) over the iteration space, and out-of-range indices are skipped. For the error,
// `bad` (two int64, both 0 on entry) gets the code (steps::bad_index_code) of the lowest offset
// into `indices` of an out-of-range index in bad[0] (0 means none, as in a factorization's info)
// and its value in bad[1]. `scatter` adds and takes maxima with atomics; `assign` takes two
// passes and `winners`: one int64 per element of out's extent, all -1 on entry, where the first
// pass leaves the last update (in row-major order) to land on each element.
std::string gather(Stream s, DType dtype, DType index_dtype, const Layout<3>& l, IndexedAxis axis, const void* in,
                   const void* indices, void* out, std::int64_t* bad);
std::string scatter(Stream s, ScatterKind kind, DType dtype, DType index_dtype, const Layout<3>& l, IndexedAxis axis,
                    const void* updates, const void* indices, void* out, std::int64_t* bad, std::int64_t* winners);

// pointers[i] = base + i * stride_bytes, for the pointer-array (batched) cuBLAS/cuSOLVER calls.
std::string pointer_array(Stream s, void** pointers, const void* base, std::int64_t stride_bytes, std::int64_t count);

// Row-major n x n matrices at a stride, for the Cholesky factorization: `copy_lower` copies a's
// lower triangle into l; `check_factor_diagonal` sets info[i] to the first non-finite pivot
// (1-based) if that comes before the minor cuSOLVER reported (or it reported none);
// `poison_failed_rows` turns a failed factor's rows NaN from its failing minor on (device `info`),
// for checked factorizations.
std::string copy_lower(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                       void* l, std::int64_t stride_l);
std::string poison_failed_rows(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* l,
                               std::int64_t stride_l, const std::int32_t* info);
std::string check_factor_diagonal(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                  std::int64_t stride_l, std::int32_t* info);
// `lower_triangle` zeroes the strict upper triangle and scales the diagonal (by 1 after a
// factorization, by 1/2 for Phi in the Cholesky adjoint); for the adjoint also: `transpose` writes out_i = in_i^T;
// `symmetrize` sets m_i = (m_i + m_i^T) / 2 in place.
std::string lower_triangle(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* m, std::int64_t stride,
                           double diagonal_scale);
std::string transpose(Stream s, DType dtype, std::int64_t count, std::int64_t n, const void* in, std::int64_t stride_in,
                      void* out, std::int64_t stride_out);
std::string symmetrize(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* m, std::int64_t stride);

// Around qr and eigh, over count row-major rows x cols matrices at a stride (element_steps.hpp):
// `flag_nonfinite` sets info[i] = -1 where matrix i has a NaN or Inf (info starts zeroed);
// `zero_flagged` sets the matrices with info[i] != 0 to 0; `upper_trapezoid` zeroes below the
// diagonal; `mirror_lower` copies square matrices' lower triangle over their upper one;
// `merge_info` keeps a solver's info[i] where info[i] is 0, a negative one (LAPACK's: argument
// -info was invalid, which only a bug here can cause) as solver_bad_argument + info, apart from -1.
std::string flag_nonfinite(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols,
                           const void* x, std::int64_t stride, std::int32_t* info);
std::string zero_flagged(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x,
                         std::int64_t stride, const std::int32_t* info);
std::string upper_trapezoid(Stream s, DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x,
                            std::int64_t stride);
std::string mirror_lower(Stream s, DType dtype, std::int64_t count, std::int64_t n, void* x, std::int64_t stride);
std::string merge_info(Stream s, std::int64_t count, std::int32_t* info, const std::int32_t* solver_info);
constexpr std::int32_t solver_bad_argument = -(1 << 20);

// The largest order vector_solve takes (its right-hand side lives in shared memory).
constexpr std::int64_t vector_solve_max_n = 2048;
// Triangular solves with one right-hand side, one block per system: op(T_i) x = b_i, then with
// `then_transposed` op(T_i)^T z = x in the same launch (a Cholesky solve in one kernel, where two
// trsmBatched calls with nrhs = 1 would each stream every factor). Same arguments as TrsmArgs.
std::string vector_solve(Stream s, const TrsmArgs& args);

}  // namespace vt::cuda::kernels
