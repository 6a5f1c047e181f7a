// Batched Cholesky and its backward passes, against a batched DGEMM of the same n measured in the
// same run (n x n times n x n per example, over all cores).
//
//   build/tools/bench_cholesky [--n 256] [--batch 256] [--reps 5] [--json]
//
// Rates are GFLOP/s from the median of `reps` runs: DGEMM 2n^3, Cholesky n^3/3 per matrix. The
// backward passes are timed on their own (the pullback of a vjp), after the forward pass.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vtape/vtape.hpp>

namespace {

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 256, batch = 256;
  int reps = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) n = std::stoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      fmt::print(stderr, "usage: bench_cholesky [--n N] [--batch B] [--reps R] [--json]\n");
      return 2;
    }
  }
  const vt::Tensor x = vt::randn({batch, n, n}, 1);
  const vt::Tensor a = vt::matmul(x, vt::swapaxes(x, -1, -2)) / static_cast<double>(n) + vt::eye(n);
  const vt::Tensor rhs = vt::randn({batch, n, 1}, 2);
  const double b = static_cast<double>(batch), nn = static_cast<double>(n);

  const double t_gemm = median_seconds(reps, [&] { vt::matmul(a, x); });
  const double t_chol = median_seconds(reps, [&] { vt::cholesky(a); });

  // Backward of a cho_solve-based loss (the SPD-level adjoint), pullback only.
  auto [solve_out, solve_pullback] =
      vt::vjp([&](const vt::Tensor& m) { return vt::cho_solve(vt::cho_factor(m), rhs); }, a);
  const vt::Tensor solve_ct = vt::ones(solve_out.shape());
  const double t_solve_fwd = median_seconds(reps, [&] { vt::cho_solve(vt::cho_factor(a), rhs); });
  const double t_solve_bwd = median_seconds(reps, [&] { solve_pullback(solve_ct); });

  // Backward of a loss that uses L itself (the Cholesky adjoint), pullback only.
  auto [l_out, l_pullback] = vjp([](const vt::Tensor& m) { return vt::cholesky(m); }, a);
  const vt::Tensor l_ct = vt::randn(l_out.shape(), 3);
  const double t_chol_bwd = median_seconds(reps, [&] { l_pullback(l_ct); });

  const double gemm_rate = 2 * nn * nn * nn * b / t_gemm / 1e9;
  const double chol_rate = nn * nn * nn / 3 * b / t_chol / 1e9;
  if (json) {
    fmt::print(
        "{{\"n\": {}, \"batch\": {}, \"reps\": {}, \"gemm_s\": {:.6f}, \"gemm_gflops\": {:.2f}, \"cholesky_s\": {:.6f}, "
        "\"cholesky_gflops\": {:.2f}, \"cholesky_fraction_of_gemm\": {:.3f}, \"cho_solve_forward_s\": {:.6f}, "
        "\"cho_solve_backward_s\": {:.6f}, \"cho_solve_backward_over_cholesky\": {:.4f}, "
        "\"cholesky_adjoint_s\": {:.6f}, \"cholesky_adjoint_over_cholesky\": {:.3f}}}\n",
        n, batch, reps, t_gemm, gemm_rate, t_chol, chol_rate, chol_rate / gemm_rate, t_solve_fwd, t_solve_bwd,
        t_solve_bwd / t_chol, t_chol_bwd, t_chol_bwd / t_chol);
    return 0;
  }
  fmt::print("batch {} of {} x {} float64, median of {} runs\n", batch, n, n, reps);
  fmt::print("  batched DGEMM                 {:9.2f} ms  {:7.2f} GFLOP/s\n", t_gemm * 1e3, gemm_rate);
  fmt::print("  batched Cholesky              {:9.2f} ms  {:7.2f} GFLOP/s  ({:.0f}% of DGEMM's rate)\n", t_chol * 1e3,
             chol_rate, 100 * chol_rate / gemm_rate);
  fmt::print("  cho_factor + cho_solve        {:9.2f} ms\n", t_solve_fwd * 1e3);
  fmt::print("  backward of cho_solve loss    {:9.2f} ms  ({:.3f} x the factorization)\n", t_solve_bwd * 1e3,
             t_solve_bwd / t_chol);
  fmt::print("  backward through L (adjoint)  {:9.2f} ms  ({:.2f} x the factorization)\n", t_chol_bwd * 1e3,
             t_chol_bwd / t_chol);
}
