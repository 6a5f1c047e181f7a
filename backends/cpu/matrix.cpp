// Batched matrix kernels on Eigen: Map views over slices of the batched buffer (no copies),
// in-place factorization, parallel across the batch. Eigen's own threading is used only when
// there is a single matrix: inside the batch-parallel region it runs single-threaded, so the
// cores are not oversubscribed.
#include <Eigen/Cholesky>
#include <cmath>
#include <Eigen/Dense>

#include "../../core/error.hpp"
#include "cpu_backend.hpp"

namespace vt::cpu {

namespace {
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapMat = Eigen::Map<RowMat<T>>;
template <class T>
using ConstMapMat = Eigen::Map<const RowMat<T>>;
}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
  visit_dtype(g.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* a = static_cast<const T*>(g.a);
    const T* b = static_cast<const T*>(g.b);
    T* c = static_cast<T*>(g.c);
    const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
#pragma omp parallel for schedule(static) if (g.count > 1)
    for (std::int64_t i = 0; i < g.count; ++i) {
      ConstMapMat<T> A(a + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k);
      ConstMapMat<T> B(b + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n);
      MapMat<T> C(c + i * g.stride_c, g.m, g.n);
      if (beta == T(0)) C.setZero();
      else if (beta != T(1)) C *= beta;
      if (!g.trans_a && !g.trans_b) C.noalias() += alpha * A * B;
      else if (g.trans_a && !g.trans_b) C.noalias() += alpha * A.transpose() * B;
      else if (!g.trans_a && g.trans_b) C.noalias() += alpha * A * B.transpose();
      else C.noalias() += alpha * A.transpose() * B.transpose();
    }
  });
}

void CpuBackend::cholesky(DType dtype, std::int64_t count, std::int64_t n, void* a, std::int64_t stride,
                          std::int32_t* info) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* base = static_cast<T*>(a);
#pragma omp parallel for schedule(static) if (count > 1)
    for (std::int64_t i = 0; i < count; ++i) {
      MapMat<T> A(base + i * stride, n, n);
      // Eigen's blocked in-place LLT reports the column where the factorization broke down, which
      // LLT::info() does not; that index is the order of the failing leading minor minus one.
      Eigen::Index failed = Eigen::internal::llt_inplace<T, Eigen::Lower>::blocked(A);
      // NaN passes Eigen's positivity test; report the first non-finite pivot the same way.
      for (Eigen::Index j = 0; failed < 0 && j < n; ++j)
        if (!std::isfinite(A(j, j))) failed = j;
      info[i] = failed < 0 ? 0 : static_cast<std::int32_t>(failed + 1);
      A.template triangularView<Eigen::StrictlyUpper>().setZero();
    }
  });
}

void CpuBackend::trsm(const TrsmArgs& s) {
  visit_dtype(s.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* t = static_cast<const T*>(s.t);
    T* b = static_cast<T*>(s.b);
#pragma omp parallel for schedule(static) if (s.count > 1)
    for (std::int64_t i = 0; i < s.count; ++i) {
      ConstMapMat<T> L(t + i * s.stride_t, s.n, s.n);
      MapMat<T> B(b + i * s.stride_b, s.n, s.nrhs);
      if (s.lower && !s.transpose) L.template triangularView<Eigen::Lower>().solveInPlace(B);
      else if (s.lower) L.transpose().template triangularView<Eigen::Upper>().solveInPlace(B);
      else if (!s.transpose) L.template triangularView<Eigen::Upper>().solveInPlace(B);
      else L.transpose().template triangularView<Eigen::Lower>().solveInPlace(B);
    }
  });
}

}  // namespace vt::cpu
