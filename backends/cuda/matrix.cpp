// CUDA backend, matrix side: batched GEMM (cuBLAS strided-batched), Cholesky (cuSOLVER
// potrfBatched), triangular solves (cuBLAS trsmBatched) and the Cholesky adjoint built from them.
// Row-major requests become column-major calls on the same memory (column_major.hpp).
#include <climits>

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

}  // namespace

Scratch CudaBackend::pointers(DType dtype, const void* base, std::int64_t stride, std::int64_t count) {
  Scratch array(*this, static_cast<std::size_t>(count) * sizeof(void*));
  check(kernels::pointer_array(stream_, static_cast<void**>(array.data()), base,
                               stride * static_cast<std::int64_t>(size_of(dtype)), count));
  return array;
}

void CudaBackend::gemm(const GemmArgs& g) {
  if (g.count == 0 || g.m == 0 || g.n == 0) return;
  auto lock = enter();
  if (g.k == 0) {  // an empty sum: C = beta C, without relying on cuBLAS for the degenerate case
    if (g.beta != 0) fail("cuda gemm: k = 0 with beta != 0 is not supported");
    const Shape shape{g.count, g.m, g.n}, strides{g.stride_c, g.n, 1};
    fill(View{g.dtype, g.c, shape, strides}, 0.0);
    return;
  }
  const ColumnMajorGemm c = column_major(g);
  const int rows = narrow(c.rows, "gemm rows"), cols = narrow(c.cols, "gemm columns"), inner = narrow(c.inner, "gemm k");
  const int count = narrow(g.count, "gemm batch count");
  const int lda = narrow(std::max<std::int64_t>(c.ld_first, 1), "gemm lda");
  const int ldb = narrow(std::max<std::int64_t>(c.ld_second, 1), "gemm ldb");
  const int ldc = narrow(c.ldc, "gemm ldc");
  if (g.dtype == DType::f64) {
    const double alpha = g.alpha, beta = g.beta;
    check(cublasDgemmStridedBatched(blas_, op(c.trans_first), op(c.trans_second), rows, cols, inner, &alpha,
                                    static_cast<const double*>(c.first), lda, c.stride_first,
                                    static_cast<const double*>(c.second), ldb, c.stride_second, &beta,
                                    static_cast<double*>(g.c), ldc, g.stride_c, count),
          "gemmStridedBatched");
  } else {
    const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
    check(cublasSgemmStridedBatched(blas_, op(c.trans_first), op(c.trans_second), rows, cols, inner, &alpha,
                                    static_cast<const float*>(c.first), lda, c.stride_first,
                                    static_cast<const float*>(c.second), ldb, c.stride_second, &beta,
                                    static_cast<float*>(g.c), ldc, g.stride_c, count),
          "gemmStridedBatched");
  }
}

// cuSOLVER's batched Cholesky is column-major; its lower mode is used (the one every version
// supports). The row-major lower triangle of A is mirrored into the upper one, which column-major
// is the lower triangle; the factor comes back there and is moved into place.
void CudaBackend::cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                           void* l, std::int64_t stride_l, std::int32_t* info) {
  for (std::int64_t i = 0; i < count; ++i) info[i] = 0;
  if (count == 0 || n == 0) return;
  auto lock = enter();
  const int batch = narrow(count, "cholesky batch count"), order = narrow(n, "cholesky order");
  check(kernels::mirror_lower(stream_, dtype, count, n, a, stride_a, l, stride_l));
  Scratch info_device(*this, static_cast<std::size_t>(count) * sizeof(std::int32_t));
  const Scratch array = pointers(dtype, l, stride_l, count);
  auto* device_info = static_cast<int*>(info_device.data());
  check(dtype == DType::f64 ? cusolverDnDpotrfBatched(solver_, CUBLAS_FILL_MODE_LOWER, order,
                                                      static_cast<double**>(array.data()), order, device_info, batch)
                            : cusolverDnSpotrfBatched(solver_, CUBLAS_FILL_MODE_LOWER, order,
                                                      static_cast<float**>(array.data()), order, device_info, batch),
        "potrfBatched");
  check(kernels::finish_factor(stream_, dtype, count, n, l, stride_l));
  check(kernels::check_factor_diagonal(stream_, dtype, count, n, l, stride_l, device_info));
  // The one host synchronisation inside a plan: whether to raise depends on info.
  check(cudaMemcpyAsync(info, device_info, static_cast<std::size_t>(count) * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost, stream_),
        "copying the factorization's info to the host");
  check(cudaStreamSynchronize(stream_), "waiting for the factorization");
}

void CudaBackend::trsm(const TrsmArgs& t) {
  if (t.count == 0 || t.n == 0 || t.nrhs == 0) return;
  auto lock = enter();
  const int batch = narrow(t.count, "trsm batch count");
  const Scratch tri_array = pointers(t.dtype, t.t, t.stride_t, t.count);
  const Scratch rhs_array = pointers(t.dtype, t.b, t.stride_b, t.count);
  void* const* tri = static_cast<void* const*>(tri_array.data());
  void* const* rhs = static_cast<void* const*>(rhs_array.data());
  auto solve = [&](bool transpose) {
    const ColumnMajorTrsm c = column_major(t, transpose);
    const cublasSideMode_t side = c.right_side ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT;
    const cublasFillMode_t fill = c.upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    const int rows = narrow(c.rows, "trsm rows"), cols = narrow(c.cols, "trsm columns");
    const int ldt = narrow(c.ld_t, "trsm lda"), ldb = narrow(c.ld_b, "trsm ldb");
    if (t.dtype == DType::f64) {
      const double one = 1.0;
      return cublasDtrsmBatched(blas_, side, fill, op(c.transpose), CUBLAS_DIAG_NON_UNIT, rows, cols, &one,
                                reinterpret_cast<const double* const*>(tri), ldt, reinterpret_cast<double* const*>(rhs),
                                ldb, batch);
    }
    const float one = 1.0f;
    return cublasStrsmBatched(blas_, side, fill, op(c.transpose), CUBLAS_DIAG_NON_UNIT, rows, cols, &one,
                              reinterpret_cast<const float* const*>(tri), ldt, reinterpret_cast<float* const*>(rhs), ldb,
                              batch);
  };
  check(solve(t.transpose), "trsmBatched");
  if (t.then_transposed) check(solve(!t.transpose), "trsmBatched");
}

// Abar = sym(L^-T Phi(L^T Lbar) L^-1) from batched GEMM and triangular solves: one product and two
// solves, O(n^3) like the factorization, with no inverse formed. With P = L^-T Phi,
// (P L^-1)^T = L^-T P^T is one more left solve, and sym() does not care about the transpose.
void CudaBackend::cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                    std::int64_t stride_l, void* g, std::int64_t stride_g) {
  if (count == 0 || n == 0) return;
  auto lock = enter();
  const std::int64_t nn = n * n;
  Scratch p(*this, static_cast<std::size_t>(count * nn) * size_of(dtype));
  // Lbar's strict upper triangle does not enter the result (L^T Lbar's lower triangle reads only
  // Lbar's lower one), but multiplied by L's zeros an Inf there would make NaN: clear it first.
  check(kernels::lower_triangle(stream_, dtype, count, n, g, stride_g, 1.0));
  gemm(GemmArgs{dtype, count, n, n, n, true, false, 1.0, 0.0, l, stride_l, g, stride_g, p.data(), nn});  // L^T Lbar
  check(kernels::lower_triangle(stream_, dtype, count, n, p.data(), nn, 0.5));                           // Phi
  trsm(TrsmArgs{dtype, count, n, n, true, true, false, l, stride_l, p.data(), nn});  // P = L^-T Phi
  check(kernels::transpose(stream_, dtype, count, n, p.data(), nn, g, stride_g));    // g = P^T
  trsm(TrsmArgs{dtype, count, n, n, true, true, false, l, stride_l, g, stride_g});   // g = L^-T P^T
  check(kernels::symmetrize(stream_, dtype, count, n, g, stride_g));
}

}  // namespace vt::cuda
