// The GPU tests' entry point: without a usable CUDA device the whole program reports "skipped"
// (exit code 77, which ctest is told means skipped), never "passed".
#include <cstdio>
#include <string_view>
#include <vtape/core/backend.hpp>

#include "../catch_session.hpp"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::string_view(argv[i]).starts_with("--list");
  if (!listing) {
    if (!vt::built_with_cuda()) {
      std::puts("skipped: vtape was built without the CUDA backend (VTAPE_CUDA=OFF or no CUDA toolkit)");
      return 77;
    }
    if (vt::cuda_device_count() == 0) {
      std::puts("skipped: no CUDA device is usable on this machine");
      return 77;
    }
  }
  return run_catch_session(argc, argv);
}
