#include <Eigen/Dense>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::require_close;

TEST_CASE("matmul agrees with Eigen for matrix-matrix, matrix-vector, vector-matrix and dot", "[matmul]") {
  const Tensor a = randn({3, 4}, 1), b = randn({4, 2}, 2), v = randn({4}, 3), w = randn({3}, 4);
  const Eigen::MatrixXd ea = a.as_eigen<double>(), eb = b.as_eigen<double>();
  const Eigen::VectorXd ev = v.as_eigen<double>(), ew = w.as_eigen<double>();
  const Eigen::MatrixXd ab = ea * eb;
  require_close(matmul(a, b), Tensor::from_eigen(ab));
  const Eigen::VectorXd av = ea * ev, wa = ea.transpose() * ew;
  require_close(matmul(a, v), Tensor::from_eigen(av));
  require_close(matmul(w, a), Tensor::from_eigen(wa));
  CHECK(matmul(v, v).ndim() == 0);
  CHECK(matmul(v, v).item() == Approx(ev.dot(ev)));
}

TEST_CASE("matmul broadcasts leading batch axes", "[matmul]") {
  const Tensor a = randn({2, 1, 3, 4}, 5), b = randn({5, 4, 2}, 6);
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 5, 3, 2});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 5; ++j) {
      const Tensor ai = reshape(slice(a, 0, i, i + 1), {3, 4});
      const Tensor bj = reshape(slice(b, 0, j, j + 1), {4, 2});
      const Tensor cij = reshape(slice(slice(c, 0, i, i + 1), 1, j, j + 1), {3, 2});
      require_close(cij, matmul(ai, bj), 1e-12);
    }
  CHECK(matmul(randn({7, 3, 4}, 7), randn({4}, 8)).shape() == Shape{7, 3});
  CHECK(matmul(randn({4}, 8), randn({7, 4, 3}, 7)).shape() == Shape{7, 3});
}

TEST_CASE("matmul gradients match finite differences", "[matmul][grad]") {
  const std::vector<std::pair<Shape, Shape>> cases = {{{3, 4}, {4, 2}}, {{3, 4}, {4}},       {{4}, {4, 2}},
                                                      {{4}, {4}},       {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
                                                      {{1, 1}, {1, 1}}, {{5, 4}, {2, 4, 1}}};
  for (const auto& [sa, sb] : cases) {
    INFO("matmul of " << to_string(sa) << " and " << to_string(sb));
    check_gradients([](auto& a) { return matmul(a[0], a[1]); }, {randn(sa, 9), randn(sb, 10)});
  }
}

TEST_CASE("matmul in float32", "[matmul]") {
  const Tensor a = randn({3, 4}, 1, DType::f32), b = randn({4, 2}, 2, DType::f32);
  const Tensor c = matmul(a, b);
  CHECK(c.dtype() == DType::f32);
  require_close(c, matmul(a.astype(DType::f64), b.astype(DType::f64)), 1e-5);
}
