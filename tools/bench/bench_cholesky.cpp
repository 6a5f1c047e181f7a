// Batched Cholesky and its backward passes, against a batched DGEMM of the same n measured in the
// same run (n x n times n x n per example, over all cores).
//
//   build/tools/bench_cholesky [--n 256] [--batch 256] [--reps 5] [--json]
//   build/tools/bench_cholesky --kernels [--reps 5] [--json]
//   build/tools/bench_cholesky --small [--reps 20] [--json]
//
// Rates are GFLOP/s from the median of `reps` runs: DGEMM 2n^3, Cholesky n^3/3 per matrix. The
// backward passes are timed on their own (the pullback of a vjp), after the forward pass.
//
// --kernels times the CPU backend's kernels in thread CPU time, one matrix at a time (n = 64, 256,
// 521, 1024, float64 and float32), with Eigen's own threading off, against Eigen in the same run
// (alternating): the Cholesky factorization against Eigen::LLT::compute; Cholesky solves of 1, 2
// and 8 right-hand sides (trsm, then_transposed) against LLT::solveInPlace on a column-major copy;
// the inverse from the factor (cholesky_inverse) against LLT::solve of the identity; thin products
// (2 x n times n x n/2, B row-major and transposed; nrhs: the 2 rows) against Eigen's. A ratio under 1
// is faster than Eigen. Run it on one core: OMP_NUM_THREADS=1 taskset -c 0.
//
// --small times batches of 1,024 small matrices (n = 2 to 32, the orders the CPU backend runs interleaved, and 48,
// above them), each kernel called once for the batch, against Eigen's dynamic-size kernels one matrix at a time.
#include <fmt/core.h>

#include <vtape/core/eigen.hpp>
#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vtape/vtape.hpp>

#include "timing.hpp"

namespace {

using vt_bench::median_seconds;

// The calling thread's CPU time: single-threaded kernels timed on a shared machine are not
// charged for the time other processes hold the core.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Medians of f's and g's times, run alternately so that both see the same machine.
template <class F, class G>
std::pair<double, double> median_thread_seconds(int reps, F&& f, G&& g) {
  std::vector<double> tf, tg;
  f();  // warm-up
  g();
  for (int r = 0; r < reps; ++r) {
    double start = thread_seconds();
    f();
    tf.push_back(thread_seconds() - start);
    start = thread_seconds();
    g();
    tg.push_back(thread_seconds() - start);
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[tf.size() / 2], tg[tg.size() / 2]};
}

// Reps scaled so that a small matrix is timed often enough for a stable median.
int kernel_reps(int reps, std::int64_t n) {
  return std::max<int>(reps, static_cast<int>(std::min<std::int64_t>(200, 2'000'000'000 / (n * n * n))));
}

struct KernelRow {
  std::string what, dtype;
  std::int64_t n, nrhs;
  double vtape_s, eigen_s;
};

template <class T>
void time_kernels(std::int64_t n, int reps, std::vector<KernelRow>& rows) {
  using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const vt::DType dtype = std::is_same_v<T, double> ? vt::DType::f64 : vt::DType::f32;
  const std::string name(vt::name_of(dtype));
  vt::Backend& cpu = vt::backend_for(vt::Device::cpu());
  const vt::Tensor x = vt::randn({n, n}, 11);
  const ColMat a = (vt::matmul(x, x.t()) / static_cast<double>(n) + vt::eye(n)).astype(dtype).as_eigen<T>();
  const RowMat a_rows = a;
  RowMat l(n, n), work(n, n);
  Eigen::LLT<ColMat> llt(n);
  reps = kernel_reps(reps, n);

  const auto [t_chol, t_llt] = median_thread_seconds(
      reps,
      [&] { cpu.cholesky(dtype, 1, n, a_rows.data(), n * n, l.data(), n * n, false, vt::FactorFailure::poisoning()); },
      [&] { llt.compute(a); });
  rows.push_back({"cholesky", name, n, 0, t_chol, t_llt});

  for (std::int64_t k : {1, 2, 8}) {
    const RowMat b0 = RowMat::Random(n, k);
    RowMat b = b0;
    ColMat bc = b0;
    const auto [t_vtape, t_eigen] = median_thread_seconds(
        reps,
        [&] {
          b = b0;
          cpu.trsm(vt::TrsmArgs{.dtype = dtype,
                                .count = 1,
                                .n = n,
                                .nrhs = k,
                                .lower = true,
                                .transpose = false,
                                .then_transposed = true,
                                .t = l.data(),
                                .stride_t = n * n,
                                .b = b.data(),
                                .stride_b = n * k});
        },
        [&] {
          bc = b0;
          llt.solveInPlace(bc);
        });
    rows.push_back({"cho_solve", name, n, k, t_vtape, t_eigen});
  }

  ColMat inverse(n, n);
  const auto [t_inverse, t_eigen_inverse] = median_thread_seconds(
      reps, [&] { cpu.cholesky_inverse(dtype, 1, n, l.data(), n * n, work.data(), n * n); },
      [&] { inverse = llt.solve(ColMat::Identity(n, n)); });
  rows.push_back({"cholesky_inverse", name, n, 0, t_inverse, t_eigen_inverse});

  // Thin products, the shape of the seed program's gradient contractions ([x, xbar]^T F): 2 rows times an n x n/2
  // matrix, row-major (streamed by rows) and transposed (dotted by columns), against Eigen's product.
  const std::int64_t cols = std::max<std::int64_t>(n / 2, 1), thin = 2;
  const RowMat u = RowMat::Random(thin, n), f = RowMat::Random(n, cols), ft = f.transpose();
  RowMat c(thin, cols), c_eigen(thin, cols);
  for (bool transposed : {false, true}) {
    const auto [t_thin, t_eigen_thin] = median_thread_seconds(
        reps,
        [&] {
          cpu.gemm(vt::GemmArgs{.dtype = dtype,
                                .count = 1,
                                .m = thin,
                                .n = cols,
                                .k = n,
                                .trans_a = false,
                                .trans_b = transposed,
                                .alpha = 1.0,
                                .beta = 0.0,
                                .a = u.data(),
                                .stride_a = 0,
                                .b = transposed ? ft.data() : f.data(),
                                .stride_b = 0,
                                .c = c.data(),
                                .stride_c = 0});
        },
        [&] {
          if (transposed) c_eigen.noalias() = u * ft.transpose();
          else c_eigen.noalias() = u * f;
        });
    const double scale = c_eigen.cwiseAbs().maxCoeff(), off = (c - c_eigen).cwiseAbs().maxCoeff();
    if (!(off <= 1e-4 * scale))
      throw std::runtime_error(fmt::format("bench_cholesky: the thin product is off Eigen's by {} (n = {})", off, n));
    rows.push_back({transposed ? "thin gemm B^T" : "thin gemm", name, n, thin, t_thin, t_eigen_thin});
  }
}

// A batch of small matrices in one call against Eigen one matrix at a time: the factor, a solve of one right-hand
// side by the factor (cho_solve), the inverse from the factor.
template <class T>
void time_small(std::int64_t n, int reps, std::vector<KernelRow>& rows) {
  using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  constexpr std::int64_t count = 1024;
  const vt::DType dtype = std::is_same_v<T, double> ? vt::DType::f64 : vt::DType::f32;
  const std::string name(vt::name_of(dtype));
  vt::Backend& cpu = vt::backend_for(vt::Device::cpu());
  const vt::Tensor x = vt::randn({count, n, n}, 13);
  const vt::Tensor a = (vt::matmul(x, vt::swapaxes(x, -1, -2)) / static_cast<double>(n) + vt::eye(n)).astype(dtype);
  const std::vector<T> a_rows = a.to_vector<T>();  // symmetric: row- and column-major alike
  std::vector<T> l(a_rows.size()), work(a_rows.size()), b0(static_cast<std::size_t>(count * n), T(1)), b = b0;
  std::vector<Eigen::LLT<ColMat>> llts;  // each made in place: a copy reads the fields LLT(n) leaves unset
  llts.reserve(count);
  for (std::int64_t i = 0; i < count; ++i) llts.emplace_back(n);
  ColMat inverse(n, n);
  Vector v(n);
  const auto matrix = [&](std::int64_t i) { return Eigen::Map<const ColMat>(a_rows.data() + i * n * n, n, n); };
  reps = std::max(reps, 20);
  const auto [t_chol, t_llt] = median_thread_seconds(
      reps,
      [&] {
        cpu.cholesky(dtype, count, n, a_rows.data(), n * n, l.data(), n * n, false, vt::FactorFailure::poisoning());
      },
      [&] {
        for (std::int64_t i = 0; i < count; ++i) llts[static_cast<std::size_t>(i)].compute(matrix(i));
      });
  rows.push_back({"batched cholesky", name, n, 0, t_chol, t_llt});
  const auto [t_solve, t_eigen_solve] = median_thread_seconds(
      reps,
      [&] {
        b = b0;
        cpu.trsm(vt::TrsmArgs{.dtype = dtype,
                              .count = count,
                              .n = n,
                              .nrhs = 1,
                              .lower = true,
                              .transpose = false,
                              .then_transposed = true,
                              .t = l.data(),
                              .stride_t = n * n,
                              .b = b.data(),
                              .stride_b = n});
      },
      [&] {
        for (std::int64_t i = 0; i < count; ++i) {
          v.setOnes();
          llts[static_cast<std::size_t>(i)].solveInPlace(v);
        }
      });
  rows.push_back({"batched cho_solve", name, n, 1, t_solve, t_eigen_solve});
  const auto [t_inverse, t_eigen_inverse] = median_thread_seconds(
      reps, [&] { cpu.cholesky_inverse(dtype, count, n, l.data(), n * n, work.data(), n * n); },
      [&] {
        for (std::int64_t i = 0; i < count; ++i)
          inverse = llts[static_cast<std::size_t>(i)].solve(ColMat::Identity(n, n));
      });
  rows.push_back({"batched inverse", name, n, 0, t_inverse, t_eigen_inverse});
}

int run_kernels(int reps, bool json, bool small) {
  const int eigen_threads = Eigen::nbThreads();
  Eigen::setNbThreads(1);
  std::vector<KernelRow> rows;
  if (small) {
    for (std::int64_t n : {2, 4, 8, 16, 24, 32, 48}) {
      time_small<double>(n, reps, rows);
      time_small<float>(n, reps, rows);
    }
  } else {
    for (std::int64_t n : {64, 256, 521, 1024}) {
      time_kernels<double>(n, reps, rows);
      time_kernels<float>(n, reps, rows);
    }
  }
  Eigen::setNbThreads(eigen_threads);
  if (json) {
    fmt::print("[");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const KernelRow& r = rows[i];
      fmt::print(
          "{}{{\"kernel\": \"{}\", \"dtype\": \"{}\", \"n\": {}, \"nrhs\": {}, \"vtape_s\": {:.7f}, "
          "\"eigen_s\": {:.7f}, \"ratio\": {:.3f}}}",
          i ? ",\n " : "", r.what, r.dtype, r.n, r.nrhs, r.vtape_s, r.eigen_s, r.vtape_s / r.eigen_s);
    }
    fmt::print("]\n");
    return 0;
  }
  fmt::print("{}, thread CPU time, median of at least {} runs; ratio = vtape / Eigen (under 1: vtape is faster)\n",
             small ? "batches of 1,024 matrices" : "one matrix at a time", reps);
  fmt::print("  {:<17} {:<8} {:>5} {:>5} {:>11} {:>11} {:>7}\n", "kernel", "dtype", "n", "nrhs", "vtape ms", "Eigen ms",
             "ratio");
  for (const KernelRow& r : rows)
    fmt::print("  {:<17} {:<8} {:>5} {:>5} {:>11.4f} {:>11.4f} {:>7.3f}\n", r.what, r.dtype, r.n,
               r.nrhs ? std::to_string(r.nrhs) : "", r.vtape_s * 1e3, r.eigen_s * 1e3, r.vtape_s / r.eigen_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 256, batch = 256;
  int reps = 5;
  bool json = false, kernels = false, small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) n = std::stoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--json") json = true;
    else if (a == "--kernels") kernels = true;
    else if (a == "--small") small = kernels = true;
    else {
      fmt::print(stderr, "usage: bench_cholesky [--n N] [--batch B] [--reps R] [--json] [--kernels | --small]\n");
      return 2;
    }
  }
  if (kernels) return run_kernels(reps, json, small);
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
        "{{\"n\": {}, \"batch\": {}, \"reps\": {}, \"gemm_s\": {:.6f}, \"gemm_gflops\": {:.2f}, \"cholesky_s\": "
        "{:.6f}, "
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
