#pragma once
// The model zoo: models nobody tuned vtape's planner for, each written as a user writes it from the
// README (a per-example log density of a parameter vector, jit(vmap(value_and_grad)) over a batch of
// them), with a hand-fused Eigen limit of the same mathematics and a JAX twin (tools/bench/zoo/jax/).
// tools/bench/zoo/zoo.cpp times them side by side; tools/bench/zoo/run_zoo.py writes docs/zoo.md.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace zoo {

struct Model {
  std::string name;   // as on the command line and in docs/zoo.md
  std::string about;  // one line for docs/zoo.md: the model, its sizes, the form it is written in
  // Examples are parameter vectors near `base` (examples_of): the same in the JAX twin.
  std::vector<double> base;
  // theta [P] -> a scalar log density (or loss), written with vtape's ops as the README shows.
  std::function<vt::Tensor(const vt::Tensor&)> log_density;
  // The hand-fused limit: for thetas [B, P] (row-major) writes values [B] and gradients [B, P]
  // (row-major), plain Eigen, examples split over OpenMP threads (static schedule), each example
  // fused by hand: what a careful C++ programmer would write for this one model.
  std::function<void(const double* thetas, std::int64_t batch, double* values, double* grads)> limit;
};

// Example i's parameters: base[k] + 0.01 ((7 i + k) mod 5), k = 0 .. P-1 (the JAX twins use the same).
inline std::vector<double> examples_of(const Model& m, std::int64_t batch) {
  const std::size_t p = m.base.size();
  std::vector<double> out(static_cast<std::size_t>(batch) * p);
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::size_t k = 0; k < p; ++k)
      out[static_cast<std::size_t>(i) * p + k] =
          m.base[k] + 0.01 * static_cast<double>((7 * i + static_cast<std::int64_t>(k)) % 5);
  return out;
}

// The models (tools/bench/zoo/models/*.cpp). `data` is the folder of the project's shared data
// (../shared/data); a model that needs a file there that is missing throws std::runtime_error.
Model seed();
Model co2();
Model grouped();
Model pta_segment(const std::string& data);
Model pta_shared(const std::string& data);
Model woodbury();
Model hierarchical();
Model logistic();
Model kalman();
Model mixture();
Model eight_schools();
Model kepler();

}  // namespace zoo
