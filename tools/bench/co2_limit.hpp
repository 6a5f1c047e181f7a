#pragma once
// The hand-written limit of examples/gp_co2's log marginal likelihood and gradient (bench_limit and
// the model zoo): K in one pass over the lower triangle, LLT, alpha = K^-1 y, K^-1 = L^-T L^-1, then
// the 11 contractions tr((alpha alpha^T - K^-1) dK_k) / 2 in a second fused pass that never forms a
// dK matrix. The elementwise passes are in bench_limit_co2.cpp (compiled with -ffast-math).
#include <vtape/core/eigen.hpp>
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <cmath>
#include <numbers>
#include <vector>
#include <vtape/vtape.hpp>

#include "bench_limit_co2.hpp"
#include "gp_model.hpp"

namespace limit {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Vec = Eigen::VectorXd;

// In place: the lower triangle of L becomes that of L^-1. Recursive halves, so that the work
// (n^3 / 3) goes to Eigen's triangular-times-matrix kernels.
inline void invert_lower(Eigen::Ref<Mat> L) {
  const Eigen::Index n = L.rows();
  if (n <= 48) {
    Mat I = Mat::Identity(n, n);
    L.triangularView<Eigen::Lower>().solveInPlace(I);
    L.triangularView<Eigen::Lower>() = I;
    return;
  }
  const Eigen::Index h = n / 2;
  invert_lower(L.topLeftCorner(h, h));
  invert_lower(L.bottomRightCorner(n - h, n - h));
  // [A 0; C D]^-1 = [A^-1 0; -D^-1 C A^-1  D^-1]
  Mat CA = L.bottomLeftCorner(n - h, h) * L.topLeftCorner(h, h).triangularView<Eigen::Lower>();
  L.bottomLeftCorner(n - h, h).noalias() = -(L.bottomRightCorner(n - h, n - h).triangularView<Eigen::Lower>() * CA);
}

// Lower triangle of M^T M for a lower-triangular M, in place (LAPACK's lauum for the lower case):
// [P 0; Q R]^T [P 0; Q R] = [P^T P + Q^T Q  Q^T R; R^T Q  R^T R].
inline void lower_gram(Eigen::Ref<Mat> M) {
  const Eigen::Index n = M.rows();
  if (n <= 48) {
    Mat T = M.triangularView<Eigen::Lower>();
    Mat S = T.transpose() * T;
    M.triangularView<Eigen::Lower>() = S;
    return;
  }
  const Eigen::Index h = n / 2;
  lower_gram(M.topLeftCorner(h, h));
  M.topLeftCorner(h, h).selfadjointView<Eigen::Lower>().rankUpdate(M.bottomLeftCorner(n - h, h).transpose());
  // The bottom-left block becomes R^T Q, with R the bottom-right triangle before its own turn.
  M.bottomLeftCorner(n - h, h) =
      M.bottomRightCorner(n - h, n - h).triangularView<Eigen::Lower>().transpose() * M.bottomLeftCorner(n - h, h);
  lower_gram(M.bottomRightCorner(n - h, n - h));
}

class Co2Limit {
 public:
  Co2Limit(const std::vector<double>& t, std::vector<double> y) : n_(static_cast<Eigen::Index>(t.size())), y_(n_) {
    for (Eigen::Index i = 0; i < n_; ++i) y_(i) = y[static_cast<std::size_t>(i)];
    for (Eigen::Index j = 0; j < n_; ++j)
      for (Eigen::Index i = j; i < n_; ++i) {
        const double d = t[static_cast<std::size_t>(i)] - t[static_cast<std::size_t>(j)];
        const double s = std::sin(std::numbers::pi * d);
        sq_.push_back(d * d);
        sin2_.push_back(s * s);
      }
    K_.resize(n_, n_);
    w_.resize(n_);
  }

  double value_and_grad(const double* theta, double* grad) {
    double v[gp::n_theta];
    for (int k = 0; k < gp::n_theta; ++k) v[k] = std::exp(theta[k]);
    const double c1 = v[0], i1 = 1 / (v[1] * v[1]), c2 = v[2], i2 = 1 / (v[3] * v[3]), is = 1 / (v[4] * v[4]);
    const double c3 = v[5], al = v[6], i3 = 1 / (v[7] * v[7]), c4 = v[8], i4 = 1 / (v[9] * v[9]);
    const limit::Co2Params kp{c1, i1, c2, i2, is, c3, al, i3, c4, i4, i3 / (2 * al)};
    // Pass 1: K's lower triangle, column by column (the packed inputs are in the same order).
    std::size_t q = 0;
    for (Eigen::Index j = 0; j < n_; ++j) {
      const auto count = static_cast<std::size_t>(n_ - j);
      co2_fill(kp, &sq_[q], &sin2_[q], count, K_.col(j).data() + j);
      K_(j, j) += v[10] + 1e-10;
      q += count;
    }
    Eigen::LLT<Eigen::Ref<Mat>, Eigen::Lower> llt(K_);
    if (llt.info() != Eigen::Success) throw vt::Error("bench_limit co2: K is not positive definite");
    double logdet = 0;
    for (Eigen::Index i = 0; i < n_; ++i) logdet += 2 * std::log(K_(i, i));
    alpha_ = y_;
    llt.solveInPlace(alpha_);
    const double lml =
        -0.5 * y_.dot(alpha_) - 0.5 * logdet - 0.5 * static_cast<double>(n_) * std::log(2 * std::numbers::pi);
    invert_lower(K_);
    lower_gram(K_);  // K_'s lower triangle is now K^-1's
    // Pass 2: W = alpha alpha^T - K^-1 against every dK/dtheta_k; W's off-diagonal pairs count
    // twice (the 1/2 of the formula cancels), its diagonal once.
    double g[gp::n_theta] = {};
    q = 0;
    for (Eigen::Index j = 0; j < n_; ++j) {
      const Eigen::Index count = n_ - j;
      w_.head(count) = alpha_.tail(count) * alpha_(j) - K_.col(j).tail(count);
      w_(0) *= 0.5;
      g[10] += w_(0) * v[10];
      co2_contract(kp, &sq_[q], &sin2_[q], w_.data(), static_cast<std::size_t>(count), g);
      q += static_cast<std::size_t>(count);
    }
    for (int k = 0; k < gp::n_theta; ++k) grad[k] = g[k];
    return lml;
  }

  double value(const double* theta) {
    double g[gp::n_theta];
    return value_and_grad(theta, g);
  }

 private:
  Eigen::Index n_;
  Vec y_, alpha_, w_;
  std::vector<double> sq_, sin2_;
  Mat K_;
};

}  // namespace limit
