// The CPU backend's batched Cholesky factor, inverse and triangular solves at small orders (backends/cpu/interleaved):
// against Eigen one matrix at a time, through every flag, at batch sizes that leave a group part-filled, with the
// same bits wherever a matrix sits in the batch and on any thread count, and the failures of the kernels above them.
#include <vtape/core/eigen.hpp>

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>
#include "threads.hpp"

using namespace vt;
using vt::testing::on_threads;

namespace {

using Eigen::MatrixXd;  // every reference is computed in double: one instantiation of Eigen's kernels, not two

// Orders on both sides of the interleaved kernels' limit (32), and batch sizes around their groups (4 and 8 lanes).
const std::vector<std::int64_t> orders = {1, 2, 3, 5, 8, 13, 16, 31, 32, 33};
const std::vector<std::int64_t> counts = {1, 3, 4, 9, 17};

template <class T>
constexpr DType dtype_of = std::is_same_v<T, double> ? DType::f64 : DType::f32;

template <class T>
constexpr double tolerance = std::is_same_v<T, double> ? 1e-11 : 2e-4;

// count well-conditioned SPD matrices (X X^T / n + I), row-major, one after another.
template <class T>
std::vector<T> spd_batch(std::int64_t count, std::int64_t n, std::uint64_t seed) {
  const Tensor x = randn({count, n, n}, seed);
  return (matmul(x, swapaxes(x, -1, -2)) / static_cast<double>(n) + eye(n)).astype(dtype_of<T>).template to_vector<T>();
}

// Matrix i of a batch of rows x cols row-major matrices, in double.
template <class T>
MatrixXd matrix(const std::vector<T>& data, std::int64_t i, std::int64_t rows, std::int64_t cols) {
  MatrixXd m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      m(r, c) = static_cast<double>(data[static_cast<std::size_t>((i * rows + r) * cols + c)]);
  return m;
}
template <class T>
MatrixXd matrix(const std::vector<T>& data, std::int64_t i, std::int64_t n) {
  return matrix(data, i, n, n);
}

// The largest absolute difference, relative to the largest absolute element of want.
double relative_error(const MatrixXd& got, const MatrixXd& want) {
  return (got - want).cwiseAbs().maxCoeff() / std::max(want.cwiseAbs().maxCoeff(), 1e-300);
}

template <class T>
std::vector<T> factor(const std::vector<T>& a, std::int64_t count, std::int64_t n) {
  std::vector<T> l(a.size());
  backend_for(Device::cpu())
      .cholesky(dtype_of<T>, count, n, a.data(), n * n, l.data(), n * n, false, FactorFailure::poisoning());
  return l;
}

template <class T>
void check_factors() {
  for (std::int64_t n : orders)
    for (std::int64_t count : counts) {
      INFO("n = " << n << ", count = " << count << ", " << name_of(dtype_of<T>));
      std::vector<T> a = spd_batch<T>(count, n, 100 + static_cast<std::uint64_t>(n * count));
      std::vector<T> upper_nan = a;  // the kernels read the lower triangle only
      for (std::int64_t m = 0; m < count; ++m)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = i + 1; j < n; ++j)
            upper_nan[static_cast<std::size_t>((m * n + i) * n + j)] = std::numeric_limits<T>::quiet_NaN();
      const std::vector<T> l = factor(upper_nan, count, n);
      for (std::int64_t m = 0; m < count; ++m) {
        const MatrixXd lm = matrix(l, m, n);
        const Eigen::LLT<MatrixXd> llt(matrix(a, m, n));
        CHECK(relative_error(lm, llt.matrixL()) < tolerance<T>);
        CHECK(MatrixXd(lm.triangularView<Eigen::StrictlyUpper>()).isZero(0));
      }
      // Each matrix alone, and the batch on two threads: the same bits.
      for (std::int64_t m = 0; m < count; ++m) {
        const std::vector<T> one(a.begin() + m * n * n, a.begin() + (m + 1) * n * n);
        CHECK(factor(one, 1, n) == std::vector<T>(l.begin() + m * n * n, l.begin() + (m + 1) * n * n));
      }
      CHECK(on_threads(2, [&] { return factor(upper_nan, count, n); }) == l);
    }
}

template <class T>
void check_inverses() {
  Backend& cpu = backend_for(Device::cpu());
  for (std::int64_t n : orders)
    for (std::int64_t count : counts) {
      INFO("n = " << n << ", count = " << count << ", " << name_of(dtype_of<T>));
      const std::vector<T> a = spd_batch<T>(count, n, 200 + static_cast<std::uint64_t>(n * count));
      std::vector<T> l = factor(a, count, n), out(a.size());
      for (std::int64_t m = 0; m < count; ++m)  // above the diagonal, not read
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = i + 1; j < n; ++j)
            l[static_cast<std::size_t>((m * n + i) * n + j)] = std::numeric_limits<T>::quiet_NaN();
      cpu.cholesky_inverse(dtype_of<T>, count, n, l.data(), n * n, out.data(), n * n);
      for (std::int64_t m = 0; m < count; ++m) {
        const MatrixXd om = matrix(out, m, n);
        const MatrixXd want = matrix(a, m, n).partialPivLu().inverse();
        CHECK(relative_error(om, want) < 100 * tolerance<T>);
        CHECK(om == om.transpose());
      }
      // In place, and on two threads: the same bits.
      std::vector<T> in_place = l;
      on_threads(2,
                 [&] { cpu.cholesky_inverse(dtype_of<T>, count, n, in_place.data(), n * n, in_place.data(), n * n); });
      CHECK(in_place == out);
    }
}

// op(T) X = B (then op(T)^T Z = X) for every flag, T per matrix or shared, against Eigen's triangular solves.
template <class T>
void check_solves() {
  Backend& cpu = backend_for(Device::cpu());
  // Orders and right-hand sides on both sides of the interleaved limits (32 each), the large pairs few: the reference
  // solves are the test's own time.
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{1, 1},   {2, 3},  {7, 5},  {16, 1}, {16, 32},
                                                                    {16, 33}, {32, 1}, {32, 5}, {33, 3}, {5, 33}};
  for (const auto& [n, nrhs] : sizes)
    for (int flags = 0; flags < 8; ++flags) {
      const bool lower = flags & 1, transpose = flags & 2, then_transposed = flags & 4;
      const std::int64_t count = 5;
      INFO("n = " << n << ", nrhs = " << nrhs << ", lower " << lower << ", transpose " << transpose
                  << ", then_transposed " << then_transposed << ", " << name_of(dtype_of<T>));
      const std::vector<T> a = spd_batch<T>(count, n, 300 + static_cast<std::uint64_t>(n + nrhs));
      std::vector<T> t = factor(a, count, n);  // lower; its transpose for an upper T
      for (std::int64_t m = 0; m < count; ++m) {
        T* tm = t.data() + m * n * n;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            T& e = tm[i * n + j];
            if (lower ? j > i : j < i) e = std::numeric_limits<T>::quiet_NaN();  // the other triangle, not read
            else if (!lower) e = tm[j * n + i];                                  // the factor's transpose
          }
      }
      const std::vector<T> b = randn({count, n, nrhs}, 400).astype(dtype_of<T>).template to_vector<T>();
      for (bool shared : {false, true}) {
        std::vector<T> x = b;
        cpu.trsm(TrsmArgs{.dtype = dtype_of<T>,
                          .count = count,
                          .n = n,
                          .nrhs = nrhs,
                          .lower = lower,
                          .transpose = transpose,
                          .then_transposed = then_transposed,
                          .t = t.data(),
                          .stride_t = shared ? 0 : n * n,
                          .b = x.data(),
                          .stride_b = n * nrhs});
        for (std::int64_t m = 0; m < count; ++m) {
          const MatrixXd tm = matrix(t, shared ? 0 : m, n);
          const MatrixXd tri =
              lower ? MatrixXd(tm.triangularView<Eigen::Lower>()) : MatrixXd(tm.triangularView<Eigen::Upper>());
          const MatrixXd op = transpose ? MatrixXd(tri.transpose()) : tri;
          MatrixXd want = op.partialPivLu().solve(matrix(b, m, n, nrhs));  // a general solver, not a triangular one
          if (then_transposed) want = MatrixXd(op.transpose()).partialPivLu().solve(want);
          CHECK(relative_error(matrix(x, m, n, nrhs), want) < 100 * tolerance<T>);
        }
      }
    }
}

// The adjoint of A = L L^T: for a symmetric direction E, <Lbar, dL> = <Abar, E>, dL by central differences of
// Eigen's factor.
template <class T>
void check_adjoints() {
  Backend& cpu = backend_for(Device::cpu());
  for (std::int64_t n : orders)
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{9}}) {
      INFO("n = " << n << ", count = " << count << ", " << name_of(dtype_of<T>));
      const std::vector<T> a = spd_batch<T>(count, n, 600 + static_cast<std::uint64_t>(n));
      const std::vector<T> l = factor(a, count, n);
      const std::vector<T> l_bar = randn({count, n, n}, 601).astype(dtype_of<T>).template to_vector<T>();
      std::vector<T> a_bar = l_bar;
      cpu.cholesky_backward(dtype_of<T>, count, n, l.data(), n * n, a_bar.data(), n * n);
      std::vector<T> two_threads = l_bar;
      on_threads(2, [&] { cpu.cholesky_backward(dtype_of<T>, count, n, l.data(), n * n, two_threads.data(), n * n); });
      CHECK(two_threads == a_bar);
      for (std::int64_t m = 0; m < count; ++m) {
        const MatrixXd am = matrix(a, m, n);
        const MatrixXd lb = MatrixXd(matrix(l_bar, m, n)).triangularView<Eigen::Lower>();
        const MatrixXd ab = matrix(a_bar, m, n);
        CHECK(ab == ab.transpose());
        const MatrixXd e = [&] {
          const MatrixXd r = randn({n, n}, 602 + static_cast<std::uint64_t>(m)).as_eigen<double>();
          return MatrixXd(r + r.transpose());
        }();
        const double h = 1e-6;
        const auto f = [&](double step) {
          const Eigen::LLT<MatrixXd> llt(am + step * e);
          return (lb.array() * MatrixXd(llt.matrixL()).array()).sum();
        };
        const double want = (f(h) - f(-h)) / (2 * h), got = (ab.array() * e.array()).sum();
        CHECK(std::abs(got - want) <= (std::is_same_v<T, double> ? 1e-6 : 1e-3) * (1 + std::abs(want)));
        std::vector<T> one(l_bar.begin() + m * n * n, l_bar.begin() + (m + 1) * n * n);
        cpu.cholesky_backward(dtype_of<T>, 1, n, l.data() + m * n * n, n * n, one.data(), n * n);
        CHECK(one == std::vector<T>(a_bar.begin() + m * n * n, a_bar.begin() + (m + 1) * n * n));
      }
    }
}

}  // namespace

TEST_CASE("small batched cholesky: Eigen's factor, zeros above, the same bits alone, in a batch, on two threads",
          "[linalg][cholesky][small]") {
  check_factors<double>();
  check_factors<float>();
}

TEST_CASE("small batched cholesky_inverse: A^-1, exactly symmetric, in place, on two threads",
          "[linalg][cholesky][small]") {
  check_inverses<double>();
  check_inverses<float>();
}

TEST_CASE(
    "small batched cholesky_backward: the adjoint by central differences, symmetric, the same bits alone, in a "
    "batch, on two threads",
    "[linalg][cholesky][small]") {
  check_adjoints<double>();
  check_adjoints<float>();
}

TEST_CASE("small batched triangular solves: every flag, per-matrix and shared factors, against a general solver",
          "[linalg][trsm][small]") {
  check_solves<double>();
  check_solves<float>();
}

TEST_CASE("small batched cholesky failures: each matrix's first bad minor, NaN rows from it, the others untouched",
          "[linalg][cholesky][small]") {
  Backend& cpu = backend_for(Device::cpu());
  for (std::int64_t n : {1, 4, 16, 32, 40}) {
    INFO("n = " << n);
    const std::int64_t count = 7;
    std::vector<double> a = spd_batch<double>(count, n, 500 + static_cast<std::uint64_t>(n));
    const std::int64_t bad = n / 2;  // matrix 2 fails at minor bad + 1 (a negative pivot), matrix 5 at 1 (NaN)
    a[static_cast<std::size_t>((2 * n + bad) * n + bad)] = -1.0;
    a[static_cast<std::size_t>(5 * n * n)] = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> l(a.size());
    cpu.cholesky(DType::f64, count, n, a.data(), n * n, l.data(), n * n, false, FactorFailure::poisoning());
    for (std::int64_t m = 0; m < count; ++m) {
      INFO("matrix " << m);
      const std::int64_t first_nan_row = m == 2 ? bad : m == 5 ? 0 : n;
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t nans = 0;
        for (std::int64_t j = 0; j < n; ++j) nans += std::isnan(l[static_cast<std::size_t>((m * n + i) * n + j)]);
        CHECK(nans == (i >= first_nan_row ? n : 0));
      }
    }
    std::vector<std::pair<std::int64_t, std::int32_t>> reported;
    const auto raising = FactorFailure::raising(
        [&](std::int64_t example, std::int32_t minor) { reported.emplace_back(example, minor); });
    cpu.cholesky(DType::f64, count, n, a.data(), n * n, l.data(), n * n, false, raising);
    REQUIRE(reported.size() == 1);
    CHECK(reported[0] == std::pair<std::int64_t, std::int32_t>(2, static_cast<std::int32_t>(bad + 1)));
    // An infinite pivot fails as a NaN does; the op names the batch index.
    a[static_cast<std::size_t>((2 * n + bad) * n + bad)] = std::numeric_limits<double>::infinity();
    reported.clear();
    cpu.cholesky(DType::f64, count, n, a.data(), n * n, l.data(), n * n, false, raising);
    REQUIRE(reported.size() == 1);
    CHECK(reported[0].first == 2);
  }
  // Through the op: the error names the failing matrix of the stack and its minor.
  const Tensor not_pd = Tensor::from_vector(std::vector<double>{4, 1, 1, 4, 1, 2, 2, 1, 4, 0, 0, 4}, {3, 2, 2});
  try {
    (void)cholesky(not_pd);
    FAIL("cholesky of a matrix that is not positive definite returned");
  } catch (const NotPositiveDefinite& e) {
    CHECK(e.batch_index == 1);
    CHECK(e.minor == 2);
    CHECK(std::string(e.what()).find("not positive definite") != std::string::npos);
  }
}
