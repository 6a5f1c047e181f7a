// The CUDA kernels' per-item steps (backends/cuda/element_steps.hpp) run on the host, item by
// item: strided index arithmetic, and the steps around cuSOLVER's column-major Cholesky that give
// vtape's row-major lower factor. No GPU needed; cuSOLVER's potrf is stood in for by Eigen on
// the column-major view, scribbling over the other triangle as potrfBatched was seen to do.
#include <vtape/core/eigen.hpp>
#include <Eigen/Dense>
#include <limits>
#include <random>
#include <vtape/backends/cuda/element_steps.hpp>
#include <vtape/backends/cuda/layout_of.hpp>

#include "gradcheck.hpp"

using namespace vt;
namespace steps = vt::cuda::steps;

TEST_CASE("strided offsets after axis merging visit every element in row-major order", "[cuda-steps]") {
  struct Case {
    Shape shape;
    Shape a, b;  // strides of two operands
  };
  const std::vector<Case> cases = {
      {{4, 5, 6}, {30, 6, 1}, {30, 6, 1}},  // contiguous: merges to one axis
      {{4, 5, 6}, {1, 4, 20}, {30, 6, 1}},  // transposed read
      {{4, 1, 6}, {6, 0, 1}, {0, 0, 1}},    // unit axis and broadcasts
      {{3, 4, 5, 2}, {40, 10, 2, 1}, {0, 5, 1, 0}},
      {{2, 3, 2, 3, 2, 3, 2}, {216, 72, 36, 12, 6, 2, 1}, {1, 2, 6, 12, 36, 72, 216}},
      {{7}, {3}, {0}},
      {{}, {}, {}},
  };
  for (const Case& c : cases) {
    const auto layout = cuda::layout_of<2>("test", c.shape, {&c.a, &c.b});
    REQUIRE(layout.total == numel(c.shape));
    const Shape row_major = contiguous_strides(c.shape);
    for (std::int64_t i = 0; i < layout.total; ++i) {
      std::int64_t off[2], off32[2];
      steps::offsets_of(layout, i, off);
      steps::offsets_of(layout, static_cast<std::int32_t>(i), off32);  // the 32-bit path: the same offsets
      REQUIRE(steps::fits_int32(layout));
      REQUIRE(off32[0] == off[0]);
      REQUIRE(off32[1] == off[1]);
      std::int64_t want_a = 0, want_b = 0;
      for (std::size_t d = 0; d < c.shape.size(); ++d) {
        const std::int64_t idx = i / row_major[d] % c.shape[d];
        want_a += idx * c.a[d];
        want_b += idx * c.b[d];
      }
      INFO("shape " << to_string(c.shape) << ", element " << i);
      REQUIRE(off[0] == want_a);
      REQUIRE(off[1] == want_b);
    }
  }
  // Past 2^30 elements the kernels index in 64 bits.
  const Shape huge = {std::int64_t{1} << 20, 1 << 11}, huge_strides = {1 << 12, 2};
  CHECK_FALSE(steps::fits_int32(cuda::layout_of<1>("copy", huge, {&huge_strides})));
  const Shape deep(10, 2), strided = {19683, 6561, 2187, 729, 243, 81, 27, 9, 3, 1};  // no two axes merge
  CHECK_THAT(vt::testing::error_of([&] { (void)cuda::layout_of<1>("copy", deep, {&strided}); }),
             Catch::Contains("at most 8"));
}

namespace {

// cuSOLVER's potrf (upper, column-major, lda = n) on each matrix at l + m * stride: factors the
// column-major upper triangle in place as U^T U; the other triangle is left dirty.
void potrf_upper_column_major(std::int64_t count, std::int64_t n, double* l, std::int64_t stride) {
  using ColMajor = Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>>;
  for (std::int64_t m = 0; m < count; ++m) {
    ColMajor a(l + m * stride, n, n);
    const Eigen::MatrixXd upper = a.triangularView<Eigen::Upper>();
    const Eigen::MatrixXd factor = Eigen::MatrixXd(upper.selfadjointView<Eigen::Upper>()).llt().matrixU();
    a.triangularView<Eigen::Upper>() = factor;
    a.triangularView<Eigen::StrictlyLower>().setConstant(-7e300);
  }
}

// Three SPD matrices, row-major, at a stride with gaps, only their lower triangles meaningful
// (garbage above), and their lower factors from the CPU backend.
struct FactorCase {
  static constexpr std::int64_t count = 3, n = 7, stride = n * n + 5;
  std::vector<double> a = std::vector<double>(static_cast<std::size_t>(count * stride), 99.0);
  std::vector<double> want;
  FactorCase() {
    const Tensor m = randn({count, n, n}, 31);
    const Tensor spd = matmul(m, swapaxes(m, -1, -2)) / 7.0 + eye(n);
    const std::vector<double> values = spd.to_vector<double>();
    for (std::int64_t k = 0; k < count; ++k)
      for (std::int64_t e = 0; e < n * n; ++e) {
        const std::int64_t i = e / n, j = e % n;
        a[static_cast<std::size_t>(k * stride + e)] = j <= i ? values[static_cast<std::size_t>(k * n * n + e)] : -1e300;
      }
    want = cholesky(spd).to_vector<double>();
  }
  void check(const std::vector<double>& l, const char* what) const {
    for (std::int64_t k = 0; k < count; ++k)
      for (std::int64_t e = 0; e < n * n; ++e) {
        INFO(what << ", matrix " << k << ", element " << e);
        CHECK(l[static_cast<std::size_t>(k * stride + e)] ==
              Approx(want[static_cast<std::size_t>(k * n * n + e)]).margin(1e-12));
      }
  }
};

}  // namespace

TEST_CASE("copy, column-major upper potrf, zero the rest: the row-major lower factor, in and out of place",
          "[cuda-steps]") {
  const FactorCase c;
  const std::int64_t count = c.count, n = c.n, stride = c.stride;
  for (bool in_place : {false, true}) {
    std::vector<double> l = in_place ? c.a : std::vector<double>(c.a.size(), std::nan(""));
    if (!in_place)
      for (std::int64_t t = 0; t < count * n * n; ++t) steps::copy_lower(t, n, c.a.data(), stride, l.data(), stride);
    potrf_upper_column_major(count, n, l.data(), stride);
    for (std::int64_t t = 0; t < count * n * n; ++t) steps::lower_triangle(t, n, l.data(), stride, 1.0);
    c.check(l, in_place ? "in place" : "out of place");
  }
}

TEST_CASE("matrix work items split into matrix, row and column in 32 and in 64 bits", "[cuda-steps]") {
  for (std::int64_t n : {1, 7, 256, 70000})
    for (std::int64_t t : {std::int64_t{0}, n * n + 3 * n + 1, std::int64_t{UINT32_MAX} - 5,
                           std::int64_t{UINT32_MAX} + 9, std::int64_t{1} << 40}) {
      std::int64_t m, i, j;
      steps::matrix_item(t, n, m, i, j);
      INFO("n " << n << ", item " << t);
      CHECK(m * n * n + i * n + j == t);
      CHECK((0 <= i && i < n && 0 <= j && j < n));
    }
}

TEST_CASE("a checked factorization's failed rows become NaN from the failing minor on", "[cuda-steps]") {
  const std::int64_t n = 3, count = 3;
  std::vector<double> l(static_cast<std::size_t>(count * n * n), 1.0);
  const std::vector<std::int32_t> info = {0, 2, 1};
  for (std::int64_t t = 0; t < count * n * n; ++t) steps::poison_failed_rows(t, n, l.data(), n * n, info.data());
  for (std::int64_t m = 0; m < count; ++m)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const bool poisoned = info[m] != 0 && i >= info[m] - 1;
        INFO("matrix " << m << " (" << i << ", " << j << ")");
        CHECK(std::isnan(l[static_cast<std::size_t>(m * n * n + i * n + j)]) == poisoned);
      }
}

TEST_CASE("the factor's diagonal check reports the earliest non-finite pivot", "[cuda-steps]") {
  const std::int64_t n = 4;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Diagonals of four factors; cuSOLVER's info for each.
  const std::vector<std::vector<double>> diagonals = {{1, 2, 3, 4}, {1, nan, 3, 4}, {inf, 2, 3, 4}, {1, 2, 3, nan}};
  std::vector<std::int32_t> info = {0, 0, 4, 2};
  std::vector<double> l(static_cast<std::size_t>(4 * n * n), 0.0);
  for (std::int64_t m = 0; m < 4; ++m)
    for (std::int64_t k = 0; k < n; ++k) l[static_cast<std::size_t>(m * n * n + k * n + k)] = diagonals[m][k];
  for (std::int64_t m = 0; m < 4; ++m) steps::check_diagonal(m, n, l.data(), n * n, info.data());
  CHECK(info == std::vector<std::int32_t>{0, 2, 1, 2});  // a NaN after cuSOLVER's failing minor is not earlier
}

TEST_CASE("the Cholesky adjoint's matrix steps", "[cuda-steps]") {
  const std::int64_t n = 5, count = 2;
  const std::vector<double> x = randn({count, n, n}, 41).to_vector<double>();
  const auto at = [&](const std::vector<double>& v, std::int64_t m, std::int64_t i, std::int64_t j) {
    return v[static_cast<std::size_t>(m * n * n + i * n + j)];
  };
  std::vector<double> lower = x, transposed(x.size()), symmetric = x;
  lower[1] = std::numeric_limits<double>::infinity();  // above the diagonal: must become 0
  for (std::int64_t t = 0; t < count * n * n; ++t) {
    steps::lower_triangle(t, n, lower.data(), n * n, 0.5);
    steps::transpose(t, n, x.data(), n * n, transposed.data(), n * n);
    steps::symmetrize(t, n, symmetric.data(), n * n);
  }
  for (std::int64_t m = 0; m < count; ++m)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        CHECK(at(lower, m, i, j) == (j > i ? 0.0 : j == i ? 0.5 * at(x, m, i, j) : at(x, m, i, j)));
        CHECK(at(transposed, m, i, j) == at(x, m, j, i));
        CHECK(at(symmetric, m, i, j) == Approx(0.5 * (at(x, m, i, j) + at(x, m, j, i))));
      }
}

TEST_CASE("a cumsum line sums in order, forwards and backwards, at any stride", "[cuda-steps]") {
  // Two interleaved lines of 4 (stride 2), written to a column of stride 3.
  const std::vector<double> in = {1, 10, 2, 20, 3, 30, 4, 40};
  std::vector<double> out(12, -1.0);
  steps::cumsum_line(in.data(), 2, out.data(), 3, 4, false);
  CHECK(out == std::vector<double>{1, -1, -1, 3, -1, -1, 6, -1, -1, 10, -1, -1});
  steps::cumsum_line(in.data() + 1, 2, out.data() + 1, 3, 4, true);
  CHECK(out == std::vector<double>{1, 100, -1, 3, 90, -1, 6, 70, -1, 10, 40, -1});
  // float sums in double: a float running sum would lose the ones.
  const std::vector<float> f = {1e8f, 1, 1, -1e8f};
  std::vector<float> g(4);
  steps::cumsum_line(f.data(), 1, g.data(), 1, 4, false);
  CHECK(g.back() == 2.0f);
}

// ---------------------------------------------------------------- qr and eigh

namespace {

// The reduced QR of one row-major matrix and its eigendecomposition, as vtape's CPU backend gives them.
Eigen::MatrixXd block_of(const std::vector<double>& v, std::int64_t offset, std::int64_t rows, std::int64_t cols) {
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(v.data() + offset,
                                                                                                  rows, cols);
}

}  // namespace

TEST_CASE("qr's steps around geqrf and orgqr give the row-major reduced Q and R", "[cuda-steps][qr]") {
  // As CudaBackend::qr does, with the same views, and Eigen's Householder QR on the column-major
  // copy standing in for geqrf (R and the reflectors in place) and orgqr (Q in place).
  Backend& cpu = backend_for(Device::cpu());
  for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 3}, {3, 5}, {4, 4}}) {
    INFO("m = " << m << ", n = " << n);
    const std::int64_t count = 3, k = std::min(m, n), mn = m * n, stride_a = mn + 2;  // a's matrices apart
    std::vector<double> a = randn({count * stride_a}, 11).to_vector<double>();
    a[static_cast<std::size_t>(2 * stride_a + mn - 1)] = std::numeric_limits<double>::infinity();  // matrix 2
    std::vector<double> work(static_cast<std::size_t>(count * mn)), r(static_cast<std::size_t>(count * k * n), 7.0),
        q(static_cast<std::size_t>(count * m * k), 7.0);
    std::vector<std::int32_t> info(static_cast<std::size_t>(count), 0);
    cpu.copy(View{DType::f64, a.data(), {count, m, n}, {stride_a, n, 1}},
             View{DType::f64, work.data(), {count, m, n}, {mn, 1, m}});
    for (std::int64_t t = 0; t < count * mn; ++t) steps::flag_nonfinite(t, n, m, work.data(), mn, info.data());
    for (std::int64_t t = 0; t < count * mn; ++t) steps::zero_flagged(t, n, m, work.data(), mn, info.data());
    CHECK(info == std::vector<std::int32_t>{0, 0, -1});
    std::vector<Eigen::HouseholderQR<Eigen::MatrixXd>> factors;
    for (std::int64_t i = 0; i < count; ++i) {  // geqrf
      Eigen::Map<Eigen::MatrixXd> matrix(work.data() + i * mn, m, n);
      CHECK(matrix.allFinite());  // the flagged matrix was zeroed
      factors.emplace_back(Eigen::MatrixXd(matrix));
      matrix = factors.back().matrixQR();
    }
    cpu.copy(View{DType::f64, work.data(), {count, k, n}, {mn, 1, m}},
             View{DType::f64, r.data(), {count, k, n}, {k * n, n, 1}});
    for (std::int64_t t = 0; t < count * k * n; ++t) steps::upper_trapezoid(t, k, n, r.data(), k * n);
    for (std::int64_t i = 0; i < count; ++i) {  // orgqr
      Eigen::Map<Eigen::MatrixXd> matrix(work.data() + i * mn, m, n);
      matrix.leftCols(k) = factors[static_cast<std::size_t>(i)].householderQ() * Eigen::MatrixXd::Identity(m, k);
    }
    cpu.copy(View{DType::f64, work.data(), {count, m, k}, {mn, 1, m}},
             View{DType::f64, q.data(), {count, m, k}, {m * k, k, 1}});
    for (std::int64_t i = 0; i < 2; ++i) {
      const QR want = qr(Tensor::from_eigen(block_of(a, i * stride_a, m, n)));
      CHECK((block_of(q, i * m * k, m, k) - want.q.as_eigen<double>()).cwiseAbs().maxCoeff() <= 1e-14);
      CHECK((block_of(r, i * k * n, k, n) - want.r.as_eigen<double>()).cwiseAbs().maxCoeff() <= 1e-14);
    }
  }
}

TEST_CASE("eigh's steps around syevj give the row-major eigenvectors as columns", "[cuda-steps][eigh]") {
  // As CudaBackend::eigh does, with Eigen's solver on the column-major copy standing in for
  // syevjBatched and syevd (the eigenvectors column-major in place, the eigenvalues apart).
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t count = 3, n = 5, nn = n * n, stride_a = nn + 3, stride_out = n + nn;
  std::vector<double> a =
      randn({count * stride_a}, 12).to_vector<double>();         // not symmetric: the upper triangle is not read
  a[static_cast<std::size_t>(0 * stride_a + 1)] = std::nan("");  // matrix 0, above the diagonal
  a[static_cast<std::size_t>(1 * stride_a + 4 * n + 2)] = std::nan("");  // matrix 1, below it
  std::vector<double> work(static_cast<std::size_t>(count * nn), 7.0), values(static_cast<std::size_t>(count * n));
  std::vector<double> out(static_cast<std::size_t>(count * stride_out), 7.0);  // w then v, as the op packs them
  std::vector<std::int32_t> info(static_cast<std::size_t>(count), 0), solver_info = {0, 0, 6};
  for (std::int64_t t = 0; t < count * nn; ++t) steps::copy_lower(t, n, a.data(), stride_a, work.data(), nn);
  for (std::int64_t t = 0; t < count * nn; ++t) steps::mirror_lower(t, n, work.data(), nn);
  for (std::int64_t t = 0; t < count * nn; ++t) steps::flag_nonfinite(t, n, n, work.data(), nn, info.data());
  for (std::int64_t t = 0; t < count * nn; ++t) steps::zero_flagged(t, n, n, work.data(), nn, info.data());
  CHECK(info == std::vector<std::int32_t>{0, -1, 0});
  for (std::int64_t i = 0; i < count; ++i) {
    Eigen::Map<Eigen::MatrixXd> matrix(work.data() + i * nn, n, n);
    CHECK(matrix.allFinite());
    CHECK(matrix == matrix.transpose());
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(matrix);
    matrix = solver.eigenvectors();
    Eigen::Map<Eigen::VectorXd>(values.data() + i * n, n) = solver.eigenvalues();
  }
  for (std::int64_t i = 0; i < count; ++i) steps::merge_info(i, info.data(), solver_info.data());
  CHECK(info == std::vector<std::int32_t>{0, -1, 6});  // the input's flag first, then the solver's
  // A solver's bad argument (info -i) is kept apart from the non-finite flag -1.
  std::vector<std::int32_t> flags = {0, -1, 0}, bad = {-1, -2, -3};
  for (std::int64_t i = 0; i < 3; ++i) steps::merge_info(i, flags.data(), bad.data());
  constexpr std::int32_t bad_argument = cuda::kernels::solver_bad_argument;
  CHECK(flags == std::vector<std::int32_t>{bad_argument - 1, -1, bad_argument - 3});
  cpu.copy(View{DType::f64, values.data(), {count, n}, {n, 1}},
           View{DType::f64, out.data(), {count, n}, {stride_out, 1}});
  cpu.copy(View{DType::f64, work.data(), {count, n, n}, {nn, 1, n}},
           View{DType::f64, out.data() + n, {count, n, n}, {stride_out, n, 1}});
  for (std::int64_t i : {0, 2}) {
    const Eigh want = eigh(Tensor::from_eigen(block_of(a, i * stride_a, n, n)));  // reads the lower triangle
    const Eigen::MatrixXd w = block_of(out, i * stride_out, 1, n), v = block_of(out, i * stride_out + n, n, n);
    CHECK((w - want.eigenvalues.as_eigen<double>()).cwiseAbs().maxCoeff() <= 1e-14);
    const Eigen::MatrixXd want_v = want.eigenvectors.as_eigen<double>();
    CHECK((v.cwiseAbs() - want_v.cwiseAbs()).cwiseAbs().maxCoeff() <= 1e-12);  // up to each column's sign
    const Eigen::MatrixXd lower = block_of(a, i * stride_a, n, n).triangularView<Eigen::Lower>();
    const Eigen::MatrixXd symmetric =
        Eigen::MatrixXd(lower) + Eigen::MatrixXd(lower.triangularView<Eigen::StrictlyLower>()).transpose();
    CHECK((symmetric * v - v * w.transpose().asDiagonal()).cwiseAbs().maxCoeff() <= 1e-12);  // A v_j = w_j v_j
  }
}

TEST_CASE("rectangle work items and the trapezoid step", "[cuda-steps]") {
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {3, 7}, {7, 3}})
    for (std::int64_t t : {std::int64_t{0}, rows * cols + cols + 1, std::int64_t{1} << 40}) {
      std::int64_t m, i, j;
      steps::rectangle_item(t, rows, cols, m, i, j);
      CHECK(m * rows * cols + i * cols + j == t);
      CHECK((0 <= i && i < rows && 0 <= j && j < cols));
    }
  std::vector<double> x(2 * 3 * 4, std::numeric_limits<double>::infinity());
  for (std::int64_t t = 0; t < 24; ++t) steps::upper_trapezoid(t, 3, 4, x.data(), 12);
  for (std::int64_t t = 0; t < 24; ++t) CHECK((x[static_cast<std::size_t>(t)] == 0.0) == ((t % 12) / 4 > t % 4));
}

TEST_CASE("an index check's codes keep the first bad offset under a max, and 0 means none", "[cuda-steps][gather]") {
  // As the gather and scatter kernels note bad indices: an atomic max over the codes, from 0.
  for (const std::vector<std::int64_t>& offsets :
       std::vector<std::vector<std::int64_t>>{{5, 2, 9}, {0}, {7, 0, 3}, {std::int64_t{1} << 40, 12}}) {
    std::int64_t bad = 0;
    for (std::int64_t offset : offsets) {
      CHECK(steps::bad_index_code(offset) > 0);
      bad = std::max(bad, steps::bad_index_code(offset));
    }
    CHECK(bad != 0);
    CHECK(steps::bad_index_offset(bad) == *std::min_element(offsets.begin(), offsets.end()));
  }
}
