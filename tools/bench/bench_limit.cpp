// The limit: vtape's two benchmark programs written by hand in Eigen, fused per example, against
// vtape's own jitted value_and_grad of the same program measured in the same process, so that the
// ratio vtape / limit is taken on one machine at one moment.
//
//   build/tools/bench_limit [--program seed|co2] [--nbatch 256,2048] [--nobs 256] [--ngp 64]
//                           [--reps 5] [--json] [--check] [--no-vtape] [--data CSV]
//
// seed  examples/seed_cholesky_grad: loss(P) = mean_b f(p_b), f(p) = mean(A^-1 1),
//       A = F diag(p^2) F^T + I. Per example, on one thread: G = F diag(p), A = G G^T + I (a
//       rank-k update of the lower triangle), LLT in place, x = A^-1 1, and the gradient
//       pbar = -2 p (F^T b) (F^T x) with b = A^-1 1 / (n B) = x / (n B): A is symmetric, so the
//       adjoint solve is the forward solve scaled (two triangular solves saved, 1% of the work).
//       About 14.3 MFLOP an example. Static chunks of examples over OMP_NUM_THREADS threads, each
//       with its own scratch; the value is summed in a fixed order.
// co2   examples/gp_co2: one log marginal likelihood of scikit-learn's Mauna Loa CO2 kernel and
//       its gradient in the 11 log-hyperparameters (n = 521, scikit-learn's initial theta). K in
//       one pass over the lower triangle, LLT, alpha = K^-1 y, K^-1 = L^-T L^-1 (triangular
//       inverse and its product, each n^3/3), then grad_k = tr((alpha alpha^T - K^-1) dK_k) / 2
//       for all 11 in a second fused pass that never forms a dK matrix (bench_limit_co2.cpp).
//       The theta-independent (t_i - t_j)^2 and sin^2(pi (t_i - t_j)) are precomputed, as
//       vtape's gp::Inputs does. Single-threaded.
//
// Timing: one warm-up call, then `reps` calls; wall_ms is their median, cpu_ms the process CPU
// time (CLOCK_PROCESS_CPUTIME_ID, every thread) over the timed calls divided by `reps`. For seed,
// the limit's and vtape's calls alternate (time_alternately), so their ratio is taken under the
// same conditions. Peak RSS is the process's peak so far (--no-vtape for the limit alone). --check compares the limit
// with central finite differences of its own function and with vtape's value and gradient (seed 1e-10, co2 1e-8
// relative), and exits 1 past them.
#include <fmt/core.h>
#include <omp.h>
#include <sys/resource.h>

#include <vtape/core/eigen.hpp>
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>
#include <vtape/vtape.hpp>

#include "co2_limit.hpp"
#include "gp_model.hpp"

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Vec = Eigen::VectorXd;

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall_ms, cpu_ms;
};

template <class F>
Timing time_calls(int reps, F&& f) {
  f();  // warm-up: first-call allocations, page faults, plan caches
  std::vector<double> wall;
  const double c0 = cpu_seconds();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double cpu_ms = (cpu_seconds() - c0) * 1e3 / reps;
  std::sort(wall.begin(), wall.end());
  return {wall[wall.size() / 2], cpu_ms};
}

// Two functions timed alternately, call by call (after one warm-up call each), so that both medians
// are taken under the same conditions on a shared machine: a load that comes and goes between two
// back-to-back series would skew their ratio.
template <class F, class G>
std::pair<Timing, Timing> time_alternately(int reps, F&& f, G&& g) {
  f();
  g();
  std::vector<double> wall[2];
  double cpu[2] = {0, 0};
  const auto one = [&](int which, auto&& call) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    wall[which].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu[which] += (cpu_seconds() - c0) * 1e3;
  };
  for (int r = 0; r < reps; ++r) {
    one(0, f);
    one(1, g);
  }
  const auto median = [](std::vector<double>& w) {
    std::sort(w.begin(), w.end());
    return w[w.size() / 2];
  };
  return {Timing{median(wall[0]), cpu[0] / reps}, Timing{median(wall[1]), cpu[1] / reps}};
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return a.size() != b.size() ? INFINITY : diff / std::max(scale, 1e-300);
}

// Central differences are taken at each of these steps and the closest counts: both programs are
// ill-conditioned (K's condition number is near 1e8), so rounding swamps small steps and
// truncation large ones, at a point that differs by coordinate.
constexpr double fd_steps[] = {1e-2, 1e-3, 1e-4, 1e-5};

// ------------------------------------------------------------------------------------------- seed

// F[:, 2j] = sin(2 pi (j+1) t), F[:, 2j+1] = cos(2 pi (j+1) t), t = linspace(0, 1, nobs), as
// examples/seed_cholesky_grad builds it; row-major [nobs, 2 ngp].
std::vector<double> fourier_basis(std::int64_t nobs, std::int64_t ngp) {
  std::vector<double> f(static_cast<std::size_t>(nobs * 2 * ngp));
  for (std::int64_t i = 0; i < nobs; ++i) {
    const double t = nobs == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(nobs - 1);
    for (std::int64_t j = 0; j < ngp; ++j) {
      const double w = 2.0 * std::numbers::pi * static_cast<double>(j + 1) * t;
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j)] = std::sin(w);
      f[static_cast<std::size_t>(i * 2 * ngp + 2 * j + 1)] = std::cos(w);
    }
  }
  return f;
}

class SeedLimit {
 public:
  SeedLimit(const std::vector<double>& f_rowmajor, std::int64_t nobs, std::int64_t m)
      : n_(nobs),
        m_(m),
        F_(Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(f_rowmajor.data(),
                                                                                                    nobs, m)) {}

  // One example: f(p), and pbar = df/dp * scale written to grad.
  double example(const double* p, double* grad, double scale, Mat& G, Mat& A, Vec& x, Vec& u) const {
    const Eigen::Map<const Vec> pv(p, m_);
    G.noalias() = F_ * pv.asDiagonal();
    A.setIdentity();
    A.selfadjointView<Eigen::Lower>().rankUpdate(G);
    Eigen::LLT<Eigen::Ref<Mat>, Eigen::Lower> llt(A);  // in place: A's lower triangle becomes L
    if (llt.info() != Eigen::Success) throw vt::Error("bench_limit seed: A is not positive definite");
    x.setOnes();
    llt.solveInPlace(x);
    u.noalias() = F_.transpose() * x;
    const double nn = static_cast<double>(n_);
    // df/dp_k = -(1/n) x^T (dA/dp_k) x = -(2/n) p_k (F_k^T x)^2
    Eigen::Map<Vec>(grad, m_) = (-2.0 * scale / nn) * pv.cwiseProduct(u.cwiseAbs2());
    return x.sum() / nn;
  }

  // loss(P) for P [B, m] row-major; grad [B, m].
  double value_and_grad(const std::vector<double>& P, std::vector<double>& grad, std::vector<double>& values) const {
    const auto B = static_cast<std::int64_t>(P.size()) / m_;
    values.resize(static_cast<std::size_t>(B));
    grad.resize(P.size());
    const double scale = 1.0 / static_cast<double>(B);
#pragma omp parallel
    {
      Mat G(n_, m_), A(n_, n_);
      Vec x(n_), u(m_);
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < B; ++b)
        values[static_cast<std::size_t>(b)] =
            example(&P[static_cast<std::size_t>(b * m_)], &grad[static_cast<std::size_t>(b * m_)], scale, G, A, x, u);
    }
    double sum = 0;  // in a fixed order: the value does not depend on the thread count
    for (double v : values) sum += v;
    return sum / static_cast<double>(B);
  }

  double f(const double* p) const {
    Mat G(n_, m_), A(n_, n_);
    Vec x(n_), u(m_), g(m_);
    return example(p, g.data(), 1.0, G, A, x, u);
  }

  std::int64_t scratch_bytes() const { return 8 * (n_ * m_ + n_ * n_ + n_ + m_); }

 private:
  std::int64_t n_, m_;
  Mat F_;
};

struct Options {
  std::string program = "seed", data = VTAPE_CO2_DATA;
  std::vector<std::int64_t> nbatch = {256, 2048};
  std::int64_t nobs = 256, ngp = 64;
  int reps = 5;
  bool json = false, check = false, vtape = true;
};

int run_seed(const Options& o) {
  const std::int64_t m = 2 * o.ngp;
  const std::vector<double> fvals = fourier_basis(o.nobs, o.ngp);
  const SeedLimit limit(fvals, o.nobs, m);

  const vt::Tensor F = vt::Tensor::from_vector(fvals, {o.nobs, m});
  const vt::Tensor Ft = F.t();
  const vt::Tensor ones = vt::ones({o.nobs});
  const vt::Tensor identity = vt::eye(o.nobs);
  auto func = [&](const vt::Tensor& p) {  // examples/seed_cholesky_grad's, verbatim
    const vt::Tensor A = vt::matmul(F * vt::square(p), Ft) + identity;
    return vt::mean(vt::cho_solve(vt::cho_factor(A), ones));
  };
  auto loss = [&](const vt::Tensor& P) { return vt::mean(vt::vmap(func)(P)); };
  auto step = vt::jit(vt::value_and_grad(loss));

  const int threads = omp_get_max_threads();
  bool ok = true;
  std::string rows;
  for (std::size_t i = 0; i < o.nbatch.size(); ++i) {
    const std::int64_t B = o.nbatch[i];
    const vt::Tensor Pt = vt::randn({B, m}, 1000 + i);
    const std::vector<double> P = Pt.to_vector<double>();
    const vt::Tensor batch = vt::as_batch(Pt);
    std::vector<double> grad, values;
    double value = 0, vvalue = 0;
    const auto limit_call = [&] { value = limit.value_and_grad(P, grad, values); };
    const auto vtape_call = [&] { vvalue = step(batch).first.item(); };
    // With vtape, the two alternate call by call; peak RSS is then the process's (the limit's own
    // is reported with --no-vtape).
    const auto [lt, vtt] = o.vtape ? time_alternately(o.reps, limit_call, vtape_call)
                                   : std::pair{time_calls(o.reps, limit_call), Timing{}};
    const double rss_limit = peak_rss_mib();

    std::string vt_fields;
    if (o.vtape) {
      const auto [v, g] = step(batch);
      const std::vector<double> vgrad = vt::unbatch(g).to_vector<double>();
      const double dv = std::abs(v.item() - value) / std::abs(value), dg = max_rel_diff(grad, vgrad);
      if (o.check && (dv > 1e-10 || dg > 1e-10)) ok = false;
      vt_fields = fmt::format(
          ", \"vtape_wall_ms\": {:.4f}, \"vtape_cpu_ms\": "
          "{:.4f}, \"ratio_wall\": {:.3f}, "
          "\"ratio_cpu\": {:.3f}, \"vtape_peak_rss_mib\": "
          "{:.1f}, \"vtape_value_rel_diff\": {:.2e}, "
          "\"vtape_grad_rel_diff\": {:.2e}",
          vtt.wall_ms, vtt.cpu_ms, vtt.wall_ms / lt.wall_ms, vtt.cpu_ms / lt.cpu_ms, peak_rss_mib(), dv, dg);
      if (!o.json)
        fmt::print(
            "B {:5}: limit {:9.3f} ms wall {:9.3f} ms CPU | vtape {:9.3f} ms "
            "wall {:9.3f} ms CPU | vtape/limit "
            "{:.2f} wall {:.2f} CPU | value {:.3e} grad {:.3e} rel diff\n",
            B, lt.wall_ms, lt.cpu_ms, vtt.wall_ms, vtt.cpu_ms, vtt.wall_ms / lt.wall_ms, vtt.cpu_ms / lt.cpu_ms, dv,
            dg);
      (void)vvalue;
    } else if (!o.json) {
      fmt::print("B {:5}: limit {:9.3f} ms wall {:9.3f} ms CPU\n", B, lt.wall_ms, lt.cpu_ms);
    }
    const double flops = static_cast<double>(B) *
                         (static_cast<double>(o.nobs * o.nobs * m) + std::pow(static_cast<double>(o.nobs), 3) / 3);
    // gflops: of the rank-k update and the factorization (the rest is 1%), over the wall time;
    // gflops_per_core: over the CPU time, steadier on a shared machine.
    rows += fmt::format(
        "{}{{\"nbatch\": {}, \"wall_ms\": {:.4f}, \"cpu_ms\": {:.4f}, \"gflops\": {:.2f}, \"gflops_per_core\": {:.2f}, "
        "\"value\": {:.17g}, \"peak_rss_mib\": {:.1f}, \"limit_bytes\": {}{}}}",
        rows.empty() ? "" : ", ", B, lt.wall_ms, lt.cpu_ms, flops / lt.wall_ms / 1e6, flops / lt.cpu_ms / 1e6, value,
        rss_limit, limit.scratch_bytes() * threads + 3 * 8 * B * m, vt_fields);
  }

  std::string check_fields;
  if (o.check) {
    // Central differences of the limit's own f, at every coordinate of one example.
    const std::vector<double> p = vt::randn({m}, 7).to_vector<double>();
    std::vector<double> grad, values;
    limit.value_and_grad(p, grad, values);
    // The gradient's entries span many orders of magnitude (the sine columns nearly vanish), so
    // errors are relative to the largest entry.
    double worst = 0, gmax = 0;
    for (double g : grad) gmax = std::max(gmax, std::abs(g));
    for (std::int64_t k = 0; k < m; ++k) {
      double best = INFINITY;
      for (double h : fd_steps) {
        std::vector<double> a = p, b = p;
        a[static_cast<std::size_t>(k)] += h;
        b[static_cast<std::size_t>(k)] -= h;
        const double fd = (limit.f(a.data()) - limit.f(b.data())) / (2 * h);
        best = std::min(best, std::abs(fd - grad[static_cast<std::size_t>(k)]) / gmax);
      }
      worst = std::max(worst, best);
    }
    if (worst > 1e-5) ok = false;
    check_fields = fmt::format(", \"fd_rel_err\": {:.2e}, \"check\": \"{}\"", worst, ok ? "ok" : "FAILED");
    if (!o.json) fmt::print("finite differences: max rel err {:.2e}; check {}\n", worst, ok ? "ok" : "FAILED");
  }
  if (o.json)
    fmt::print(
        "{{\"program\": \"seed\", \"threads\": {}, \"nobs\": {}, "
        "\"ngp\": {}, \"reps\": {}, \"runs\": [{}]{}}}\n",
        threads, o.nobs, o.ngp, o.reps, rows, check_fields);
  return ok ? 0 : 1;
}

// -------------------------------------------------------------------------------------------- co2

int run_co2(const Options& o) {
  const gp::Series series = gp::read_csv(o.data);
  const auto n = static_cast<std::int64_t>(series.t.size());
  double mean = 0;
  for (double v : series.y) mean += v / static_cast<double>(n);
  std::vector<double> centred;
  for (double v : series.y) centred.push_back(v - mean);
  limit::Co2Limit limit(series.t, centred);
  const std::vector<double>& theta = gp::sklearn_initial;

  double value = 0;
  std::vector<double> grad(gp::n_theta);
  const Timing lt = time_calls(o.reps, [&] { value = limit.value_and_grad(theta.data(), grad.data()); });
  const double rss_limit = peak_rss_mib();
  bool ok = true;
  std::string fields;
  if (o.vtape) {
    const gp::Inputs inputs(series.t);
    const vt::Tensor y = vt::Tensor::from_vector(centred, {n});
    auto step =
        vt::jit(vt::value_and_grad([&](const vt::Tensor& th) { return gp::log_marginal_likelihood(th, inputs, y); }));
    const vt::Tensor th = vt::Tensor::from_vector(theta, {gp::n_theta});
    const Timing vtt = time_calls(o.reps, [&] { step(th).first.item(); });
    const auto [v, g] = step(th);
    const double dv = std::abs(v.item() - value) / std::abs(value), dg = max_rel_diff(grad, g.to_vector<double>());
    if (o.check && (dv > 1e-8 || dg > 1e-8)) ok = false;
    fields = fmt::format(
        ", \"vtape_wall_ms\": {:.4f}, \"vtape_cpu_ms\": "
        "{:.4f}, \"ratio_wall\": {:.3f}, "
        "\"ratio_cpu\": {:.3f}, \"vtape_peak_rss_mib\": "
        "{:.1f}, \"vtape_value_rel_diff\": {:.2e}, "
        "\"vtape_grad_rel_diff\": {:.2e}",
        vtt.wall_ms, vtt.cpu_ms, vtt.wall_ms / lt.wall_ms, vtt.cpu_ms / lt.cpu_ms, peak_rss_mib(), dv, dg);
    if (!o.json)
      fmt::print(
          "co2 (n {}): limit {:.3f} ms wall {:.3f} ms CPU | vtape "
          "{:.3f} ms wall {:.3f} ms CPU | vtape/limit "
          "{:.2f} wall {:.2f} CPU | value {:.2e} grad {:.2e} rel diff\n",
          n, lt.wall_ms, lt.cpu_ms, vtt.wall_ms, vtt.cpu_ms, vtt.wall_ms / lt.wall_ms, vtt.cpu_ms / lt.cpu_ms, dv, dg);
  } else if (!o.json) {
    fmt::print("co2 (n {}): limit {:.3f} ms wall {:.3f} ms CPU\n", n, lt.wall_ms, lt.cpu_ms);
  }
  if (o.check) {
    double worst = 0, gmax = 0;
    for (double g : grad) gmax = std::max(gmax, std::abs(g));
    for (int k = 0; k < gp::n_theta; ++k) {
      const double g = grad[static_cast<std::size_t>(k)];
      double best = INFINITY, best_fd = 0;
      for (double h : fd_steps) {
        std::vector<double> a = theta, b = theta;
        a[static_cast<std::size_t>(k)] += h;
        b[static_cast<std::size_t>(k)] -= h;
        const double fd = (limit.value(a.data()) - limit.value(b.data())) / (2 * h);
        if (std::abs(fd - g) < best) std::tie(best, best_fd) = std::pair{std::abs(fd - g), fd};
      }
      if (!o.json) fmt::print("  theta[{:2}]: gradient {:+.10e}, central difference {:+.10e}\n", k, g, best_fd);
      worst = std::max(worst, best / gmax);
    }
    if (worst > 1e-5) ok = false;
    fields += fmt::format(", \"fd_rel_err\": {:.2e}, \"check\": \"{}\"", worst, ok ? "ok" : "FAILED");
    if (!o.json) fmt::print("finite differences: max rel err {:.2e}; check {}\n", worst, ok ? "ok" : "FAILED");
  }
  if (o.json)
    fmt::print(
        "{{\"program\": \"co2\", \"threads\": {}, \"n\": {}, \"reps\": "
        "{}, \"wall_ms\": {:.4f}, \"cpu_ms\": {:.4f}, "
        "\"value\": {:.17g}, \"peak_rss_mib\": {:.1f}{}}}\n",
        omp_get_max_threads(), n, o.reps, lt.wall_ms, lt.cpu_ms, value, rss_limit, fields);
  return ok ? 0 : 1;
}

std::vector<std::int64_t> parse_list(const std::string& s) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = std::min(s.find(',', start), s.size());
    const std::int64_t v = std::stoll(s.substr(start, end - start));
    if (v < 1 || v > 65536) throw vt::Error(fmt::format("--nbatch: {} is not in 1..65536", v));
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw vt::Error(fmt::format("{} needs a value", a));
      return argv[++i];
    };
    if (a == "--program") o.program = next();
    else if (a == "--nbatch") o.nbatch = parse_list(next());
    else if (a == "--nobs") o.nobs = std::stoll(next());
    else if (a == "--ngp") o.ngp = std::stoll(next());
    else if (a == "--reps") o.reps = std::stoi(next());
    else if (a == "--data") o.data = next();
    else if (a == "--json") o.json = true;
    else if (a == "--check") o.check = true;
    else if (a == "--no-vtape") o.vtape = false;
    else {
      fmt::print(stderr,
                 "usage: bench_limit [--program seed|co2] [--nbatch "
                 "256,2048] [--nobs 256] [--ngp 64] [--reps 5] "
                 "[--json] [--check] [--no-vtape] [--data CSV]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (o.program != "seed" && o.program != "co2") throw vt::Error("--program: seed or co2");
  if (o.reps < 1 || o.nobs < 1 || o.ngp < 1) throw vt::Error("--reps, --nobs and --ngp must be positive");
  return o.program == "seed" ? run_seed(o) : run_co2(o);
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_limit: {}\n", e.what());
  return 2;
}
