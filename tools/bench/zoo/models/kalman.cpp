// A Matérn-3/2 Gaussian process as a state-space model, its likelihood by a Kalman filter written with scan over
// 1000 observations (a 2-number state, 2 x 2 covariances), theta = [log ell, log sigma, log noise]. Under vmap the
// scan runs once per step over the whole batch of parameter vectors.
#include <array>
#include <cmath>
#include <numbers>
#include <tuple>

#include "../zoo.hpp"

namespace zoo {

namespace {

constexpr std::int64_t steps = 1000;
constexpr double dt = 0.1;

// A number with its derivatives by the three parameters (forward mode), for the limit.
struct Dual {
  double v = 0;
  std::array<double, 3> d{};
};
Dual operator+(const Dual& a, const Dual& b) {
  return {a.v + b.v, {a.d[0] + b.d[0], a.d[1] + b.d[1], a.d[2] + b.d[2]}};
}
Dual operator-(const Dual& a, const Dual& b) {
  return {a.v - b.v, {a.d[0] - b.d[0], a.d[1] - b.d[1], a.d[2] - b.d[2]}};
}
Dual operator*(const Dual& a, const Dual& b) {
  return {a.v * b.v, {a.d[0] * b.v + a.v * b.d[0], a.d[1] * b.v + a.v * b.d[1], a.d[2] * b.v + a.v * b.d[2]}};
}
Dual operator*(double a, const Dual& b) { return {a * b.v, {a * b.d[0], a * b.d[1], a * b.d[2]}}; }
Dual operator+(double a, const Dual& b) { return {a + b.v, b.d}; }
Dual operator/(const Dual& a, const Dual& b) {
  const double inv = 1.0 / b.v, q = a.v * inv;
  return {q, {(a.d[0] - q * b.d[0]) * inv, (a.d[1] - q * b.d[1]) * inv, (a.d[2] - q * b.d[2]) * inv}};
}
Dual log(const Dual& a) { return {std::log(a.v), {a.d[0] / a.v, a.d[1] / a.v, a.d[2] / a.v}}; }
Dual exp(const Dual& a) {
  const double e = std::exp(a.v);
  return {e, {e * a.d[0], e * a.d[1], e * a.d[2]}};
}

}  // namespace

Model kalman() {
  std::vector<double> y(static_cast<std::size_t>(steps));
  for (std::int64_t i = 0; i < steps; ++i) {
    const auto di = static_cast<double>(i);
    y[static_cast<std::size_t>(i)] = std::sin(0.1 * di) + 0.1 * std::sin(7.3 * di);
  }
  Model model;
  model.name = "kalman";
  model.about = "Matérn-3/2 Kalman filter by scan over 1000 observations, a 2-number state, 3 parameters";
  model.base = {0.0, 0.0, std::log(0.1)};
  const vt::Tensor Y = vt::Tensor::from_vector(y, {steps}), H = vt::Tensor::from_vector({1.0, 0.0}, {2});
  const vt::Tensor zero = vt::Tensor::scalar(0.0), step_dt = vt::Tensor::scalar(dt);
  model.log_density = [Y, H, zero, step_dt](const vt::Tensor& theta) {
    using vt::Tensor;
    const auto at = [&](std::int64_t i) { return vt::reshape(vt::slice(theta, 0, i, i + 1), {}); };
    const Tensor ell = vt::exp(at(0)), sigma = vt::exp(at(1)), noise = vt::exp(at(2));
    const Tensor lam = std::sqrt(3.0) / ell;
    const Tensor A =
        vt::stack({vt::stack({1.0 + lam * dt, step_dt}), vt::stack({-vt::square(lam) * dt, 1.0 - lam * dt})}) *
        vt::exp(-lam * dt);
    const Tensor s2 = vt::square(sigma);
    const Tensor p_inf = vt::stack({vt::stack({s2, zero}), vt::stack({zero, vt::square(lam) * s2})});
    const Tensor Q = p_inf - vt::matmul(vt::matmul(A, p_inf), A.t());
    using Carry = std::tuple<Tensor, Tensor, Tensor>;
    const auto step = [&](const Carry& carry, const Tensor& yt) {
      auto [m, P, ll] = carry;
      m = vt::matmul(A, m);
      P = vt::matmul(vt::matmul(A, P), A.t()) + Q;
      const Tensor S = vt::matmul(H, vt::matmul(P, H)) + vt::square(noise);
      const Tensor K = vt::matmul(P, H) / S;
      const Tensor r = yt - vt::matmul(H, m);
      m = m + K * r;
      P = P - vt::reshape(K, {2, 1}) * vt::reshape(K, {1, 2}) * S;
      ll = ll - 0.5 * (vt::log(2.0 * std::numbers::pi * S) + vt::square(r) / S);
      return std::pair<Carry, std::tuple<>>{Carry{m, P, ll}, {}};
    };
    return std::get<2>(vt::scan(step, Carry{vt::zeros({2}), p_inf, zero}, Y).first);
  };

  // The limit: the same filter on scalars, forward mode by hand (each number carries its derivatives by the
  // three parameters), the 2 x 2 algebra written out with P's symmetry.
  model.limit = [y](const double* thetas, std::int64_t batch, double* values, double* grads) {
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b) {
      const double* th = thetas + b * 3;
      const Dual ell = exp(Dual{th[0], {1, 0, 0}}), sigma = exp(Dual{th[1], {0, 1, 0}});
      const Dual noise = exp(Dual{th[2], {0, 0, 1}});
      const Dual lam = Dual{std::sqrt(3.0), {}} / ell, decay = exp(-dt * lam);
      const Dual a11 = (1.0 + dt * lam) * decay, a12 = dt * decay, a21 = -dt * (lam * lam) * decay;
      const Dual a22 = (1.0 + -dt * lam) * decay;
      const Dual s2 = sigma * sigma, v2 = lam * lam * s2, n2 = noise * noise;
      // P = A X A^T for symmetric X = [[x11, x12], [x12, x22]].
      const auto propagate = [&](const Dual& x11, const Dual& x12, const Dual& x22, Dual& p11, Dual& p12, Dual& p22) {
        const Dual b11 = a11 * x11 + a12 * x12, b12 = a11 * x12 + a12 * x22;
        const Dual b21 = a21 * x11 + a22 * x12, b22 = a21 * x12 + a22 * x22;
        p11 = b11 * a11 + b12 * a12, p12 = b11 * a21 + b12 * a22, p22 = b21 * a21 + b22 * a22;
      };
      Dual q11, q12, q22;
      propagate(s2, Dual{}, v2, q11, q12, q22);
      q11 = s2 - q11, q12 = Dual{} - q12, q22 = v2 - q22;
      Dual m1, m2, p11 = s2, p12, p22 = v2, ll;
      for (const double yt : y) {
        const Dual n1 = a11 * m1 + a12 * m2, n2m = a21 * m1 + a22 * m2;
        Dual c11, c12, c22;
        propagate(p11, p12, p22, c11, c12, c22);
        c11 = c11 + q11, c12 = c12 + q12, c22 = c22 + q22;
        const Dual s = c11 + n2, k1 = c11 / s, k2 = c12 / s, r = Dual{yt, {}} - n1;
        m1 = n1 + k1 * r, m2 = n2m + k2 * r;
        p11 = c11 - k1 * k1 * s, p12 = c12 - k1 * k2 * s, p22 = c22 - k2 * k2 * s;
        ll = ll - 0.5 * (log(2.0 * std::numbers::pi * s) + r * r / s);
      }
      values[b] = ll.v;
      for (int j = 0; j < 3; ++j) grads[b * 3 + j] = ll.d[static_cast<std::size_t>(j)];
    }
  };
  return model;
}

}  // namespace zoo
