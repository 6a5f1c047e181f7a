// Gathers and segment sums against the dense indicator-matrix products they replace, as in a
// pulsar-timing model: per-backend parameters gathered to every time of arrival (take), and
// per-epoch sums over disjoint groups of them (segment_sum), batched over parameter samples.
//
//   build/tools/bench_gather [--n 7758] [--segments 360] [--params 360] [--batch 64] [--reps 20] [--json]
//
// Each line times a jitted function over a batch (as_batch, vmap), median of `reps` runs after a
// warm-up: the op alone, and value_and_grad of a weighted sum of its result. The dense forms
// multiply by the 0/1 matrix [n, segments] (or [params, n]) built on the host.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

#include "timing.hpp"

namespace {

using vt_bench::median_seconds;

// Labels in [0, groups), n of them, in order (as epochs are) or scattered (as backends are).
std::vector<std::int64_t> labels(std::int64_t n, std::int64_t groups, bool sorted, std::uint64_t seed) {
  const std::vector<double> u = vt::rand({n}, seed).to_vector<double>();
  std::vector<std::int64_t> l;
  for (double v : u)
    l.push_back(std::min<std::int64_t>(groups - 1, static_cast<std::int64_t>(v * static_cast<double>(groups))));
  if (sorted) std::sort(l.begin(), l.end());
  return l;
}

// The [rows, cols] 0/1 matrix with a 1 at (i, label[i]) (or (label[i], i) when `transposed`).
vt::Tensor indicator(const std::vector<std::int64_t>& label, std::int64_t groups, bool transposed) {
  const auto n = static_cast<std::int64_t>(label.size());
  std::vector<double> m(static_cast<std::size_t>(n * groups), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t g = label[static_cast<std::size_t>(i)];
    m[static_cast<std::size_t>(transposed ? g * n + i : i * groups + g)] = 1.0;
  }
  return vt::Tensor::from_vector(m, transposed ? vt::Shape{groups, n} : vt::Shape{n, groups});
}

double max_difference(const vt::Tensor& a, const vt::Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

struct Timing {
  std::string name;
  double op_s, grad_s, dense_op_s, dense_grad_s, difference;
};

// Times f (the indexed form) and dense (the indicator product), both per example, over `input`.
template <class F, class D>
Timing compare(const std::string& name, const vt::Tensor& input, const vt::Tensor& weights, int reps, F f, D dense) {
  auto op = vt::jit([&](const vt::Tensor& x) { return vt::vmap(f)(x); });
  auto dense_op = vt::jit([&](const vt::Tensor& x) { return vt::vmap(dense)(x); });
  auto loss = [&](auto g) { return [&, g](const vt::Tensor& x) { return vt::sum(vt::vmap(g)(x) * weights); }; };
  auto grad = vt::jit(vt::value_and_grad(loss(f)));
  auto dense_grad = vt::jit(vt::value_and_grad(loss(dense)));
  Timing t{name, 0, 0, 0, 0, 0};
  t.op_s = median_seconds(reps, [&] { (void)op(input); });
  t.dense_op_s = median_seconds(reps, [&] { (void)dense_op(input); });
  t.grad_s = median_seconds(reps, [&] { (void)grad(input); });
  t.dense_grad_s = median_seconds(reps, [&] { (void)dense_grad(input); });
  t.difference = std::max(max_difference(op(input), dense_op(input)),
                          max_difference(grad(input).second, dense_grad(input).second));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 7758, segments = 360, params = 360, batch = 64;
  int reps = 20;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) n = std::stoll(argv[++i]);
    else if (a == "--segments" && i + 1 < argc) segments = std::stoll(argv[++i]);
    else if (a == "--params" && i + 1 < argc) params = std::stoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      fmt::print(stderr, "usage: bench_gather [--n N] [--segments S] [--params P] [--batch B] [--reps R] [--json]\n");
      return 2;
    }
  }
  const std::vector<std::int64_t> epoch = labels(n, segments, true, 1), backend = labels(n, params, false, 2);
  const vt::Tensor epoch_ids = vt::Tensor::from_ints(epoch, {n}), backend_ids = vt::Tensor::from_ints(backend, {n});
  const vt::Tensor per_epoch = indicator(epoch, segments, false);  // [n, segments]
  const vt::Tensor to_points = indicator(backend, params, true);   // [params, n]

  std::vector<Timing> rows;
  rows.push_back(compare(
      fmt::format("segment_sum of {} values into {} segments", n, segments), vt::as_batch(vt::randn({batch, n}, 3)),
      vt::randn({segments}, 4), reps, [&](const vt::Tensor& v) { return vt::segment_sum(v, epoch_ids, segments); },
      [&](const vt::Tensor& v) { return vt::matmul(v, per_epoch); }));
  rows.push_back(compare(
      fmt::format("take of {} parameters to {} points", params, n), vt::as_batch(vt::randn({batch, params}, 5)),
      vt::randn({n}, 6), reps, [&](const vt::Tensor& p) { return vt::take(p, backend_ids); },
      [&](const vt::Tensor& p) { return vt::matmul(p, to_points); }));

  if (json) {
    fmt::print("{{\"n\": {}, \"segments\": {}, \"params\": {}, \"batch\": {}, \"reps\": {}, \"results\": [", n,
               segments, params, batch, reps);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Timing& t = rows[i];
      fmt::print(
          "{}{{\"name\": \"{}\", \"op_s\": {:.6g}, \"dense_op_s\": {:.6g}, \"value_and_grad_s\": {:.6g}, "
          "\"dense_value_and_grad_s\": {:.6g}, \"max_difference\": {:.3g}}}",
          i ? ", " : "", t.name, t.op_s, t.dense_op_s, t.grad_s, t.dense_grad_s, t.difference);
    }
    fmt::print("]}}\n");
    return 0;
  }
  fmt::print("batch {}, float64, jitted, median of {} runs (the dense matrices hold {:.1f} and {:.1f} MB)\n", batch,
             reps, static_cast<double>(per_epoch.numel()) * 8e-6, static_cast<double>(to_points.numel()) * 8e-6);
  for (const Timing& t : rows) {
    fmt::print("{} (results differ by at most {:.1e})\n", t.name, t.difference);
    fmt::print("  op alone        {:9.3f} ms   dense product {:9.3f} ms   ({:.1f}x)\n", t.op_s * 1e3,
               t.dense_op_s * 1e3, t.dense_op_s / t.op_s);
    fmt::print("  value and grad  {:9.3f} ms   dense product {:9.3f} ms   ({:.1f}x)\n", t.grad_s * 1e3,
               t.dense_grad_s * 1e3, t.dense_grad_s / t.grad_s);
  }
}
