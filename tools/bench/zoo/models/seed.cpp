// The seed program (examples/seed_cholesky_grad, JAX issue 21313): f(p) = mean(A^-1 1),
// A = F diag(p^2) F^T + I, F [256, 128] of Fourier features. The limit is bench_limit's seed limit per
// example: G = F diag(p), A = G G^T + I by a rank-k update of the lower triangle, LLT in place,
// x = A^-1 1, and df/dp = -(2/n) p (F^T x)^2 (A is symmetric, so the adjoint solve is the forward one).
#include <vtape/core/eigen.hpp>
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <cmath>
#include <numbers>

#include "../zoo.hpp"

namespace zoo {

namespace {
constexpr std::int64_t n = 256, ngp = 64, m = 2 * ngp;
}  // namespace

Model seed() {
  std::vector<double> f(static_cast<std::size_t>(n * m));  // F[:, 2j] = sin(2 pi (j+1) t), F[:, 2j+1] = cos(...)
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < ngp; ++j) {
      const double w = 2.0 * std::numbers::pi * static_cast<double>(j + 1) * static_cast<double>(i) / (n - 1);
      f[static_cast<std::size_t>(i * m + 2 * j)] = std::sin(w);
      f[static_cast<std::size_t>(i * m + 2 * j + 1)] = std::cos(w);
    }
  Model model;
  model.name = "seed";
  model.about = "the seed program: mean(cho_solve(cho_factor(F diag(p^2) F^T + I), 1)), F 256 x 128, 128 parameters";
  for (std::int64_t k = 0; k < m; ++k) model.base.push_back(0.5 + 0.3 * std::sin(static_cast<double>(k)));
  const vt::Tensor F = vt::Tensor::from_vector(f, {n, m}), ones = vt::ones({n}), identity = vt::eye(n);
  model.log_density = [=](const vt::Tensor& p) {
    const vt::Tensor A = vt::matmul(F * vt::square(p), F.t()) + identity;
    return vt::mean(vt::cho_solve(vt::cho_factor(A), ones));
  };
  using Mat = Eigen::MatrixXd;
  const Mat Fm =
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(f.data(), n, m);
  model.limit = [Fm](const double* thetas, std::int64_t batch, double* values, double* grads) {
#pragma omp parallel
    {
      Mat G(n, m), A(n, n);
      Eigen::VectorXd x(n), u(m);
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < batch; ++b) {
        const Eigen::Map<const Eigen::VectorXd> p(thetas + b * m, m);
        G.noalias() = Fm * p.asDiagonal();
        A.setIdentity();
        A.selfadjointView<Eigen::Lower>().rankUpdate(G);
        Eigen::LLT<Eigen::Ref<Mat>, Eigen::Lower> llt(A);
        x.setOnes();
        llt.solveInPlace(x);
        u.noalias() = Fm.transpose() * x;
        Eigen::Map<Eigen::VectorXd>(grads + b * m, m) = (-2.0 / n) * p.cwiseProduct(u.cwiseAbs2());
        values[b] = x.sum() / n;
      }
    }
  };
  return model;
}

}  // namespace zoo
