// QR and symmetric eigendecomposition on Eigen, parallel across the batch like the other matrix
// kernels (matrix.cpp). Each matrix is copied into the solver's column-major storage, which Eigen
// needs anyway; the solvers are per thread, so their storage is reused from matrix to matrix.
#include "../../core/eigen.hpp"
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend.hpp"
#include "first_failure.hpp"

namespace vt::cpu {

namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// Reports the first failing matrix, after every matrix is done (as the Cholesky kernel does).
void report_first(const std::vector<std::int32_t>& codes, const FactorFailure::Report& failed) {
  const auto first = std::find_if(codes.begin(), codes.end(), [](std::int32_t code) { return code != 0; });
  if (first != codes.end()) failed(first - codes.begin(), *first);
}

}  // namespace

// Eigen's Householder vectors follow LAPACK's dlarfg: beta = -sign(alpha) |x|, and no reflection
// where the column below the diagonal is already 0. So R's signs are numpy's and cuSOLVER's.
void CpuBackend::qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a,
                    std::int64_t stride_a, void* q, std::int64_t stride_q, void* r, std::int64_t stride_r,
                    const FactorFailure::Report& failed) {
  if (recording()) return keep([=, this] { qr(dtype, count, m, n, a, stride_a, q, stride_q, r, stride_r, failed); });
  std::vector<std::int32_t> codes(static_cast<std::size_t>(count), 0);
  const std::int64_t k = std::min(m, n);
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    // One factorization's storage per thread for this call, reused across its matrices (and freed
    // after it: a thread_local would keep the largest matrix's for the process's life).
    FirstFailure failure;  // the solvers' storage
#pragma omp parallel if (count > 1)
    {
      Eigen::HouseholderQR<ColMat<T>> householder;
      ColMat<T> thin;
#pragma omp for schedule(dynamic)
      for (std::int64_t i = 0; i < count; ++i)
        failure.run(i, [&] {
          Eigen::Map<const RowMat<T>> A(static_cast<const T*>(a) + i * stride_a, m, n);
          Eigen::Map<RowMat<T>> Q(static_cast<T*>(q) + i * stride_q, m, k), R(static_cast<T*>(r) + i * stride_r, k, n);
          if (!A.allFinite()) {
            codes[static_cast<std::size_t>(i)] = -1;
            return;
          }
          householder.compute(A);
          R = householder.matrixQR().topRows(k).template triangularView<Eigen::Upper>();
          thin.setIdentity(m, k);
          thin.applyOnTheLeft(householder.householderQ());
          Q = thin;
        });
    }
    failure.rethrow();
  });
  report_first(codes, failed);
}

void CpuBackend::eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
                      std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) {
  if (recording()) return keep([=, this] { eigh(dtype, count, n, a, stride_a, w, stride_w, v, stride_v, failed); });
  std::vector<std::int32_t> codes(static_cast<std::size_t>(count), 0);
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    FirstFailure failure;
#pragma omp parallel if (count > 1)
    {
      Eigen::SelfAdjointEigenSolver<ColMat<T>> solver;  // per thread, for this call only (as qr's)
#pragma omp for schedule(dynamic)
      for (std::int64_t i = 0; i < count; ++i)
        failure.run(i, [&] {
          Eigen::Map<const RowMat<T>> A(static_cast<const T*>(a) + i * stride_a, n, n);
          bool finite = true;
          for (Eigen::Index row = 0; row < n && finite; ++row) finite = A.row(row).head(row + 1).allFinite();
          if (!finite) {
            codes[static_cast<std::size_t>(i)] = -1;
            return;
          }
          // compute() copies only the lower triangle of A (as indexed, so the row-major one).
          solver.compute(A);
          if (solver.info() != Eigen::Success) {
            codes[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(n + 1);
            return;
          }
          Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(static_cast<T*>(w) + i * stride_w, n) = solver.eigenvalues();
          Eigen::Map<RowMat<T>>(static_cast<T*>(v) + i * stride_v, n, n) = solver.eigenvectors();
        });
    }
    failure.rethrow();
  });
  report_first(codes, failed);
}

}  // namespace vt::cpu
