// Gaussian-process regression of the Mauna Loa CO2 series (examples/data/co2_monthly.csv) with
// scikit-learn's kernel, fitted by maximising the log marginal likelihood over the natural-log
// hyperparameters with L-BFGS-B (Debian's liblbfgsb, the Fortran 3.0 code scipy also wraps).
//
// Multi-start: K optimizers advance in lockstep through L-BFGS-B's reverse-communication
// interface; each round, the likelihoods and gradients of every optimizer that asks for one are
// computed as one vmapped, jitted batch (the batch shrinks as optimizers finish: same plan).
// Under mpirun (vtape built with its MPI layer), the starts are spread across the ranks, each rank
// evaluating its own in lockstep rounds; rank 0 prints the best fit over all ranks: the same fitted
// kernel as one process.
//
//   gp_co2 [--data PATH] [--starts K] [--json]        fit, report the best start
//   gp_co2 --theta t1,...,t11 --eval                  lml and its gradient at theta (JSON)
//   gp_co2 --errors                                    fit, then error bars from the Hessian at the optimum
//   --device cpu|cuda|cuda:N                          where the likelihoods are computed (cpu)
//   (--help gives the bounds: starts 1..256, theta 11 finite numbers)
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "example_cli.hpp"
#include "example_mpi.hpp"
#include "gp_model.hpp"

extern "C" void setulb_(const int* n, const int* m, double* x, const double* l, const double* u, const int* nbd,
                        double* f, double* g, const double* factr, const double* pgtol, double* wa, int* iwa,
                        char* task, const int* iprint, char* csave, int* lsave, int* isave, double* dsave,
                        std::size_t task_len, std::size_t csave_len);

namespace {

// At most 256 starts: every round evaluates up to that many likelihoods and gradients of the
// n x n kernel matrix as one batch; with the bundled data (n = 521 months) that is about 30 MiB a
// start, 8 GiB for 256.
constexpr std::int64_t max_starts = 256;

// One L-BFGS-B run, driven by reverse communication. Settings as scipy's minimize(L-BFGS-B),
// which scikit-learn uses: m = 10, factr = 1e7 (ftol 2.2e-9), pgtol = 1e-5, 15000 iterations.
class Lbfgsb {
 public:
  Lbfgsb(std::vector<double> x0, double lo, double hi)
      : x_(std::move(x0)),
        lower_(x_.size(), lo),
        upper_(x_.size(), hi),
        bounds_(x_.size(), 2),
        g_(x_.size()),
        wa_(2 * m_ * x_.size() + 5 * x_.size() + 11 * m_ * m_ + 8 * m_),
        iwa_(3 * x_.size()) {
    set_task("START");
    advance();
  }
  bool wants_evaluation() const { return std::strncmp(task_, "FG", 2) == 0; }
  bool done() const { return !wants_evaluation(); }
  const std::vector<double>& x() const { return x_; }
  int iterations() const { return isave_[29]; }
  std::string status() const {
    std::string s(task_, 60);
    return s.substr(0, s.find_last_not_of(' ') + 1);
  }
  // Hands over f(x) and its gradient, and runs until the next request or the end.
  void evaluated(double f, const std::vector<double>& g) {
    f_ = f;
    g_ = g;
    advance();
  }

 private:
  void set_task(const char* t) {
    std::memset(task_, ' ', sizeof task_);
    std::memcpy(task_, t, std::strlen(t));
  }
  void advance() {
    const int n = static_cast<int>(x_.size()), iprint = -1;
    const double factr = 1e7, pgtol = 1e-5;
    while (true) {
      setulb_(&n, &m_, x_.data(), lower_.data(), upper_.data(), bounds_.data(), &f_, g_.data(), &factr, &pgtol,
              wa_.data(), iwa_.data(), task_, &iprint, csave_, lsave_, isave_, dsave_, 60, 60);
      if (std::strncmp(task_, "NEW_X", 5) != 0) return;
      if (iterations() >= 15000) set_task("STOP: iteration limit");
    }
  }
  const int m_ = 10;
  std::vector<double> x_, lower_, upper_;
  std::vector<int> bounds_;
  std::vector<double> g_, wa_;
  std::vector<int> iwa_;
  double f_ = 0;
  char task_[60], csave_[60];
  int lsave_[4] = {}, isave_[44] = {};
  double dsave_[29] = {};
};

// --theta, already checked by its validator.
std::vector<double> parse_theta(const std::string& text) {
  std::vector<double> theta;
  if (std::string problem = cli::read_number_list(text, gp::n_theta, theta); !problem.empty())
    throw vt::Error("--theta: " + problem);
  return theta;
}

std::string json_list(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.10g}", s.empty() ? "" : ", ", x);
  return "[" + s + "]";
}

// `text` inside a JSON string: quotes, backslashes and control characters escaped.
std::string json_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
    else out += c;
  }
  return out;
}

struct ErrorBars {
  std::vector<double> errors;      // sqrt(diag(H^-1)) of -lml's Hessian H, per hyperparameter
  double against_differences = 0;  // max |H - H_fd| / max |H|
  double seconds = 0;              // computing H
  std::string problem;             // why there are no error bars (H not positive definite)
};

// The Laplace approximation at the fit: -lml's Hessian H (vt::hessian), checked against central
// differences of the jitted gradient (all 2 x 11 points in one batch), and sqrt(diag(H^-1)).
template <class Nll, class Evaluate>
ErrorBars error_bars(const Nll& nll, Evaluate& evaluate, const std::vector<double>& theta, vt::Device device) {
  const auto k = static_cast<std::int64_t>(theta.size());
  ErrorBars bars;
  const auto t0 = std::chrono::steady_clock::now();
  const vt::Tensor H = vt::hessian(nll)(vt::Tensor::from_vector(theta, {k}, vt::DType::f64, device));
  bars.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double h = 1e-4;
  std::vector<double> points;
  for (std::int64_t j = 0; j < 2 * k; ++j) {
    std::vector<double> p = theta;
    p[static_cast<std::size_t>(j / 2)] += j % 2 == 0 ? h : -h;
    points.insert(points.end(), p.begin(), p.end());
  }
  const vt::Tensor grads =
      evaluate(vt::as_batch(vt::Tensor::from_vector(points, {2 * k, k}, vt::DType::f64, device))).second;
  const std::vector<double> g = grads.to_vector<double>(), hessian = H.to_vector<double>();
  double largest = 0, difference = 0;
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t i = 0; i < k; ++i) {
      const double fd =
          (g[static_cast<std::size_t>(2 * j * k + i)] - g[static_cast<std::size_t>((2 * j + 1) * k + i)]) / (2 * h);
      largest = std::max(largest, std::abs(hessian[static_cast<std::size_t>(i * k + j)]));
      difference = std::max(difference, std::abs(hessian[static_cast<std::size_t>(i * k + j)] - fd));
    }
  bars.against_differences = largest > 0 ? difference / largest : difference;
  try {
    const vt::Tensor covariance = vt::solve(H, vt::eye(k, vt::DType::f64, device));
    bars.errors = vt::sqrt(vt::diagonal(covariance)).to_vector<double>();
  } catch (const vt::NotPositiveDefinite&) {
    bars.problem = "the Hessian of -lml is not positive definite there (not a strict local maximum)";
  }
  return bars;
}

}  // namespace

int main(int argc, char** argv) try {
  const example_mpi::Scope mpi(argc, argv);
  std::string data = VTAPE_CO2_DATA, theta_text;
  int starts = 8;
  bool json = false, eval = false, errors = false;
  vt::Device device;
  std::string device_name = "cpu";
  CLI::App app{
      "Gaussian-process regression of the Mauna Loa CO2 series with scikit-learn's kernel: fits the 11 "
      "natural-log hyperparameters by maximising the log marginal likelihood with multi-start L-BFGS-B, or "
      "evaluates it and its gradient at --theta (--eval, JSON).",
      "gp_co2"};
  cli::configure(app);
  app.footer("Memory grows as starts x n^2 for n data rows: about 30 MiB a start on the bundled data.");
  app.add_option("--data", data, "two-column CSV 't,value' with a header line")
      ->type_name("PATH")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  cli::add_integer(app, "--starts", starts, 1, max_starts, "K", "L-BFGS-B starts run in lockstep, one batch a round");
  app.add_flag("--json", json, "print the fit as one JSON object");
  app.add_flag("--errors", errors,
               "after the fit, the hyperparameters' error bars from the Hessian of the log marginal likelihood at the "
               "optimum (Laplace), checked against finite differences of the gradient");
  CLI::Option* theta_option =
      app.add_option("--theta", theta_text,
                     fmt::format("{} finite natural-log hyperparameters, comma-separated, in scikit-learn's order",
                                 gp::n_theta))
          ->type_name("t1,...,t11")
          ->check(cli::number_list(gp::n_theta));
  app.add_flag("--eval", eval, "print lml and its gradient at --theta as JSON instead of fitting")->needs(theta_option);
  app.add_option("--device", device_name,
                 "where the likelihoods are computed: cpu, cuda (under mpirun: cuda:local_rank) or cuda:N")
      ->type_name("DEVICE")
      ->check(cli::device())
      ->capture_default_str();
  if (const std::optional<int> status = cli::parse(app, argc, argv)) return *status;
  device = example_mpi::device(device_name);

  const gp::Series series = gp::read_csv(data);
  const auto n = static_cast<std::int64_t>(series.t.size());
  // The data's name in every report: the bundled series, or the file given.
  const std::string data_name = data == VTAPE_CO2_DATA ? "Mauna Loa CO2 (examples/data/co2_monthly.csv)" : data;
  // Fewer observations than hyperparameters leave the likelihood free to run off along the
  // directions the data cannot see; evaluating it at a point is still defined.
  if (!eval && n <= gp::n_theta)
    return cli::fail("gp_co2", fmt::format("{}: {} data row{}; fitting the {} hyperparameters needs at least {} "
                                           "(--eval --theta ... evaluates the likelihood with any number)",
                                           data, n, n == 1 ? "" : "s", gp::n_theta, gp::n_theta + 1));
  double mean = 0;
  for (double v : series.y) mean += v / static_cast<double>(n);
  std::vector<double> centred;
  for (double v : series.y) centred.push_back(v - mean);
  const gp::Inputs inputs(series.t, device);
  const vt::Tensor y = vt::Tensor::from_vector(centred, {n}, vt::DType::f64, device);

  // One theta -> -lml; a batch of thetas -> their values and gradients, as one jitted call.
  auto nll = [&](const vt::Tensor& theta) { return vt::neg(gp::log_marginal_likelihood(theta, inputs, y)); };
  auto evaluate = vt::jit(vt::vmap(vt::value_and_grad(nll)));

  if (eval) {
    const std::vector<double> theta = parse_theta(theta_text);
    const auto [v, g] =
        evaluate(vt::as_batch(vt::Tensor::from_vector(theta, {1, gp::n_theta}, vt::DType::f64, device)));
    std::vector<double> grad = g.to_vector<double>();
    for (double& x : grad) x = -x;
    if (mpi.rank() == 0)
      fmt::print("{{\"data\": \"{}\", \"n\": {}, \"theta\": {}, \"lml\": {:.10g}, \"grad\": {}}}\n", json_escaped(data),
                 n, json_list(theta), -v.item(), json_list(grad));
    return 0;
  }

  // Start 0 is scikit-learn's initial kernel; the others perturb it (seeded, within the bounds).
  const double lo = std::log(1e-5), hi = std::log(1e5);
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> jitter(0.0, 1.0);
  // Under mpirun each rank runs its share of the starts (the same x0 as one process); a round
  // ends on every rank together (mpi::call), and the fit ends when no rank's starts ask.
  const auto [first_start, my_starts] = example_mpi::my_share(starts);
  std::vector<Lbfgsb> runs;
  for (int k = 0; k < starts; ++k) {
    std::vector<double> x0 = gp::sklearn_initial;
    if (k > 0)
      for (double& v : x0) v = std::clamp(v + jitter(rng), lo, hi);
    if (k >= first_start && k < first_start + my_starts) runs.emplace_back(x0, lo, hi);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t evaluations = 0, rounds = 0;
  double best = -1e300;
  while (true) {
    std::vector<std::size_t> asking;
    std::vector<double> thetas;
    for (std::size_t k = 0; k < runs.size(); ++k)
      if (runs[k].wants_evaluation()) {
        asking.push_back(k);
        thetas.insert(thetas.end(), runs[k].x().begin(), runs[k].x().end());
      }
    const auto b = static_cast<std::int64_t>(asking.size());
    const std::int64_t all_asking = example_mpi::call([&] {
      if (b > 0) {
        const auto [values, grads] =
            evaluate(vt::as_batch(vt::Tensor::from_vector(thetas, {b, gp::n_theta}, vt::DType::f64, device)));
        const std::vector<double> f = values.to_vector<double>(), g = grads.to_vector<double>();
        for (std::size_t i = 0; i < asking.size(); ++i) {
          best = std::max(best, -f[i]);
          runs[asking[i]].evaluated(f[i], std::vector<double>(g.begin() + static_cast<long>(i * gp::n_theta),
                                                              g.begin() + static_cast<long>((i + 1) * gp::n_theta)));
        }
      }
      return static_cast<std::int64_t>(example_mpi::sum_over_ranks(static_cast<double>(b)));
    });
    if (all_asking == 0) break;
    evaluations += all_asking;
    ++rounds;
    if ((!json || rounds % 10 == 0) && mpi.rank() == 0)
      fmt::print(stderr, "round {:4}: {} of {} starts evaluated, best log marginal likelihood so far {:.4f}\n", rounds,
                 all_asking, starts, best);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The best start, re-evaluated at its final point.
  std::size_t arg = 0;
  double lml = -1e300;
  example_mpi::call([&] {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const auto [v, g] =
          evaluate(vt::as_batch(vt::Tensor::from_vector(runs[k].x(), {1, gp::n_theta}, vt::DType::f64, device)));
      if (-v.item() > lml) {
        lml = -v.item();
        arg = k;
      }
    }
  });
  // Under mpirun: every rank's best (lml, start, theta, status as character codes), and the best of
  // them (the lowest start on ties, as one process picks).
  constexpr std::size_t status_chars = 60;
  std::vector<double> mine = {lml, static_cast<double>(first_start + static_cast<std::int64_t>(arg))};
  std::vector<double> theta(gp::n_theta, 0.0);
  std::string status;
  if (!runs.empty()) theta = runs[arg].x(), status = runs[arg].status();
  mine.insert(mine.end(), theta.begin(), theta.end());
  for (std::size_t i = 0; i < status_chars; ++i) mine.push_back(i < status.size() ? status[i] : 0);
  const std::vector<double> all = example_mpi::rows_of_every_rank(mine);
  const std::size_t row = mine.size(), text = 2 + gp::n_theta;
  std::size_t winner = 0;
  for (std::size_t r = 1; r * row < all.size(); ++r)
    if (all[r * row] > all[winner * row]) winner = r;
  lml = all[winner * row];
  const auto best_start = static_cast<std::int64_t>(all[winner * row + 1]);
  theta.assign(all.begin() + static_cast<long>(winner * row + 2), all.begin() + static_cast<long>(winner * row + text));
  status.clear();
  for (std::size_t i = 0; i < status_chars && all[winner * row + text + i] != 0; ++i)
    status.push_back(static_cast<char>(all[winner * row + text + i]));
  if (mpi.rank() != 0) return 0;
  const vt::JitCounters c = evaluate.counters();
  const ErrorBars bars = errors ? error_bars(nll, evaluate, theta, device) : ErrorBars{};
  if (json) {
    fmt::print(
        "{{\"data\": \"{}\", \"n\": {}, \"lml\": {:.10g}, \"theta\": {}, \"kernel\": \"{}\", \"starts\": {}, "
        "\"evaluations\": {}, \"rounds\": {}, \"fit_seconds\": {:.3f}, \"traces\": {}, \"best_start\": {}, "
        "\"status\": \"{}\", \"device\": \"{}\"{}}}\n",
        json_escaped(data), n, lml, json_list(theta), gp::sklearn_notation(theta), starts, evaluations, rounds, seconds,
        c.traces, best_start, status, vt::to_string(device),
        errors
            ? fmt::format(", \"errors\": {}, \"hessian_seconds\": {:.3f}, \"hessian_vs_finite_differences\": {:.3g}{}",
                          json_list(bars.errors), bars.seconds, bars.against_differences,
                          bars.problem.empty() ? "" : fmt::format(", \"errors_problem\": \"{}\"", bars.problem))
            : "");
    return 0;
  }
  fmt::print("{}, {} rows; {} starts, {} evaluations in {} batched rounds, {:.2f} s ({} trace) on {}\n", data_name, n,
             starts, evaluations, rounds, seconds, c.traces, vt::to_string(device));
  if (mpi.on()) fmt::print("starts spread over {} MPI ranks\n", mpi.size());
  fmt::print("best start {} ({}), log marginal likelihood {:.3f}\n", best_start, status, lml);
  fmt::print("kernel: {}\n", gp::sklearn_notation(theta));
  if (errors) {
    fmt::print(
        "Hessian of the log marginal likelihood at the optimum in {:.2f} s; against central differences of the "
        "gradient: largest difference {:.2g} of its largest entry\n",
        bars.seconds, bars.against_differences);
    if (!bars.problem.empty()) fmt::print("no error bars: {}\n", bars.problem);
    for (std::size_t i = 0; i < bars.errors.size(); ++i)
      fmt::print("  theta[{:2}] = {:9.4f} +- {:.4f}{}\n", i, theta[i], bars.errors[i],
                 theta[i] <= lo || theta[i] >= hi ? " (at a bound: not a stationary point in this one)" : "");
  }
  return 0;
} catch (...) {
  return cli::fail_with_current_exception("gp_co2");
}
