// CUDA backend, matrix side: batched GEMM (cuBLAS strided-batched), Cholesky (cuSOLVER
// potrfBatched, or Xpotrf per matrix for a few large ones), triangular solves (cuBLAS trsmBatched,
// or one fused kernel for vector right-hand sides) and the Cholesky adjoint built from them.
// Row-major requests become column-major calls on the same memory (column_major.hpp). Batched
// library calls take at most max_batch matrices at once; larger batches go in chunks.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../core/error.hpp"
#include "column_major.hpp"
#include "cuda_backend.hpp"
#include "kernels.hpp"

namespace vt::cuda {

namespace {

int narrow(std::int64_t v, const char* what) {
  if (v > INT_MAX) fail("cuda: {} = {} exceeds what cuBLAS/cuSOLVER take (int)", what, v);
  return static_cast<int>(v);
}

cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// The most matrices one batched cuBLAS/cuSOLVER call is given (their grids cap a dimension there).
constexpr std::int64_t max_batch = 65535;

// Calls fn(first, size) over [0, count) in chunks of at most max_batch.
template <class Fn>
void in_chunks(std::int64_t count, Fn&& fn) {
  for (std::int64_t first = 0; first < count; first += max_batch) fn(first, std::min(max_batch, count - first));
}

template <class T>
const T* advance(const void* p, DType dtype, std::int64_t elements) {
  return reinterpret_cast<const T*>(static_cast<const char*>(p) + elements * static_cast<std::int64_t>(size_of(dtype)));
}
template <class T>
T* advance(void* p, DType dtype, std::int64_t elements) {
  return reinterpret_cast<T*>(static_cast<char*>(p) + elements * static_cast<std::int64_t>(size_of(dtype)));
}

// cuBLAS and cuSOLVER are called for float32 or float64; apply refuses integer inputs to every
// matrix op first, so an integer here is an internal error (never a float32 call on int data).
void require_floating(DType dtype, const char* call) {
  if (!is_floating(dtype)) fail("cuda {}: {} matrices (internal error: apply refuses integers)", call, name_of(dtype));
}

bool out_of_workspace(cublasStatus_t s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
bool out_of_workspace(cusolverStatus_t s) { return s == CUSOLVER_STATUS_ALLOC_FAILED; }

// potrfBatched factors every size measured at least as fast as one blocked Xpotrf per matrix (on an
// H200: the seed, B = 2048 and n = 256, 9.8 ms a call against 337; the CO2 fit, B = 8 and n = 521,
// 7.2 ms a round against 7.2, and 7.8 against 9.0 in another run). For a few very large matrices (not measured) Xpotrf's GEMM-based trailing updates
// should win. VTAPE_CUDA_POTRF=batched|single forces one way, for benchmarks.
bool factor_one_by_one(std::int64_t count, std::int64_t n) {
  static const char* forced = std::getenv("VTAPE_CUDA_POTRF");
  if (forced && std::strcmp(forced, "batched") == 0) return false;
  if (forced && std::strcmp(forced, "single") == 0) return true;
  return n >= 2048 && count <= 16;
}

}  // namespace

template <class Call>
auto CudaBackend::with_workspace(Call call) {
  auto status = call();
  if (out_of_workspace(status) && !recording_) {
    trim_memory();
    status = call();
  }
  return status;
}

Scratch CudaBackend::pointers(DType dtype, const void* base, std::int64_t stride, std::int64_t count) {
  Scratch array(*this, static_cast<std::size_t>(count) * sizeof(void*));
  check(kernels::pointer_array(stream_, static_cast<void**>(array.data()), base,
                               stride * static_cast<std::int64_t>(size_of(dtype)), count));
  return array;
}

void CudaBackend::gemm(const GemmArgs& g) {
  require_floating(g.dtype, "gemm");
  if (g.count == 0 || g.m == 0 || g.n == 0) return;
  auto entered = enter();
  if (g.k == 0) {  // an empty sum: C = beta C, without relying on cuBLAS for the degenerate case
    if (g.beta != 0) fail("cuda gemm: k = 0 with beta != 0 is not supported");
    const Shape shape{g.count, g.m, g.n}, strides{g.stride_c, g.n, 1};
    fill(View{g.dtype, g.c, shape, strides}, 0.0);
    return;
  }
  const ColumnMajorGemm c = column_major(g);
  const int rows = narrow(c.rows, "gemm rows"), cols = narrow(c.cols, "gemm columns"), inner = narrow(c.inner, "gemm k");
  const int lda = narrow(std::max<std::int64_t>(c.ld_first, 1), "gemm lda");
  const int ldb = narrow(std::max<std::int64_t>(c.ld_second, 1), "gemm ldb");
  const int ldc = narrow(c.ldc, "gemm ldc");
  in_chunks(g.count, [&](std::int64_t first, std::int64_t size) {
    const int count = static_cast<int>(size);
    check(with_workspace([&] {
            if (g.dtype == DType::f64) {
              const double alpha = g.alpha, beta = g.beta;
              return cublasDgemmStridedBatched(
                  blas_, op(c.trans_first), op(c.trans_second), rows, cols, inner, &alpha,
                  advance<double>(c.first, g.dtype, first * c.stride_first), lda, c.stride_first,
                  advance<double>(c.second, g.dtype, first * c.stride_second), ldb, c.stride_second, &beta,
                  advance<double>(g.c, g.dtype, first * g.stride_c), ldc, g.stride_c, count);
            }
            const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
            return cublasSgemmStridedBatched(
                blas_, op(c.trans_first), op(c.trans_second), rows, cols, inner, &alpha,
                advance<float>(c.first, g.dtype, first * c.stride_first), lda, c.stride_first,
                advance<float>(c.second, g.dtype, first * c.stride_second), ldb, c.stride_second, &beta,
                advance<float>(g.c, g.dtype, first * g.stride_c), ldc, g.stride_c, count);
          }),
          "gemmStridedBatched");
  });
}

// Read column-major, l's row-major lower triangle is an upper one, and cuSOLVER's upper mode
// factors it as U^T U with U = L^T, which read row-major again is the lower factor L: the factor
// comes back in place, with no transposing passes of ours (potrfBatched transposes internally).
// cuSOLVER leaves the other triangle dirty (potrfBatched writes there), so one pass afterwards
// zeroes it.
void CudaBackend::cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                           void* l, std::int64_t stride_l, const FactorFailure& failure) {
  require_floating(dtype, "cholesky");
  if (count == 0 || n == 0) return;
  auto entered = enter();
  if (a != l || stride_a != stride_l) check(kernels::copy_lower(stream_, dtype, count, n, a, stride_a, l, stride_l));
  Scratch info(*this, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  auto* device_info = static_cast<std::int32_t*>(info.data());
  factor(dtype, count, n, l, stride_l, device_info);
  check(kernels::check_factor_diagonal(stream_, dtype, count, n, l, stride_l, device_info));
  check(kernels::lower_triangle(stream_, dtype, count, n, l, stride_l, 1.0));
  if (failure.raise) defer(failure, device_info, count);  // stream-ordered: info is freed after the copy
  else check(kernels::poison_failed_rows(stream_, dtype, count, n, l, stride_l, device_info));
}

void CudaBackend::factor(DType dtype, std::int64_t count, std::int64_t n, void* l, std::int64_t stride_l,
                         std::int32_t* info) {
  const int order = narrow(n, "cholesky order");
  const cudaDataType type = dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  if (factor_one_by_one(count, n)) {
    std::size_t device_bytes = 0, host_bytes = 0;
    check(cusolverDnXpotrf_bufferSize(solver_, solver_params_, CUBLAS_FILL_MODE_UPPER, n, type, l, n, type,
                                      &device_bytes, &host_bytes),
          "Xpotrf_bufferSize");
    Scratch work(*this, device_bytes);
    std::vector<char> host_work(host_bytes);
    for (std::int64_t i = 0; i < count; ++i)
      check(with_workspace([&] {
              return cusolverDnXpotrf(solver_, solver_params_, CUBLAS_FILL_MODE_UPPER, n, type,
                                      advance<char>(l, dtype, i * stride_l), n, type, work.data(), device_bytes,
                                      host_work.data(), host_bytes, info + i);
            }),
            "Xpotrf");
    if (host_bytes > 0) check(cudaStreamSynchronize(stream_), "waiting for Xpotrf's host workspace");
    return;
  }
  const Scratch array = pointers(dtype, l, stride_l, count);
  in_chunks(count, [&](std::int64_t first, std::int64_t size) {
    void** matrices = static_cast<void**>(array.data()) + first;
    check(with_workspace([&] {
            return dtype == DType::f64
                       ? cusolverDnDpotrfBatched(solver_, CUBLAS_FILL_MODE_UPPER, order, reinterpret_cast<double**>(matrices),
                                                 order, info + first, static_cast<int>(size))
                       : cusolverDnSpotrfBatched(solver_, CUBLAS_FILL_MODE_UPPER, order, reinterpret_cast<float**>(matrices),
                                                 order, info + first, static_cast<int>(size));
          }),
          "potrfBatched");
  });
}

void CudaBackend::trsm(const TrsmArgs& t) {
  require_floating(t.dtype, "trsm");
  if (t.count == 0 || t.n == 0 || t.nrhs == 0) return;
  auto entered = enter();
  if (t.nrhs == 1 && t.n <= kernels::vector_solve_max_n) {
    check(kernels::vector_solve(stream_, t));
    return;
  }
  const Scratch tri_array = pointers(t.dtype, t.t, t.stride_t, t.count);
  const Scratch rhs_array = pointers(t.dtype, t.b, t.stride_b, t.count);
  auto solve = [&](bool transpose, std::int64_t first, std::int64_t size) {
    const ColumnMajorTrsm c = column_major(t, transpose);
    const cublasSideMode_t side = c.right_side ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT;
    const cublasFillMode_t fill = c.upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    const int rows = narrow(c.rows, "trsm rows"), cols = narrow(c.cols, "trsm columns");
    const int ldt = narrow(c.ld_t, "trsm lda"), ldb = narrow(c.ld_b, "trsm ldb");
    void* const* tri = static_cast<void* const*>(tri_array.data()) + first;
    void* const* rhs = static_cast<void* const*>(rhs_array.data()) + first;
    const int batch = static_cast<int>(size);
    return with_workspace([&] {
      if (t.dtype == DType::f64) {
        const double one = 1.0;
        return cublasDtrsmBatched(blas_, side, fill, op(c.transpose), CUBLAS_DIAG_NON_UNIT, rows, cols, &one,
                                  reinterpret_cast<const double* const*>(tri), ldt,
                                  reinterpret_cast<double* const*>(rhs), ldb, batch);
      }
      const float one = 1.0f;
      return cublasStrsmBatched(blas_, side, fill, op(c.transpose), CUBLAS_DIAG_NON_UNIT, rows, cols, &one,
                                reinterpret_cast<const float* const*>(tri), ldt, reinterpret_cast<float* const*>(rhs),
                                ldb, batch);
    });
  };
  in_chunks(t.count, [&](std::int64_t first, std::int64_t size) {
    check(solve(t.transpose, first, size), "trsmBatched");
    if (t.then_transposed) check(solve(!t.transpose, first, size), "trsmBatched");
  });
}

// Abar = sym(L^-T Phi(L^T Lbar) L^-1) from batched GEMM and triangular solves: one product and two
// solves, O(n^3) like the factorization, with no inverse formed. With P = L^-T Phi,
// (P L^-1)^T = L^-T P^T is one more left solve, and sym() does not care about the transpose.
void CudaBackend::cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                    std::int64_t stride_l, void* g, std::int64_t stride_g) {
  require_floating(dtype, "cholesky_backward");
  if (count == 0 || n == 0) return;
  auto entered = enter();
  const std::int64_t nn = n * n;
  Scratch p(*this, static_cast<std::size_t>(count * nn) * size_of(dtype));
  // Lbar's strict upper triangle does not enter the result (L^T Lbar's lower triangle reads only
  // Lbar's lower one), but multiplied by L's zeros an Inf there would make NaN: clear it first.
  check(kernels::lower_triangle(stream_, dtype, count, n, g, stride_g, 1.0));
  gemm(GemmArgs{.dtype = dtype, .count = count, .m = n, .n = n, .k = n, .trans_a = true, .trans_b = false,
                .alpha = 1.0, .beta = 0.0, .a = l, .stride_a = stride_l, .b = g, .stride_b = stride_g,
                .c = p.data(), .stride_c = nn});  // L^T Lbar
  check(kernels::lower_triangle(stream_, dtype, count, n, p.data(), nn, 0.5));  // Phi
  trsm(TrsmArgs{.dtype = dtype, .count = count, .n = n, .nrhs = n, .lower = true, .transpose = true,
                .then_transposed = false, .t = l, .stride_t = stride_l, .b = p.data(), .stride_b = nn});  // P = L^-T Phi
  check(kernels::transpose(stream_, dtype, count, n, p.data(), nn, g, stride_g));  // g = P^T
  trsm(TrsmArgs{.dtype = dtype, .count = count, .n = n, .nrhs = n, .lower = true, .transpose = true,
                .then_transposed = false, .t = l, .stride_t = stride_l, .b = g, .stride_b = stride_g});  // g = L^-T P^T
  check(kernels::symmetrize(stream_, dtype, count, n, g, stride_g));
}

}  // namespace vt::cuda
