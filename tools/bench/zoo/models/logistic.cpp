// Bayesian logistic regression, 1000 observations and 20 weights with a standard normal prior:
// log p(w | y) = sum_i [y_i z_i - softplus(z_i)] - |w|^2 / 2 + const, z = X w.
#include <vtape/core/eigen.hpp>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "../zoo.hpp"

zoo::Model zoo::logistic() {
  using vt::Tensor;
  constexpr std::int64_t n = 1000, p = 20;
  std::vector<double> x(static_cast<std::size_t>(n * p)), y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto di = static_cast<double>(i);
    for (std::int64_t j = 0; j < p; ++j) {
      const auto dj = static_cast<double>(j);
      x[static_cast<std::size_t>(i * p + j)] = std::sin(0.7 * di + 1.3 * dj) + 0.1 * std::cos(3.1 * di * dj);
    }
    y[static_cast<std::size_t>(i)] = std::sin(2.1 * di) > 0.0 ? 1.0 : 0.0;
  }
  const Tensor X = Tensor::from_vector(x, {n, p}), Y = Tensor::from_vector(y, {n});

  Model m;
  m.name = "logistic";
  m.about = "logistic regression: 1000 observations, 20 weights, normal prior, matmul + softplus";
  for (std::int64_t k = 0; k < p; ++k) m.base.push_back(0.1 * std::cos(static_cast<double>(k)));
  m.log_density = [=](const Tensor& w) {
    const Tensor z = vt::matmul(X, w);
    return vt::sum(Y * z - vt::softplus(z)) - 0.5 * vt::sum(vt::square(w));
  };

  // The limit: a block of examples at a time, Z = X W^T [n, block] as one GEMM (each example's z a
  // contiguous column), then the elementwise pass, then the gradients X^T (y - sigmoid(Z)) - W^T as one more.
  using Mat = Eigen::MatrixXd;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Mat xm = Eigen::Map<const RowMat>(x.data(), n, p);
  const Eigen::ArrayXd ya = Eigen::Map<const Eigen::ArrayXd>(y.data(), n);
  m.limit = [=](const double* thetas, std::int64_t batch, double* values, double* grads) {
    constexpr std::int64_t block = 16;  // Z's block stays in L2 (128 KB)
    const std::int64_t blocks = (batch + block - 1) / block;
#pragma omp parallel
    {
      Eigen::ArrayXXd z(n, block), e(n, block);
#pragma omp for schedule(static)
      for (std::int64_t blk = 0; blk < blocks; ++blk) {
        const std::int64_t first = blk * block, b = std::min(block, batch - first);
        // The rows of thetas [b, p] (row-major) are the columns of W^T [p, b] (column-major); the same for grads.
        const Eigen::Map<const Mat> wt(thetas + first * p, p, b);
        Eigen::Map<Mat> gt(grads + first * p, p, b);
        auto zb = z.leftCols(b);
        auto eb = e.leftCols(b);
        zb.matrix().noalias() = xm * wt;
        eb = (-zb.abs()).exp();
        // softplus(z) = max(z, 0) + log(1 + exp(-|z|)): Eigen's log is vectorized and its log1p is not (4x slower
        // here), and with exp(-|z|) <= 1 the log costs at most an ulp of 1 per term, absolute.
        Eigen::Map<Eigen::RowVectorXd>(values + first, b) =
            ((zb.colwise() * ya - zb.max(0.0) - (1.0 + eb).log()).colwise().sum() -
             0.5 * wt.colwise().squaredNorm().array())
                .matrix();
        // y - sigmoid(z), sigmoid(z) = 1 / (1 + exp(-z)) for z >= 0, exp(z) / (1 + exp(z)) below.
        zb = (-(zb >= 0.0).select(1.0, eb) / (1.0 + eb)).colwise() + ya;
        gt.noalias() = xm.transpose() * zb.matrix();
        gt -= wt;
      }
    }
  };
  return m;
}
