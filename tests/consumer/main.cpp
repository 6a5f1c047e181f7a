#include <fmt/core.h>

#include <vtape/vtape.hpp>

int main() {
  const vt::Tensor x = vt::Tensor::from_vector({1.0, 2.0, 3.0}, {3});
  const vt::Tensor g = vt::grad([](const vt::Tensor& v) { return vt::sum(v * v); })(x);
  const bool ok = g.to_vector<double>() == std::vector<double>{2.0, 4.0, 6.0};
  fmt::print("{}\n", ok ? "consumer ok" : "consumer WRONG");
  return ok ? 0 : 1;
}
