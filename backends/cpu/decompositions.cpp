// QR and the symmetric eigendecomposition on Eigen (and tridiagonal_qr.hpp's sweeps), parallel
// across a batch where its work pays for it, like the other matrix kernels (parallel.hpp). Each matrix is copied into
// column-major storage, which Eigen needs anyway; the workspaces are per thread, so their storage
// is reused from matrix to matrix.
#include "../../core/eigen.hpp"
#include <Eigen/Dense>
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "tridiagonal_qr.hpp"

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
    struct Storage {
      Eigen::HouseholderQR<ColMat<T>> householder;
      ColMat<T> thin;
    };
    for_each_matrix<Storage>(count, m * n * k, [&](Storage& s, std::int64_t i) {
      Eigen::Map<const RowMat<T>> A(static_cast<const T*>(a) + i * stride_a, m, n);
      Eigen::Map<RowMat<T>> Q(static_cast<T*>(q) + i * stride_q, m, k), R(static_cast<T*>(r) + i * stride_r, k, n);
      if (!A.allFinite()) {
        codes[static_cast<std::size_t>(i)] = -1;
        return;
      }
      s.householder.compute(A);
      R = s.householder.matrixQR().topRows(k).template triangularView<Eigen::Upper>();
      s.thin.setIdentity(m, k);
      s.thin.applyOnTheLeft(s.householder.householderQ());
      Q = s.thin;
    });
  });
  report_first(codes, failed);
}

// Eigen's Householder tridiagonalisation, then tridiagonal_qr.hpp's QL/QR sweeps (not Eigen's,
// whose errors are several times LAPACK's), all in double: float32 is rounded once at the end, so
// its results are accurate to float32's rounding (numpy also computes float32 in double).
void CpuBackend::eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
                      std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) {
  if (recording()) return keep([=, this] { eigh(dtype, count, n, a, stride_a, w, stride_w, v, stride_v, failed); });
  std::vector<std::int32_t> codes(static_cast<std::size_t>(count), 0);
  // Q's product of reflectors may use Eigen's threaded GEMM on a single matrix, whose bits can depend
  // on the thread count: one thread instead (this thread's setting, which Eigen reads).
  const OneThread single_matrix(count == 1 && omp_get_max_threads() > 1);
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    struct Storage {  // per thread, for this call only (as qr's)
      Eigen::Tridiagonalization<ColMat<double>> tridiagonal;
      ColMat<double> lower, z;
      Eigen::VectorXd d, e;
    };
    for_each_matrix<Storage>(count, n * n * n, [&](Storage& s, std::int64_t i) {
      Eigen::Map<const RowMat<T>> A(static_cast<const T*>(a) + i * stride_a, n, n);
      T largest = 0;
      bool finite = true;
      for (Eigen::Index row = 0; row < n && finite; ++row) {
        finite = A.row(row).head(row + 1).allFinite();
        if (finite) largest = std::max(largest, A.row(row).head(row + 1).cwiseAbs().maxCoeff());
      }
      if (!finite) {
        codes[static_cast<std::size_t>(i)] = -1;
        return;
      }
      if (n == 0) return;
      // Scaled by a power of two (exactly) so that the largest entry is in [0.5, 1): the
      // reflectors' norms cannot overflow, nor the rotations' squares underflow.
      int exponent = 0;
      if (largest > 0) std::frexp(static_cast<double>(largest), &exponent);
      // 2^-exponent in two factors: one alone may not be representable (a subnormal largest).
      const double down = std::ldexp(1.0, -exponent / 2), down_rest = std::ldexp(1.0, -exponent + exponent / 2);
      // The lower triangle only (as indexed, so the row-major one), the upper one zero.
      s.lower = (A.template cast<double>() * down * down_rest).template triangularView<Eigen::Lower>();
      s.tridiagonal.compute(s.lower);
      s.d = s.tridiagonal.diagonal();
      s.e = s.tridiagonal.subDiagonal();
      s.z = s.tridiagonal.matrixQ();
      if (!tridiagonal_eigen<double>(n, s.d.data(), s.e.data(), s.z.data(), n)) {
        codes[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(n + 1);
        return;
      }
      const double up = 1.0 / down, up_rest = 1.0 / down_rest;
      Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(static_cast<T*>(w) + i * stride_w, n) =
          (s.d * up * up_rest).template cast<T>();
      Eigen::Map<RowMat<T>>(static_cast<T*>(v) + i * stride_v, n, n) = s.z.template cast<T>();
    });
  });
  report_first(codes, failed);
}

}  // namespace vt::cpu
