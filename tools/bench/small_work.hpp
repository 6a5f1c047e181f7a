#pragma once
// Small work per example on any device, as a JAX user writes it: shared by bench_gpu_small (timings) and the GPU
// tests (values against the CPU's). Every constant is made on theta's device.
#include <cmath>
#include <tuple>
#include <vtape/vtape.hpp>

namespace vt_bench {

// A Matérn-3/2 Kalman filter by scan (tools/bench/zoo/models/kalman.cpp's, 200 steps) plus a 3-component mixture in
// the [N, K] layout: 2 x 2 products in a loop's body, a loop under vmap, reductions over a short axis. theta: [3].
inline vt::Tensor kalman_and_mixture(const vt::Tensor& theta) {
  using namespace vt;
  const Device d = theta.device();
  const auto at = [&](std::int64_t i) { return reshape(slice(theta, 0, i, i + 1), {}); };
  const Tensor lam = std::sqrt(3.0) / exp(at(0)), s2 = exp(2.0 * at(1)), noise2 = exp(2.0 * at(2));
  const Tensor zero = zeros({}, DType::f64, d), dt = full({}, 0.1, DType::f64, d);
  const Tensor A =
      stack({stack({1.0 + lam * 0.1, dt}), stack({-square(lam) * 0.1, 1.0 - lam * 0.1})}) * exp(-lam * 0.1);
  const Tensor p_inf = stack({stack({s2, zero}), stack({zero, square(lam) * s2})});
  const Tensor Q = p_inf - matmul(matmul(A, p_inf), A.t()), H = Tensor::from_vector({1.0, 0.0}, {2}, DType::f64, d);
  using Carry = std::tuple<Tensor, Tensor, Tensor>;
  const auto step = [&](const Carry& c, const Tensor& yt) {
    auto [m, P, ll] = c;
    m = matmul(A, m);
    P = matmul(matmul(A, P), A.t()) + Q;
    const Tensor S = matmul(H, matmul(P, H)) + noise2, K = matmul(P, H) / S, r = yt - matmul(H, m);
    m = m + K * r;
    P = P - reshape(K, {2, 1}) * reshape(K, {1, 2}) * S;
    return std::pair<Carry, std::tuple<>>{Carry{m, P, ll - 0.5 * (log(S) + square(r) / S)}, {}};
  };
  const Tensor y = sin(arange(0, 200, 1, DType::f64, d) * 0.1);
  const Tensor kalman = std::get<2>(scan(step, Carry{zeros({2}, DType::f64, d), p_inf, zero}, y).first);
  const Tensor x = reshape(sin(arange(0, 500, 1, DType::f64, d) * 12.9898) * 2.0, {500, 1});
  const Tensor mu = slice(theta, 0, 0, 3);
  return kalman + sum(logsumexp(-0.5 * square(x - mu), {1})) + sum(sum(square(x - mu), {0}));
}

// Many small Gaussian-process factors (the zoo's hierarchical model's shape): 64 groups of 16 points, each an RBF
// covariance from theta = [log amp, log ell, log sigma], by one batched cho_factor of [64, 16, 16], cho_solve and
// logdet.
inline vt::Tensor small_factors(const vt::Tensor& theta) {
  using namespace vt;
  const Device d = theta.device();
  const auto at = [&](std::int64_t i) { return reshape(slice(theta, 0, i, i + 1), {}); };
  const Tensor t = reshape(arange(0, 64 * 16, 1, DType::f64, d) / 16.0, {64, 16, 1});
  const Tensor d2 = square(t - swapaxes(t, -1, -2));
  const Tensor K = exp(2.0 * at(0)) * exp(-0.5 * d2 / exp(2.0 * at(1))) + exp(2.0 * at(2)) * eye(16, DType::f64, d);
  const CholeskyFactor f = cho_factor(K);
  const Tensor r = sin(3.0 * t);
  return -0.5 * (sum(r * cho_solve(f, r)) + sum(logdet(f)));
}

}  // namespace vt_bench
