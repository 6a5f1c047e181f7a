// compare_seed RUN.json VALUE.npy GRAD.npy REF_GRAD.npy: checks seed_cholesky_grad's output against
// the numpy reference (value to 1e-12 relative, gradient to 1e-12 of its largest entry).
#include <fmt/core.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <vtape/vtape.hpp>

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  std::ifstream in(argv[1]);
  std::stringstream json;
  json << in.rdbuf();
  std::smatch m;
  const std::string text = json.str();
  if (!std::regex_search(text, m, std::regex(R"("value": ([-0-9.eE+]+))"))) {
    fmt::print("no value in the example's JSON\n");
    return 1;
  }
  const double value = std::stod(m[1]);
  const double expected = vt::load_npy(argv[2]).item();
  const vt::Tensor g = vt::load_npy(argv[3]), ref = vt::load_npy(argv[4]);
  const double scale = vt::max(vt::abs(ref)).item();
  const double err = g.shape() == ref.shape() ? vt::max(vt::abs(g - ref)).item() : 1e300;
  const bool ok = std::abs(value - expected) <= 1e-12 * std::abs(expected) && err <= 1e-12 * scale;
  fmt::print("value {:.15f} (reference {:.15f}), gradient error {:.3g} of {:.3g}: {}\n", value, expected, err, scale,
             ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
