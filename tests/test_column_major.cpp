// The CUDA backend's row-major -> column-major call translations (backends/cuda/column_major.hpp),
// checked without a GPU: a plain column-major GEMM/TRSM with BLAS semantics, run on the same
// memory with the translated arguments, must give what the CPU backend gives row-major.
#include <vtape/core/eigen.hpp>
#include <Eigen/Dense>
#include <vtape/backends/cuda/column_major.hpp>

#include "gradcheck.hpp"

using namespace vt;
using Mat = Eigen::MatrixXd;

namespace {

// Column-major view of `rows x cols` at `data` with leading dimension ld.
Mat read_column_major(const double* data, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  Mat m(rows, cols);
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) m(i, j) = data[i + j * ld];
  return m;
}
void write_column_major(const Mat& m, double* data, std::int64_t ld) {
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i) data[i + j * ld] = m(i, j);
}

// BLAS gemm (column-major, strided batch): C = op1(X) op2(Y), beta = 0.
void reference_gemm(const cuda::ColumnMajorGemm& c, std::int64_t count, double* out, std::int64_t stride_c) {
  for (std::int64_t b = 0; b < count; ++b) {
    const auto* x = static_cast<const double*>(c.first) + b * c.stride_first;
    const auto* y = static_cast<const double*>(c.second) + b * c.stride_second;
    const Mat X = c.trans_first ? Mat(read_column_major(x, c.inner, c.rows, c.ld_first).transpose())
                                : read_column_major(x, c.rows, c.inner, c.ld_first);
    const Mat Y = c.trans_second ? Mat(read_column_major(y, c.cols, c.inner, c.ld_second).transpose())
                                 : read_column_major(y, c.inner, c.cols, c.ld_second);
    write_column_major(X * Y, out + b * stride_c, c.ldc);
  }
}

// BLAS trsm, right side: B <- B op(T)^-1, reading only T's `upper` or lower triangle.
void reference_trsm(const cuda::ColumnMajorTrsm& c, const double* t, double* b) {
  REQUIRE(c.right_side);
  Mat T = read_column_major(t, c.cols, c.cols, c.ld_t);
  T = c.upper ? Mat(T.triangularView<Eigen::Upper>()) : Mat(T.triangularView<Eigen::Lower>());
  if (c.transpose) T.transposeInPlace();
  const Mat B = read_column_major(b, c.rows, c.cols, c.ld_b);
  write_column_major(B * T.inverse(), b, c.ld_b);
}

}  // namespace

TEST_CASE("column-major GEMM arguments reproduce the row-major product", "[cuda-layout]") {
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t count = 3, m = 4, n = 5, k = 6;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool shared_b : {false, true}) {
        const Tensor a = randn({count, ta ? k : m, ta ? m : k}, 1), b = randn({count, tb ? n : k, tb ? k : n}, 2);
        const GemmArgs args{
            DType::f64,           count,   m,    n, k, ta, tb, 1.0, 0.0, a.raw_data(), m * k, b.raw_data(),
            shared_b ? 0 : k * n, nullptr, m * n};
        std::vector<double> row_major(static_cast<std::size_t>(count * m * n)), col_major(row_major.size());
        GemmArgs run = args;
        run.c = row_major.data();
        cpu.gemm(run);
        reference_gemm(cuda::column_major(args), count, col_major.data(), m * n);
        INFO("trans_a " << ta << ", trans_b " << tb << ", shared b " << shared_b);
        for (std::size_t i = 0; i < row_major.size(); ++i) CHECK(col_major[i] == Approx(row_major[i]).epsilon(1e-12));
      }
}

TEST_CASE("column-major TRSM arguments solve the row-major systems", "[cuda-layout]") {
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t n = 5, nrhs = 3;
  for (bool lower : {true, false})
    for (bool transpose : {false, true})
      for (bool then_transposed : {false, true}) {
        // Garbage in the unused triangle: both sides must ignore it.
        const Tensor t = randn({n, n}, 3) * 0.2 + eye(n) * 2.0;
        const Tensor b = randn({n, nrhs}, 4);
        std::vector<double> row_major = b.to_vector<double>(), col_major = row_major;
        const TrsmArgs args{DType::f64,       1,       n, nrhs, lower, transpose, then_transposed, t.raw_data(), 0,
                            row_major.data(), n * nrhs};
        cpu.trsm(args);
        reference_trsm(cuda::column_major(args, transpose), t.data<double>(), col_major.data());
        if (then_transposed) reference_trsm(cuda::column_major(args, !transpose), t.data<double>(), col_major.data());
        INFO("lower " << lower << ", transpose " << transpose << ", then transposed " << then_transposed);
        for (std::size_t i = 0; i < row_major.size(); ++i) CHECK(col_major[i] == Approx(row_major[i]).epsilon(1e-10));
      }
}
