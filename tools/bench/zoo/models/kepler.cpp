// Kepler radial velocities: a planet's signal at 200 times, Kepler's equation E - e sin E = M solved by a
// 20-step Newton fori_loop that reverse mode differentiates through, theta = [log P, log K, logit e, omega, M0,
// gamma], log p = -sum_i (y_i - v_i)^2 / 2 (unit noise), v = K (cos(nu + omega) + e cos omega) + gamma with
// cos nu = (cos E - e) / (1 - e cos E), sin nu = sqrt(1 - e^2) sin E / (1 - e cos E).
#include <cmath>
#include <numbers>

#include "../zoo.hpp"

namespace zoo {

namespace {

constexpr std::int64_t observations = 200, newton_steps = 20;

double eccentric_anomaly(double m, double e) {
  double big_e = m;
  for (std::int64_t s = 0; s < newton_steps; ++s)
    big_e -= (big_e - e * std::sin(big_e) - m) / (1.0 - e * std::cos(big_e));
  return big_e;
}

}  // namespace

Model kepler() {
  std::vector<double> t(static_cast<std::size_t>(observations)), y(t.size());
  const double two_pi = 2.0 * std::numbers::pi;
  for (std::int64_t i = 0; i < observations; ++i) {  // the signal of P 17.3, K 5, e 0.3, omega 1, M0 0.4, gamma 0.5
    const auto di = static_cast<double>(i);
    const auto ii = static_cast<std::size_t>(i);
    t[ii] = 0.5 * di + 0.3 * std::sin(di);
    const double e = 0.3, big_e = eccentric_anomaly(two_pi * t[ii] / 17.3 + 0.4, e), d = 1.0 - e * std::cos(big_e);
    const double cos_nu = (std::cos(big_e) - e) / d, sin_nu = std::sqrt(1.0 - e * e) * std::sin(big_e) / d;
    y[ii] =
        5.0 * (cos_nu * std::cos(1.0) - sin_nu * std::sin(1.0) + e * std::cos(1.0)) + 0.5 + 0.5 * std::sin(3.7 * di);
  }
  Model model;
  model.name = "kepler";
  model.about = "Kepler radial velocities at 200 times, a 20-step Newton fori_loop for E - e sin E = M, 6 parameters";
  model.base = {std::log(17.3), std::log(5.0), std::log(0.3 / 0.7), 1.0, 0.4, 0.5};
  const vt::Tensor T = vt::Tensor::from_vector(t, {observations}), Y = vt::Tensor::from_vector(y, {observations});
  model.log_density = [T, Y, two_pi](const vt::Tensor& theta) {
    const auto at = [&](std::int64_t i) { return vt::reshape(vt::slice(theta, 0, i, i + 1), {}); };
    const vt::Tensor period = vt::exp(at(0)), amp = vt::exp(at(1)), e = vt::sigmoid(at(2));
    const vt::Tensor omega = at(3), gamma = at(5);
    const vt::Tensor m = two_pi * T / period + at(4);
    const vt::Tensor big_e = vt::fori_loop(
        0, newton_steps,
        [&](const vt::Tensor&, const vt::Tensor& ea) {
          return ea - (ea - e * vt::sin(ea) - m) / (1.0 - e * vt::cos(ea));
        },
        m);
    const vt::Tensor d = 1.0 - e * vt::cos(big_e);
    const vt::Tensor cos_nu = (vt::cos(big_e) - e) / d, sin_nu = vt::sqrt(1.0 - vt::square(e)) * vt::sin(big_e) / d;
    const vt::Tensor v = amp * (cos_nu * vt::cos(omega) - sin_nu * vt::sin(omega) + e * vt::cos(omega)) + gamma;
    return -0.5 * vt::sum(vt::square(Y - v));
  };

  // The limit: Newton in doubles, then the derivative of E by the implicit function theorem
  // (dE/dM = 1 / D, dE/de = sin E / D, D = 1 - e cos E) and the chain rule by hand, one pass over the times.
  model.limit = [t, y, two_pi](const double* thetas, std::int64_t batch, double* values, double* grads) {
    constexpr std::int64_t p = 6;
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b) {
      const double* th = thetas + b * p;
      const double period = std::exp(th[0]), amp = std::exp(th[1]), e = 1.0 / (1.0 + std::exp(-th[2]));
      const double cos_w = std::cos(th[3]), sin_w = std::sin(th[3]), q = std::sqrt(1.0 - e * e);
      double value = 0, g_period = 0, g_amp = 0, g_e = 0, g_w = 0, g_m0 = 0, g_gamma = 0;
      for (std::size_t i = 0; i < t.size(); ++i) {
        const double big_e = eccentric_anomaly(two_pi * t[i] / period + th[4], e);
        const double sin_e = std::sin(big_e), cos_e = std::cos(big_e), d = 1.0 - e * cos_e;
        const double c = (cos_e - e) / d, s = q * sin_e / d, shape = c * cos_w - s * sin_w + e * cos_w;
        const double r = y[i] - (amp * shape + th[5]);  // d log p / d v
        value -= 0.5 * r * r;
        const double dc_de = -sin_e * sin_e / (d * d), ds_de = -e / q * sin_e / d + q * sin_e * cos_e / (d * d);
        const double dv_dbig_e = amp * (cos_w * (-sin_e * (1.0 - e * e) / (d * d)) - sin_w * q * (cos_e - e) / (d * d));
        const double dv_dm = dv_dbig_e / d;
        g_amp += r * amp * shape;
        g_w += r * amp * (-c * sin_w - s * cos_w - e * sin_w);
        g_gamma += r;
        g_m0 += r * dv_dm;
        g_period += r * dv_dm * (-two_pi * t[i] / period);
        g_e += r * (amp * (cos_w * dc_de - sin_w * ds_de + cos_w) + dv_dbig_e * sin_e / d);
      }
      values[b] = value;
      double* g = grads + b * p;
      g[0] = g_period, g[1] = g_amp, g[2] = g_e * e * (1.0 - e), g[3] = g_w, g[4] = g_m0, g[5] = g_gamma;
    }
  };
  return model;
}

}  // namespace zoo
