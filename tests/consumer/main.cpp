#include <fmt/core.h>

#include <cstring>
#include <vtape/vtape.hpp>

int main() {
  const vt::Tensor x = vt::Tensor::from_vector({1.0, 2.0, 3.0}, {3});
  const vt::Tensor g = vt::grad([](const vt::Tensor& v) { return vt::sum(v * v); })(x);
  const bool ok = g.to_vector<double>() == std::vector<double>{2.0, 4.0, 6.0};
  // The library's version is the headers' (both come from one install or one source tree).
  const std::string headers = fmt::format("{}.{}.{}", VTAPE_VERSION_MAJOR, VTAPE_VERSION_MINOR, VTAPE_VERSION_PATCH);
  const bool same_version = headers == vt::version();
  fmt::print("{} (vtape {}, headers {})\n", ok && same_version ? "consumer ok" : "consumer WRONG", vt::version(),
             headers);
  return ok && same_version ? 0 : 1;
}
