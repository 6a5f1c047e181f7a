// CUDA backend, matrix side: batched GEMM (cuBLAS strided-batched), Cholesky (cuSOLVER
// potrfBatched, or Xpotrf per matrix for a few large ones), triangular solves (cuBLAS trsmBatched,
// or one fused kernel for vector right-hand sides) and the Cholesky adjoint built from them; QR
// (geqrf + orgqr) and the symmetric eigendecomposition (syevjBatched, or syevd per matrix).
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

// The report for qr's and eigh's info flags: a solver's bad argument (kernels::merge_info keeps
// it as solver_bad_argument + info) is this backend's bug, never the input's, so it is no case of
// the op's own report.
FactorFailure::Report reporting_bad_arguments(const char* call, FactorFailure::Report report) {
  return [call, report = std::move(report)](std::int64_t example, std::int32_t code) {
    if (code <= kernels::solver_bad_argument)
      fail("cuda {}: the solver rejected its argument {} for matrix {} of the call (internal error)", call,
           kernels::solver_bad_argument - code, example);
    report(example, code);
  };
}

bool out_of_workspace(cublasStatus_t s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
bool out_of_workspace(cusolverStatus_t s) { return s == CUSOLVER_STATUS_ALLOC_FAILED; }

// potrfBatched factors every size measured at least as fast as one blocked Xpotrf per matrix (docs/gpu.md,
// "VTAPE_CUDA_POTRF"). For a few very large matrices (not measured) Xpotrf's GEMM-based trailing updates should win.
// VTAPE_CUDA_POTRF=batched|single forces one way, for benchmarks.
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
  const int rows = narrow(c.rows, "gemm rows"), cols = narrow(c.cols, "gemm columns"),
            inner = narrow(c.inner, "gemm k");
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
            return cublasSgemmStridedBatched(blas_, op(c.trans_first), op(c.trans_second), rows, cols, inner, &alpha,
                                             advance<float>(c.first, g.dtype, first * c.stride_first), lda,
                                             c.stride_first, advance<float>(c.second, g.dtype, first * c.stride_second),
                                             ldb, c.stride_second, &beta,
                                             advance<float>(g.c, g.dtype, first * g.stride_c), ldc, g.stride_c, count);
          }),
          "gemmStridedBatched");
  });
}

// Read column-major, l's row-major lower triangle is an upper one, and cuSOLVER's upper mode
// factors it as U^T U with U = L^T, which read row-major again is the lower factor L: the factor
// comes back in place, with no transposing passes of ours (potrfBatched transposes internally).
// cuSOLVER leaves the other triangle dirty (potrfBatched writes there), so one pass afterwards
// zeroes it, lower_only or not: on the GPU that pass is cheap.
void CudaBackend::cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                           void* l, std::int64_t stride_l, bool /*lower_only*/, const FactorFailure& failure) {
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
            return dtype == DType::f64 ? cusolverDnDpotrfBatched(solver_, CUBLAS_FILL_MODE_UPPER, order,
                                                                 reinterpret_cast<double**>(matrices), order,
                                                                 info + first, static_cast<int>(size))
                                       : cusolverDnSpotrfBatched(solver_, CUBLAS_FILL_MODE_UPPER, order,
                                                                 reinterpret_cast<float**>(matrices), order,
                                                                 info + first, static_cast<int>(size));
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
  gemm(GemmArgs{.dtype = dtype,
                .count = count,
                .m = n,
                .n = n,
                .k = n,
                .trans_a = true,
                .trans_b = false,
                .alpha = 1.0,
                .beta = 0.0,
                .a = l,
                .stride_a = stride_l,
                .b = g,
                .stride_b = stride_g,
                .c = p.data(),
                .stride_c = nn});                                               // L^T Lbar
  check(kernels::lower_triangle(stream_, dtype, count, n, p.data(), nn, 0.5));  // Phi
  trsm(TrsmArgs{.dtype = dtype,
                .count = count,
                .n = n,
                .nrhs = n,
                .lower = true,
                .transpose = true,
                .then_transposed = false,
                .t = l,
                .stride_t = stride_l,
                .b = p.data(),
                .stride_b = nn});                                                  // P = L^-T Phi
  check(kernels::transpose(stream_, dtype, count, n, p.data(), nn, g, stride_g));  // g = P^T
  trsm(TrsmArgs{.dtype = dtype,
                .count = count,
                .n = n,
                .nrhs = n,
                .lower = true,
                .transpose = true,
                .then_transposed = false,
                .t = l,
                .stride_t = stride_l,
                .b = g,
                .stride_b = stride_g});  // g = L^-T P^T
  check(kernels::symmetrize(stream_, dtype, count, n, g, stride_g));
}

// (L L^T)^-1 as two triangular solves against the identity (L Y = I, then L^T X = Y): 2n^3 flops
// where potri's would take 2n^3/3, but composed from the solves above; the rounding leaves X
// slightly asymmetric, so it is symmetrized.
void CudaBackend::cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                   std::int64_t stride_l, void* out, std::int64_t stride_out) {
  require_floating(dtype, "cholesky_inverse");
  if (count == 0 || n == 0) return;
  auto entered = enter();
  fill(View{dtype, out, {count, n, n}, {stride_out, n, 1}}, 0.0);
  fill(View{dtype, out, {count, n}, {stride_out, n + 1}}, 1.0);  // the diagonals
  trsm(TrsmArgs{.dtype = dtype,
                .count = count,
                .n = n,
                .nrhs = n,
                .lower = true,
                .transpose = false,
                .then_transposed = true,
                .t = l,
                .stride_t = stride_l,
                .b = out,
                .stride_b = stride_out});
  check(kernels::symmetrize(stream_, dtype, count, n, out, stride_out));
}

// ---------------------------------------------------------------- qr, eigh

namespace {

// cuSOLVER's legacy API by dtype (f64 or f32). Matrices are column-major with leading dimension
// equal to their row count.
template <class F64, class F32>
auto by_dtype(DType dtype, F64 f64, F32 f32) {
  return dtype == DType::f64 ? f64() : f32();
}
double* as_f64(void* p) { return static_cast<double*>(p); }
float* as_f32(void* p) { return static_cast<float*>(p); }

// syevjBatched (one call for the batch) up to this order, as JAX does: the batched Jacobi method
// is meant for small matrices (its documentation's own size); larger ones go through syevd, one
// matrix at a time. Not measured here (no GPU on the machine this was written on).
constexpr std::int64_t syevj_batched_max_n = 32;

}  // namespace

Scratch CudaBackend::screen(DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x,
                            std::int64_t stride) {
  Scratch info(*this, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  auto* flags = static_cast<std::int32_t*>(info.data());
  check(cudaMemsetAsync(flags, 0, static_cast<std::size_t>(count) * sizeof(std::int32_t), stream_),
        "clearing a decomposition's info");
  check(kernels::flag_nonfinite(stream_, dtype, count, rows, cols, x, stride, flags));
  check(kernels::zero_flagged(stream_, dtype, count, rows, cols, x, stride, flags));
  return info;
}

// Each matrix is copied column-major into scratch (a strided copy: the column-major m x n matrix
// is the row-major one's transpose in memory), factored in place by geqrf (R in its upper
// triangle, the Householder vectors below), R copied out, then Q formed in place by orgqr and
// copied out. cuSOLVER has no batched orgqr, so both run matrix by matrix.
void CudaBackend::qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a,
                     std::int64_t stride_a, void* q, std::int64_t stride_q, void* r, std::int64_t stride_r,
                     const FactorFailure::Report& failed) {
  require_floating(dtype, "qr");
  if (count == 0 || m == 0 || n == 0) return;
  auto entered = enter();
  const std::int64_t k = std::min(m, n), mn = m * n;
  const int rows = narrow(m, "qr rows"), cols = narrow(n, "qr columns"), reflections = static_cast<int>(k);
  const std::size_t element = size_of(dtype);
  Scratch work(*this, static_cast<std::size_t>(count * mn) * element);
  Scratch tau(*this, static_cast<std::size_t>(count * k) * element);
  // geqrf's and orgqr's info flag only bad arguments; merged into `info` after each.
  Scratch solver_info(*this, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  copy(View{dtype, const_cast<void*>(a), {count, m, n}, {stride_a, n, 1}},
       View{dtype, work.data(), {count, m, n}, {mn, 1, m}});
  const Scratch info = screen(dtype, count, n, m, work.data(), mn);  // the column-major copy read as n x m: all of it
  auto matrix = [&](std::int64_t i) { return advance<char>(work.data(), dtype, i * mn); };
  auto reflectors = [&](std::int64_t i) { return advance<char>(tau.data(), dtype, i * k); };
  auto* device_info = static_cast<int*>(solver_info.data());
  auto* flags = static_cast<std::int32_t*>(info.data());

  int factor_work = 0, form_work = 0;
  check(by_dtype(
            dtype,
            [&] { return cusolverDnDgeqrf_bufferSize(solver_, rows, cols, as_f64(work.data()), rows, &factor_work); },
            [&] { return cusolverDnSgeqrf_bufferSize(solver_, rows, cols, as_f32(work.data()), rows, &factor_work); }),
        "geqrf_bufferSize");
  check(by_dtype(
            dtype,
            [&] {
              return cusolverDnDorgqr_bufferSize(solver_, rows, reflections, reflections, as_f64(work.data()), rows,
                                                 as_f64(tau.data()), &form_work);
            },
            [&] {
              return cusolverDnSorgqr_bufferSize(solver_, rows, reflections, reflections, as_f32(work.data()), rows,
                                                 as_f32(tau.data()), &form_work);
            }),
        "orgqr_bufferSize");
  const int lwork = std::max({factor_work, form_work, 1});
  Scratch buffer(*this, static_cast<std::size_t>(lwork) * element);

  for (std::int64_t i = 0; i < count; ++i)
    check(with_workspace([&] {
            return by_dtype(
                dtype,
                [&] {
                  return cusolverDnDgeqrf(solver_, rows, cols, as_f64(matrix(i)), rows, as_f64(reflectors(i)),
                                          as_f64(buffer.data()), lwork, device_info + i);
                },
                [&] {
                  return cusolverDnSgeqrf(solver_, rows, cols, as_f32(matrix(i)), rows, as_f32(reflectors(i)),
                                          as_f32(buffer.data()), lwork, device_info + i);
                });
          }),
          "geqrf");
  check(kernels::merge_info(stream_, count, flags, device_info));
  // R: the first k rows of the column-major factor, read with its strides, written row-major.
  copy(View{dtype, work.data(), {count, k, n}, {mn, 1, m}}, View{dtype, r, {count, k, n}, {stride_r, n, 1}});
  check(kernels::upper_trapezoid(stream_, dtype, count, k, n, r, stride_r));
  for (std::int64_t i = 0; i < count; ++i)
    check(with_workspace([&] {
            return by_dtype(
                dtype,
                [&] {
                  return cusolverDnDorgqr(solver_, rows, reflections, reflections, as_f64(matrix(i)), rows,
                                          as_f64(reflectors(i)), as_f64(buffer.data()), lwork, device_info + i);
                },
                [&] {
                  return cusolverDnSorgqr(solver_, rows, reflections, reflections, as_f32(matrix(i)), rows,
                                          as_f32(reflectors(i)), as_f32(buffer.data()), lwork, device_info + i);
                });
          }),
          "orgqr");
  check(kernels::merge_info(stream_, count, flags, device_info));
  // Q: the first k columns of the column-major m x n work, row-major.
  copy(View{dtype, work.data(), {count, m, k}, {mn, 1, m}}, View{dtype, q, {count, m, k}, {stride_q, k, 1}});
  defer(FactorFailure::raising(reporting_bad_arguments("qr", failed)), flags, count);
}

// Read column-major, a row-major symmetric matrix is itself; cuSOLVER is told to read the upper
// triangle, which is the row-major lower one, and the copy mirrors that triangle over the other
// anyway, so nothing outside it reaches the solver. The eigenvectors come back as the columns of
// the column-major result, and one strided copy writes them as columns of the row-major v.
void CudaBackend::eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
                       std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) {
  require_floating(dtype, "eigh");
  if (count == 0 || n == 0) return;
  auto entered = enter();
  const std::int64_t nn = n * n;
  const int order = narrow(n, "eigh order");
  const std::size_t element = size_of(dtype);
  Scratch work(*this, static_cast<std::size_t>(count * nn) * element);
  Scratch values(*this, static_cast<std::size_t>(count * n) * element);
  Scratch solver_info(*this, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  check(kernels::copy_lower(stream_, dtype, count, n, a, stride_a, work.data(), nn));
  check(kernels::mirror_lower(stream_, dtype, count, n, work.data(), nn));
  const Scratch info = screen(dtype, count, n, n, work.data(), nn);
  auto* device_info = static_cast<int*>(solver_info.data());
  const cusolverEigMode_t vectors = CUSOLVER_EIG_MODE_VECTOR;
  const cublasFillMode_t upper = CUBLAS_FILL_MODE_UPPER;

  if (n <= syevj_batched_max_n) {
    in_chunks(count, [&](std::int64_t first, std::int64_t size) {
      const int batch = static_cast<int>(size);
      char* matrices = advance<char>(work.data(), dtype, first * nn);
      char* eigenvalues = advance<char>(values.data(), dtype, first * n);
      int lwork = 0;
      check(by_dtype(
                dtype,
                [&] {
                  return cusolverDnDsyevjBatched_bufferSize(solver_, vectors, upper, order, as_f64(matrices), order,
                                                            as_f64(eigenvalues), &lwork, syevj_params_, batch);
                },
                [&] {
                  return cusolverDnSsyevjBatched_bufferSize(solver_, vectors, upper, order, as_f32(matrices), order,
                                                            as_f32(eigenvalues), &lwork, syevj_params_, batch);
                }),
            "syevjBatched_bufferSize");
      Scratch buffer(*this, static_cast<std::size_t>(std::max(lwork, 1)) * element);
      check(with_workspace([&] {
              return by_dtype(
                  dtype,
                  [&] {
                    return cusolverDnDsyevjBatched(solver_, vectors, upper, order, as_f64(matrices), order,
                                                   as_f64(eigenvalues), as_f64(buffer.data()), lwork,
                                                   device_info + first, syevj_params_, batch);
                  },
                  [&] {
                    return cusolverDnSsyevjBatched(solver_, vectors, upper, order, as_f32(matrices), order,
                                                   as_f32(eigenvalues), as_f32(buffer.data()), lwork,
                                                   device_info + first, syevj_params_, batch);
                  });
            }),
            "syevjBatched");
    });
  } else {
    int lwork = 0;
    check(by_dtype(
              dtype,
              [&] {
                return cusolverDnDsyevd_bufferSize(solver_, vectors, upper, order, as_f64(work.data()), order,
                                                   as_f64(values.data()), &lwork);
              },
              [&] {
                return cusolverDnSsyevd_bufferSize(solver_, vectors, upper, order, as_f32(work.data()), order,
                                                   as_f32(values.data()), &lwork);
              }),
          "syevd_bufferSize");
    Scratch buffer(*this, static_cast<std::size_t>(std::max(lwork, 1)) * element);
    for (std::int64_t i = 0; i < count; ++i) {
      char* matrix = advance<char>(work.data(), dtype, i * nn);
      char* eigenvalues = advance<char>(values.data(), dtype, i * n);
      check(with_workspace([&] {
              return by_dtype(
                  dtype,
                  [&] {
                    return cusolverDnDsyevd(solver_, vectors, upper, order, as_f64(matrix), order, as_f64(eigenvalues),
                                            as_f64(buffer.data()), lwork, device_info + i);
                  },
                  [&] {
                    return cusolverDnSsyevd(solver_, vectors, upper, order, as_f32(matrix), order, as_f32(eigenvalues),
                                            as_f32(buffer.data()), lwork, device_info + i);
                  });
            }),
            "syevd");
    }
  }
  auto* flags = static_cast<std::int32_t*>(info.data());
  check(kernels::merge_info(stream_, count, flags, device_info));
  copy(View{dtype, values.data(), {count, n}, {n, 1}}, View{dtype, w, {count, n}, {stride_w, 1}});
  copy(View{dtype, work.data(), {count, n, n}, {nn, 1, n}}, View{dtype, v, {count, n, n}, {stride_v, n, 1}});
  defer(FactorFailure::raising(reporting_bad_arguments("eigh", failed)), flags, count);
}

}  // namespace vt::cuda
