// Elementwise ops whose innermost axis is tiny, against the same ops in the transposed layout: x[:, None] - mu as
// [n, k] and mu[:, None] - x as [k, n], medians of --reps calls (backends/cpu/strided.hpp runs the longest axis
// innermost where the innermost is short; docs/performance.md, "Tiny innermost axes"). Then the same two layouts in a
// jitted run of elementwise steps (fused, tile by tile) under vmap with its gradient, at --batch examples.
//
//   OMP_NUM_THREADS=1 build/tools/bench_layout [--n 5000] [--k 3] [--batch 8] [--reps 41]
#include <fmt/core.h>

#include <functional>
#include <string>
#include <vtape/vtape.hpp>

#include "timing.hpp"

int main(int argc, char** argv) {
  std::int64_t n = 5000, k = 3, batch = 8;
  int reps = 41;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--n") n = std::stoll(argv[i + 1]);
    if (flag == "--k") k = std::stoll(argv[i + 1]);
    if (flag == "--reps") reps = std::stoi(argv[i + 1]);
    if (flag == "--batch") batch = std::stoll(argv[i + 1]);
  }
  const vt::Tensor x_col = vt::randn({n, 1}, 1), mu = vt::randn({k}, 2);
  const vt::Tensor x_row = vt::randn({1, n}, 3), mu_col = vt::randn({k, 1}, 4);
  const vt::Tensor block = vt::randn({n, 2 * k}, 5);
  const double narrow = vt_bench::median_seconds(reps, [&] { (void)(x_col - mu); });
  const double wide = vt_bench::median_seconds(reps, [&] { (void)(mu_col - x_row); });
  const double columns = vt_bench::median_seconds(reps, [&] { (void)vt::slice(block, 1, 0, k); });
  fmt::print(
      "[{n}, {k}] broadcast sub {:.1f} us, [{k}, {n}] {:.1f} us (ratio {:.2f}); [{n}, {k}] slice of [{n}, {k2}] "
      "{:.1f} us\n",
      narrow * 1e6, wide * 1e6, narrow / wide, columns * 1e6, fmt::arg("n", n), fmt::arg("k", k),
      fmt::arg("k2", 2 * k));
  // sum(0.3 exp(-d^2 / 2) + 0.1 d^2) over d = x - mu in either layout: one fused run of elementwise steps and a sum.
  const auto density = [](const vt::Tensor& d) {
    return vt::sum(vt::exp(-0.5 * vt::square(d)) * 0.3 + vt::square(d) * 0.1);
  };
  const std::function<vt::Tensor(const vt::Tensor&)> by_rows = [&](const vt::Tensor& m) {
    return density(x_col - vt::reshape(m, {1, k}));
  };
  const std::function<vt::Tensor(const vt::Tensor&)> by_columns = [&](const vt::Tensor& m) {
    return density(x_row - vt::reshape(m, {k, 1}));
  };
  auto narrow_jit = vt::jit(vt::vmap(vt::value_and_grad(by_rows)));
  auto wide_jit = vt::jit(vt::vmap(vt::value_and_grad(by_columns)));
  const vt::Tensor mus = vt::as_batch(vt::randn({batch, k}, 6));
  const double narrow_fused = vt_bench::median_seconds(reps, [&] { (void)narrow_jit(mus); });
  const double wide_fused = vt_bench::median_seconds(reps, [&] { (void)wide_jit(mus); });
  fmt::print(
      "jit(vmap(value_and_grad)) of a fused run, B = {}: [{n}, {k}] {:.1f} us, [{k}, {n}] {:.1f} us (ratio {:.2f})\n",
      batch, narrow_fused * 1e6, wide_fused * 1e6, narrow_fused / wide_fused, fmt::arg("n", n), fmt::arg("k", k));
}
