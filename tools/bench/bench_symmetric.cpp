// The CPU GEMM of a symmetric product (GemmArgs::symmetric, issue 14): C_i = (X D_i) X^T for a
// shared X [m, k] and diagonal D_i, as jit runs F diag(p_i^2) F^T for a batch of p_i. Compares, on
// the backend's gemm, per batch of `count` products:
//   folded:         one GEMM of count*m rows, (X D_1; ...; X D_count) X^T (matmul's fold, unmarked)
//   batched:        count full GEMMs m x m x k
//   symmetric:      count GEMMs flagged symmetric (the lower triangle by blocks, mirrored), X read
//                   transposed
//   symmetric, X^T: the same with X^T stored (a captured F.t(), as the seed program has it)
//
//   build/tools/bench_symmetric [--reps 11] [--count 16]
//
// Prints the median of `reps` runs (after a warm-up) and the ratios to `folded`, measured in the
// same run, in process CPU time rather than wall time, so that the figures stay comparable on a
// shared machine. Run it on one thread: OMP_NUM_THREADS=1 taskset -c 0 build/tools/bench_symmetric
#include <fmt/core.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>
#include <vtape/vtape.hpp>

namespace {

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  f();
  for (int r = 0; r < reps; ++r) {
    const double start = cpu_ms();
    f();
    t.push_back(cpu_ms() - start);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run(vt::DType dtype, std::int64_t m, std::int64_t k, std::int64_t count, int reps) {
  vt::Backend& cpu = vt::backend_for(vt::Device::cpu());
  const vt::Tensor x = vt::randn({m, k}, 1, dtype), xt = x.t();
  const vt::Tensor a = vt::randn({count, 1, k}, 2, dtype) * x;  // the X D_i, back to back
  const vt::Tensor c = vt::zeros({count, m, m}, dtype);
  const vt::GemmArgs batched{.dtype = dtype,
                             .count = count,
                             .m = m,
                             .n = m,
                             .k = k,
                             .trans_a = false,
                             .trans_b = true,
                             .alpha = 1.0,
                             .beta = 0.0,
                             .a = a.raw_data(),
                             .stride_a = m * k,
                             .b = x.raw_data(),
                             .stride_b = 0,
                             .c = const_cast<void*>(c.raw_data()),
                             .stride_c = m * m};
  vt::GemmArgs folded = batched, symmetric = batched;
  folded.count = 1;
  folded.m = count * m;
  folded.stride_a = folded.stride_c = 0;
  symmetric.symmetric = true;
  vt::GemmArgs stored = symmetric;
  stored.b = xt.raw_data();
  stored.trans_b = false;
  const double t_folded = median_ms(reps, [&] { cpu.gemm(folded); });
  const double t_batched = median_ms(reps, [&] { cpu.gemm(batched); });
  const double t_symmetric = median_ms(reps, [&] { cpu.gemm(symmetric); });
  const double t_stored = median_ms(reps, [&] { cpu.gemm(stored); });
  fmt::print("{:>7} {:>5} {:>5} {:>6} {:>10.3f} {:>10.3f} ({:.2f}) {:>10.3f} ({:.2f}) {:>10.3f} ({:.2f})\n",
             vt::name_of(dtype), m, k, count, t_folded, t_batched, t_batched / t_folded, t_symmetric,
             t_symmetric / t_folded, t_stored, t_stored / t_folded);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11;
  std::int64_t count = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (arg == "--count" && i + 1 < argc) {
      count = std::stoll(argv[++i]);
    } else {
      fmt::print(stderr, "usage: bench_symmetric [--reps R] [--count B]\n");
      return 2;
    }
  }
  fmt::print("C_i = (X D_i) X^T, X [m, k], {} products, median CPU ms of {} (ratio to folded)\n", count, reps);
  fmt::print("{:>7} {:>5} {:>5} {:>6} {:>10} {:>17} {:>17} {:>17}\n", "", "m", "k", "count", "folded", "batched",
             "symmetric", "symmetric, X^T");
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{64, 32},   {128, 64},  {192, 96},
                                                                    {256, 128}, {521, 260}, {1024, 512}};
  for (vt::DType dtype : {vt::DType::f64, vt::DType::f32})
    for (auto [m, k] : sizes) run(dtype, m, k, count, reps);
}
