// The Gaussian-process example's model: kernel, likelihood, gradients, data reading.
#include <cstdio>
#include <fstream>

#include "../examples/gp_fourier_model.hpp"
#include "../examples/gp_model.hpp"
#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

gp::Series co2() { return gp::read_csv(std::string(VTAPE_EXAMPLE_DATA) + "/co2_monthly.csv"); }

// The series' values less their mean, as the example fits them.
Tensor centred(const gp::Series& s) {
  double mean = 0;
  for (double v : s.y) mean += v / static_cast<double>(s.y.size());
  std::vector<double> c;
  for (double v : s.y) c.push_back(v - mean);
  return Tensor::from_vector(c, {static_cast<std::int64_t>(c.size())});
}
}  // namespace

TEST_CASE("the CO2 log marginal likelihood and its gradient match scikit-learn", "[gp]") {
  const gp::Series s = co2();
  REQUIRE(s.t.size() == 521);
  const gp::Inputs x(s.t);
  const Tensor y = centred(s);
  const Tensor theta = load_npy(std::string(VTAPE_TEST_DATA) + "/co2/theta.npy");
  const auto [lml, g] = value_and_grad([&](const Tensor& t) { return gp::log_marginal_likelihood(t, x, y); })(theta);
  CHECK(lml.item() == Approx(load_npy(std::string(VTAPE_TEST_DATA) + "/co2/lml.npy").item()).epsilon(1e-10));
  require_close(g, load_npy(std::string(VTAPE_TEST_DATA) + "/co2/grad.npy"), 1e-6);
}

TEST_CASE("the CO2 likelihood's jitted gradient makes two passes over n x n memory and matches scikit-learn",
          "[gp][jit]") {
  const gp::Series s = co2();
  const gp::Inputs x(s.t);
  const Tensor y = centred(s);
  const Tensor theta = load_npy(std::string(VTAPE_TEST_DATA) + "/co2/theta.npy");
  const auto step = jit(value_and_grad([&](const Tensor& t) { return gp::log_marginal_likelihood(t, x, y); }));
  // One run builds K from the distances (over its lower triangle), one forms K_bar and its 11 contractions: the
  // scalar steps between the contractions run before or after its tiles, K_bar never reaches memory.
  const PlanSummary summary = step.compile(theta);
  CHECK(summary.fused_runs == 2);
  CHECK(summary.fused_lower >= 40);
  const auto [lml, g] = step(theta);
  CHECK(lml.item() == Approx(load_npy(std::string(VTAPE_TEST_DATA) + "/co2/lml.npy").item()).epsilon(1e-10));
  require_close(g, load_npy(std::string(VTAPE_TEST_DATA) + "/co2/grad.npy"), 1e-6);
}

TEST_CASE("kernel and likelihood gradients match finite differences", "[gp][grad]") {
  const gp::Series s = co2();
  // Every 12th month: 40 points. The covariance has a condition number near 1e7 (a 50-year length
  // scale with a noise of 0.01), so central differences of the likelihood carry relative errors near
  // 1e-4: its check uses rtol 1e-3. (The full-data gradient matches scikit-learn's to 1e-6 above.)
  std::vector<double> t, yv;
  for (std::size_t i = 0; t.size() < 40; i += 12) {
    t.push_back(s.t[i]);
    yv.push_back(s.y[i] - 320.0);
  }
  const gp::Inputs x(t);
  const Tensor y = Tensor::from_vector(yv, {40});
  const Tensor theta = Tensor::from_vector(gp::sklearn_initial, {gp::n_theta});
  // The weighted sum of the covariance is ~1e5 in size, so its central differences carry absolute
  // errors near 1e-4: atol 1e-3.
  check_gradients([&](auto& a) { return gp::covariance(a[0], x); }, {theta}, 1e-6, 1e-3);
  check_gradients([&](auto& a) { return gp::log_marginal_likelihood(a[0], x, y); }, {theta}, 1e-3, 1e-6);
}

TEST_CASE("the log marginal likelihood of a two-point problem against its closed form", "[gp]") {
  // K = [[a, b], [b, a]] with a = sum of the variances + noise, b = the kernel at distance d.
  const std::vector<double> t = {0.0, 0.3}, yv = {0.7, -0.2};
  const std::vector<double> th = {0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, -0.8, 0.9, -1.0, -1.1};
  auto e = [&](int i) { return std::exp(th[static_cast<std::size_t>(i)]); };
  const double d = 0.3, d2 = d * d, s2 = std::pow(std::sin(M_PI * d), 2);
  const double b = e(0) * std::exp(-d2 / (2 * e(1) * e(1))) +
                   e(2) * std::exp(-d2 / (2 * e(3) * e(3)) - 2 * s2 / (e(4) * e(4))) +
                   e(5) * std::pow(1 + d2 / (2 * e(6) * e(7) * e(7)), -e(6)) + e(8) * std::exp(-d2 / (2 * e(9) * e(9)));
  const double a = e(0) + e(2) + e(5) + e(8) + e(10) + 1e-10;
  const double det = a * a - b * b;
  const double quad = (a * yv[0] * yv[0] - 2 * b * yv[0] * yv[1] + a * yv[1] * yv[1]) / det;
  const double expected = -0.5 * quad - 0.5 * std::log(det) - std::log(2 * M_PI);
  const Tensor lml =
      gp::log_marginal_likelihood(Tensor::from_vector(th, {11}), gp::Inputs(t), Tensor::from_vector(yv, {2}));
  CHECK(lml.item() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("malformed CSV input is an error naming the line", "[gp][errors]") {
  const std::string path = "vtape_test_bad.csv";
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("t,co2\n1958.25,316.1\n1958.33,abc\n");
  CHECK_THAT(error_of([&] { gp::read_csv(path); }), Catch::Contains(path + ":3") && Catch::Contains("abc"));
  write("t,co2\n1958.25,316.1,7\n");
  CHECK_THAT(error_of([&] { gp::read_csv(path); }), Catch::Contains(":2"));
  write("t,co2\n1958.25\n");
  CHECK_THAT(error_of([&] { gp::read_csv(path); }), Catch::Contains(":2"));
  write("t,co2\n");
  CHECK_THAT(error_of([&] { gp::read_csv(path); }), Catch::Contains("no data"));
  CHECK_THAT(error_of([&] { gp::read_csv("/nonexistent.csv"); }), Catch::Contains("cannot open"));
  std::remove(path.c_str());
}

TEST_CASE("the Fourier-basis likelihood equals its Woodbury form, values and gradients", "[gp][cho_solve][logdet]") {
  const gpf::Problem p = gpf::synthetic(64, 8, 7);
  const Tensor params = Tensor::from_vector({-14.2, 4.1}, {2});
  const double direct = gpf::log_likelihood(params, p).item();
  const double woodbury = gpf::log_likelihood_woodbury(params, p).item();
  CHECK(direct == Approx(woodbury).epsilon(1e-10));
  const Tensor g1 = grad([&](const Tensor& q) { return gpf::log_likelihood(q, p); })(params);
  const Tensor g2 = grad([&](const Tensor& q) { return gpf::log_likelihood_woodbury(q, p); })(params);
  require_close(g1, g2, 1e-8);
  check_gradients([&](auto& a) { return gpf::log_likelihood(a[0], p); }, {params}, 1e-5, 1e-7);
  // A batch of samples in one vmapped call agrees with single evaluations.
  const Tensor samples = Tensor::from_vector({-14.5, 3.0, -13.8, 4.5, -14.0, 5.0}, {3, 2});
  const Tensor batch = vmap([&](const Tensor& q) { return gpf::log_likelihood(q, p); })(samples);
  for (std::int64_t i = 0; i < 3; ++i)
    CHECK(batch.to_vector<double>()[static_cast<std::size_t>(i)] ==
          Approx(gpf::log_likelihood(reshape(slice(samples, 0, i, i + 1), {2}), p).item()).epsilon(1e-12));
}
