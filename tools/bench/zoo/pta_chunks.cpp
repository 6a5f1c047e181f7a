// A pulsar-timing white-noise + ECORR likelihood (B1855+09: 7758 TOAs, 360 epochs, 4 backends), as a
// new user writes it from the README, jit(vmap(value_and_grad)) over parameter vectors, in two forms:
//   segment: per-epoch sums by segment_sum over the TOAs' epoch ids;
//   shared:  per-epoch sums as products by the shared 7758 x 360 indicator U (22 MB).
// Per B, the median of `reps` steady calls with the planner's chunks, and with the chunk forced to one
// example and to the whole batch (JitChunkExamples), in one process; and the first call's time at that B.
//
//   build/tools/bench_zoo_pta_chunks [--data ../shared/data/pta_B1855+09] [--batches 1,8,64,1024] [--reps 5]
//
// Model (the data's README): N_i = efac_b^2 (sigma_i^2 + 10^(2 equad_b)), phi_e = 10^(2 ecorr_b(e)),
// log L = -1/2 [sum y^2/N - sum_e a_e^2 / (1/phi_e + d_e)] - 1/2 [sum log N + sum_e log(1 + phi_e d_e)],
// a_e = sum_{i in e} y_i/N_i, d_e = sum_{i in e} 1/N_i (Woodbury and the determinant lemma; U's columns are disjoint).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(ms_since(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "../shared/data/pta_B1855+09";
  std::vector<std::int64_t> batches{1, 8, 64, 1024};
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) data = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--batches" && i + 1 < argc) {
      batches.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) batches.push_back(std::stoll(item));
    } else {
      fmt::print(stderr, "usage: bench_zoo_pta_chunks [--data DIR] [--batches 1,8,...] [--reps R]\n");
      return 2;
    }
  }
  using vt::Tensor;
  const Tensor y = vt::load_npy(data + "/residuals.npy"), sigma = vt::load_npy(data + "/toaerrs.npy");
  const Tensor backend = vt::astype(vt::load_npy(data + "/backend.npy"), vt::DType::i64);
  const Tensor epoch = vt::astype(vt::load_npy(data + "/epoch.npy"), vt::DType::i64);
  const Tensor epoch_backend = vt::astype(vt::load_npy(data + "/epoch_backend.npy"), vt::DType::i64);
  const Tensor theta0 = vt::load_npy(data + "/theta_noisedict.npy");
  const std::int64_t n = y.shape(0), epochs = epoch_backend.shape(0);
  // U[i, e] = [epoch(i) = e], built once on the host.
  std::vector<double> u(static_cast<std::size_t>(n * epochs), 0.0);
  const std::vector<std::int64_t> ep = epoch.to_vector<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) u[static_cast<std::size_t>(i * epochs + ep[static_cast<std::size_t>(i)])] = 1.0;
  const Tensor U = Tensor::from_vector(u, {n, epochs});
  const Tensor y2 = vt::square(y), s2 = vt::square(sigma);

  // theta: efac[4], log10_t2equad[4], log10_ecorr[4] (param_names.txt's order).
  auto white = [&](const Tensor& theta) {
    const Tensor efac = vt::slice(theta, 0, 0, 4), equad = vt::slice(theta, 0, 4, 8);
    return vt::square(vt::take(efac, backend)) * (s2 + vt::pow(10.0, 2.0 * vt::take(equad, backend)));
  };
  auto finish = [&](const Tensor& theta, const Tensor& N, const Tensor& a, const Tensor& d) {
    const Tensor phi = vt::pow(10.0, 2.0 * vt::take(vt::slice(theta, 0, 8, 12), epoch_backend));
    const Tensor quad = vt::sum(y2 / N) - vt::sum(vt::square(a) / (1.0 / phi + d));
    const Tensor logdet = vt::sum(vt::log(N)) + vt::sum(vt::log(1.0 + phi * d));
    return -0.5 * (quad + logdet);
  };
  auto segment_form = [&](const Tensor& theta) {
    const Tensor N = white(theta);
    return finish(theta, N, vt::segment_sum(y / N, epoch, epochs), vt::segment_sum(1.0 / N, epoch, epochs));
  };
  auto shared_form = [&](const Tensor& theta) {
    const Tensor N = white(theta);
    return finish(theta, N, vt::matmul(y / N, U), vt::matmul(1.0 / N, U));
  };
  fmt::print("pta white+ECORR, {} TOAs, {} epochs; ms per call (median of {}), jit(vmap(value_and_grad))\n", n, epochs,
             reps);
  fmt::print("{:>8} {:>6} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10}\n", "form", "B", "planner", "chunk", "chunk=1",
             "whole", "first", "per ex");
  for (int form = 0; form < 2; ++form) {
    for (std::int64_t b : batches) {
      std::vector<double> th;
      const std::vector<double> t0 = theta0.to_vector<double>();
      for (std::int64_t i = 0; i < b; ++i)
        for (std::size_t k = 0; k < t0.size(); ++k) th.push_back(t0[k] + 0.01 * static_cast<double>((i * 7 + k) % 5));
      const Tensor thetas = vt::as_batch(Tensor::from_vector(th, {b, 12}));
      auto run = [&](auto&& f) {
        auto step = vt::jit(vt::vmap(vt::value_and_grad(f)));
        step(vt::as_batch(Tensor::from_vector(std::vector<double>(th.begin(), th.begin() + 12), {1, 12})));  // traced
        const auto t = std::chrono::steady_clock::now();
        step(thetas);
        const double first = ms_since(t);
        const double planner = median_ms(reps, [&] { step(thetas); });
        const std::int64_t chunk = step.counters().chunk_examples;
        double one, whole;
        {
          vt::JitChunkExamples c(1);
          step(thetas);
          one = median_ms(reps, [&] { step(thetas); });
        }
        {
          vt::JitChunkExamples c(b);
          step(thetas);
          whole = median_ms(reps, [&] { step(thetas); });
        }
        fmt::print("{:>8} {:>6} {:>10.3f} {:>8} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.4f}\n", form ? "shared" : "segment",
                   b, planner, chunk ? chunk : b, one, whole, first, planner / static_cast<double>(b));
      };
      if (form == 0) run(segment_form);
      else run(shared_form);
    }
  }
}
