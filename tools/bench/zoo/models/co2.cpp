// examples/gp_co2's evaluation: the log marginal likelihood of scikit-learn's Mauna Loa CO2 kernel
// (11 log-hyperparameters, n = 521 monthly means) as gp_model.hpp writes it; the limit is
// bench_limit's (tools/bench/co2_limit.hpp), one per thread.
#include <omp.h>

#include <memory>

#include "../../co2_limit.hpp"
#include "../zoo.hpp"

namespace zoo {

Model co2() {
  const gp::Series series = gp::read_csv(VTAPE_CO2_DATA);
  const auto n = static_cast<std::int64_t>(series.t.size());
  double mean = 0;
  for (double v : series.y) mean += v / static_cast<double>(n);
  std::vector<double> centred;
  for (double v : series.y) centred.push_back(v - mean);
  Model model;
  model.name = "co2";
  model.about = "gp_co2's log marginal likelihood: scikit-learn's CO2 kernel, 11 hyperparameters, n = 521";
  model.base = gp::sklearn_initial;
  const auto inputs = std::make_shared<const gp::Inputs>(series.t);
  const vt::Tensor y = vt::Tensor::from_vector(centred, {n});
  model.log_density = [inputs, y](const vt::Tensor& theta) { return gp::log_marginal_likelihood(theta, *inputs, y); };
  const auto limits = std::make_shared<std::vector<limit::Co2Limit>>();
  for (int t = 0; t < omp_get_max_threads(); ++t) limits->emplace_back(series.t, centred);
  model.limit = [limits](const double* thetas, std::int64_t batch, double* values, double* grads) {
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b)
      values[b] = (*limits)[static_cast<std::size_t>(omp_get_thread_num())].value_and_grad(thetas + b * gp::n_theta,
                                                                                           grads + b * gp::n_theta);
  };
  return model;
}

}  // namespace zoo
