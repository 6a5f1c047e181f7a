// The CPU eigh kernel (CpuBackend::eigh: Eigen's tridiagonalisation, then tridiagonal_qr.hpp's
// sweeps in double) against the kernel it replaced (Eigen's SelfAdjointEigenSolver in the input's
// type), on the same matrices in the same run.
//
//   build/tools/bench_eigh [--reps 7]        timings: median CPU ms of `reps` runs (after a warm-up)
//                                            per batch of random symmetric matrices, and the ratio
//                                            new / old
//   build/tools/bench_eigh --solve DIR       for tools/bench/eigh_accuracy.py: each DIR/NAME.a.npy
//                                            (float64 or float32) gets NAME.new_w.npy, NAME.new_v.npy,
//                                            NAME.old_w.npy and NAME.old_v.npy
//
// CPU time rather than wall time, so that the figures stay comparable on a shared machine. Run the
// timings on one thread: OMP_NUM_THREADS=1 taskset -c 0 build/tools/bench_eigh
#include <fmt/core.h>
#include <time.h>

#include <vtape/core/eigen.hpp>
#include <Eigen/Dense>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

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

// The replaced kernel, matrix by matrix on this thread.
template <class T>
void old_eigh(std::int64_t count, std::int64_t n, const T* a, T* w, T* v) {
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> solver;
  for (std::int64_t i = 0; i < count; ++i) {
    solver.compute(Eigen::Map<const RowMat<T>>(a + i * n * n, n, n));
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(w + i * n, n) = solver.eigenvalues();
    Eigen::Map<RowMat<T>>(v + i * n * n, n, n) = solver.eigenvectors();
  }
}

void new_eigh(vt::DType dtype, std::int64_t count, std::int64_t n, const void* a, void* w, void* v) {
  vt::backend_for(vt::Device::cpu()).eigh(dtype, count, n, a, n * n, w, n, v, n * n, [](std::int64_t, std::int32_t) {
    throw std::runtime_error("bench_eigh: eigh failed");
  });
}

template <class T>
void time_one(vt::DType dtype, std::int64_t n, std::int64_t count, int reps) {
  const vt::Tensor x = vt::randn({count, n, n}, 1, dtype);
  const vt::Tensor a = (x + x.t()) * 0.5;
  const T* pa = static_cast<const T*>(a.raw_data());
  std::vector<T> w(static_cast<std::size_t>(count * n)), v(static_cast<std::size_t>(count * n * n));
  const double t_old = median_ms(reps, [&] { old_eigh(count, n, pa, w.data(), v.data()); });
  const double t_new = median_ms(reps, [&] { new_eigh(dtype, count, n, pa, w.data(), v.data()); });
  fmt::print("{:>7} {:>5} {:>6} {:>12.3f} {:>12.3f} {:>8.2f}\n", vt::name_of(dtype), n, count, t_old, t_new,
             t_new / t_old);
  std::fflush(stdout);
}

template <class T>
void solve_file(vt::DType dtype, const std::string& stem, const vt::Tensor& a) {
  const std::int64_t n = a.shape()[0];
  const T* pa = static_cast<const T*>(a.raw_data());
  std::vector<T> w(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n * n));
  const auto save = [&](const std::string& which) {
    vt::save_npy(stem + "." + which + "_w.npy", vt::Tensor::from_vector({w.begin(), w.end()}, {n}, dtype));
    vt::save_npy(stem + "." + which + "_v.npy", vt::Tensor::from_vector({v.begin(), v.end()}, {n, n}, dtype));
  };
  new_eigh(dtype, 1, n, pa, w.data(), v.data());
  save("new");
  old_eigh(1, n, pa, w.data(), v.data());
  save("old");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  std::string solve;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (arg == "--solve" && i + 1 < argc) {
      solve = argv[++i];
    } else {
      fmt::print(stderr, "usage: bench_eigh [--reps R] | --solve DIR\n");
      return 2;
    }
  }
  if (!solve.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(solve)) {
      const std::string path = entry.path().string();
      if (!path.ends_with(".a.npy")) continue;
      const std::string stem = path.substr(0, path.size() - 6);
      const vt::Tensor a = vt::load_npy(path);
      if (a.dtype() == vt::DType::f64) solve_file<double>(a.dtype(), stem, a);
      else solve_file<float>(a.dtype(), stem, a);
    }
    return 0;
  }
  fmt::print("eigh of a batch of random symmetric matrices, median CPU ms of {} (new / old)\n", reps);
  fmt::print("{:>7} {:>5} {:>6} {:>12} {:>12} {:>8}\n", "", "n", "count", "old (Eigen)", "new", "ratio");
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
      {2, 4096}, {4, 4096}, {8, 1024}, {16, 256}, {32, 64}, {64, 16}, {128, 4}, {256, 1}, {512, 1}, {1024, 1}};
  for (auto [n, count] : sizes) time_one<double>(vt::DType::f64, n, count, reps);
  for (auto [n, count] : sizes) time_one<float>(vt::DType::f32, n, count, reps);
}
