// pow's CPU kernel against the C library's pow over the same elements, per element, in one run: a
// scalar exponent (the fast paths: exp(b log a), integer powers, square roots), an exponent that
// varies along the rows (a path per element), and exp for scale. Then exp and log (backends/cpu/vector_math.hpp)
// against the C library's in a plain loop, over one contiguous float64 row.
//
//   OMP_NUM_THREADS=1 taskset -c 0 build-dev/tools/bench_pow [--n 521] [--row 1000000] [--reps 21]
//
// Median of `reps` runs after a warm-up; eager calls, so each includes allocating its result.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

#include "timing.hpp"

using vt_bench::median_seconds;

int main(int argc, char** argv) {
  std::int64_t n = 521, row = 1000000;
  int reps = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--n") == 0) n = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--row") == 0) row = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::stoi(argv[i + 1]);
  }
  const vt::Tensor x = vt::rand({n, n}, 1) * 3.0 + 1.0;  // a GP's 1 + d^2 / (2 alpha l^2)
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out(xv.size());
  const double elements = static_cast<double>(xv.size());
  auto ns = [&](double seconds) { return seconds * 1e9 / elements; };
  volatile double sink = 0;
  fmt::print("pow over {} x {} float64 elements, ns per element (median of {})\n", n, n, reps);
  for (double b : {-2.89, 2.0, -1.0, 0.5, -0.5}) {
    const double libc = median_seconds(reps, [&] {
      for (std::size_t i = 0; i < xv.size(); ++i) out[i] = std::pow(xv[i], b);
      sink = sink + out[0];
    });
    const vt::Tensor e = vt::Tensor::scalar(b);
    const double ours = median_seconds(reps, [&] { sink = sink + vt::pow(x, e).at<double>({0, 0}); });
    fmt::print(
        "  exponent {:6}: std::pow loop {:6.2f}   vt::pow {:6.2f}   "
        "({:.1f}x)\n",
        b, ns(libc), ns(ours), libc / ours);
  }
  const vt::Tensor rows = vt::rand({n, 1}, 2) * 4.0 - 2.0;
  const double varying = median_seconds(reps, [&] {
    sink = sink + vt::pow(x, vt::swapaxes(rows, 0, 1)).at<double>({0, 0});
  });
  fmt::print("  exponent varying along rows (a path per element): vt::pow {:6.2f}\n", ns(varying));
  const double exp_time = median_seconds(reps, [&] { sink = sink + vt::exp(x).at<double>({0, 0}); });
  fmt::print("  vt::exp, for scale: {:6.2f}\n", ns(exp_time));

  // exp of a GP's -d^2 / 2l^2 (most far pairs underflow, which takes glibc's slow path, and 4% fall in the subnormal
  // results), exp where nothing underflows, and log of positive values over twelve decades. vt's times include
  // allocating the result; both loops write a row of the same length.
  fmt::print("exp and log over a contiguous float64 row of {} elements, ns per element (median of {})\n", row, reps);
  struct Case {
    const char* name;
    bool is_log;
    vt::Tensor in;
  };
  const Case cases[] = {{"exp of [-780, 20]", false, vt::rand({row}, 3) * -800.0 + 20.0},
                        {"exp of [-20, 5]  ", false, vt::rand({row}, 5) * -25.0 + 5.0},
                        {"log of [1e-6, 1e6]", true, vt::exp(vt::rand({row}, 4) * 28.0 - 14.0)}};
  auto per_row = [&](double seconds) { return seconds * 1e9 / static_cast<double>(row); };
  for (const Case& c : cases) {
    const std::vector<double> iv = c.in.to_vector<double>();
    std::vector<double> ov(iv.size());
    const double libc = median_seconds(reps, [&] {
      if (c.is_log) {
        for (std::size_t i = 0; i < iv.size(); ++i) ov[i] = std::log(iv[i]);
      } else {
        for (std::size_t i = 0; i < iv.size(); ++i) ov[i] = std::exp(iv[i]);
      }
      sink = sink + ov[0];
    });
    const double ours =
        median_seconds(reps, [&] { sink = sink + (c.is_log ? vt::log(c.in) : vt::exp(c.in)).at<double>({0}); });
    fmt::print("  {}: C library loop {:6.2f}   vtape {:6.2f}   ({:.1f}x)\n", c.name, per_row(libc), per_row(ours),
               libc / ours);
  }
  return 0;
}
