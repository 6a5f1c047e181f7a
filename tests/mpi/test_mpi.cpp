// vt::mpi under mpirun (ctest runs it with 2 and 3 ranks): every rank computes the single-process result itself, on the
// whole batch and without collectives, and checks that the sharded run gives its rows of it (values and gradients to
// 1e-12 relative), for batches that split unevenly and leave ranks empty; the shared parameter's gradient against
// finite differences; errors raised alike on every rank, naming the global example, without a hang (ctest's timeout).
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include <vtape/mpi/mpi.hpp>
#include <vtape/vtape.hpp>

namespace {

int checks = 0, failures = 0;

void check(bool ok, const std::string& what) {
  ++checks;
  if (ok) return;
  ++failures;
  fmt::print(stderr, "rank {}: FAILED: {}\n", vt::mpi::rank(), what);
}

double relative(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-300); }

void check_close(const vt::Tensor& got, const vt::Tensor& want, double tol, const std::string& what) {
  if (got.shape() != want.shape()) {
    check(false, fmt::format("{}: shape {} != {}", what, vt::to_string(got.shape()), vt::to_string(want.shape())));
    return;
  }
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 0, worst = 0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]));
  check(worst <= tol * std::max(scale, 1e-300),
        fmt::format("{}: max |difference| {:.3e} (scale {:.3e})", what, worst, scale));
}

// The rows [offset, offset + count) of a plain tensor.
vt::Tensor rows(const vt::Tensor& x, const vt::mpi::Slice& s) { return vt::slice(x, 0, s.offset, s.offset + s.count); }

// Every rank must hold the same string: compared through rank 0's.
bool same_on_every_rank(const std::string& text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string root(static_cast<std::size_t>(length), '\0');
  if (vt::mpi::rank() == 0) root = text;
  MPI_Bcast(root.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = root == text ? 1 : 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

constexpr std::int64_t nobs = 8, ngp = 2;

// The seed's example with a shared parameter: A = F diag(p^2) F^T + exp(theta_0) I, scaled by theta_1; per example the
// mean of cho_solve(A, ones).
struct Model {
  vt::Tensor F, ones = vt::ones({nobs}), eye = vt::eye(nobs);
  Model() {
    std::vector<double> f;
    for (std::int64_t i = 0; i < nobs; ++i)
      for (std::int64_t j = 0; j < ngp; ++j) {
        const double w = 2.0 * M_PI * static_cast<double>(j + 1) * static_cast<double>(i) / (nobs - 1);
        f.push_back(std::sin(w));
        f.push_back(std::cos(w));
      }
    F = vt::Tensor::from_vector(f, {nobs, 2 * ngp});
  }
  vt::Tensor example(const vt::Tensor& p, const vt::Tensor& theta) const {
    const vt::Tensor A = vt::matmul(F * vt::square(p), F.t()) + vt::exp(vt::slice(theta, 0, 0, 1)) * eye;
    return vt::mean(vt::cho_solve(vt::cho_factor(A), ones)) * vt::sum(vt::slice(theta, 0, 1, 2));
  }
  vt::Tensor prior(const vt::Tensor& theta) const { return 0.1 * vt::sum(vt::square(theta)); }
  // Single process: the mean over the whole batch.
  vt::Tensor reference(const vt::Tensor& P, const vt::Tensor& theta) const {
    return vt::mean(vt::vmap([&](const vt::Tensor& p) { return example(p, theta); })(P)) + prior(theta);
  }
  // Sharded: P is this rank's slice; theta enters the sharded part through replicated().
  vt::Tensor sharded(const vt::Tensor& P, const vt::Tensor& theta) const {
    const vt::Tensor shared = vt::mpi::replicated(theta);
    return vt::mpi::global_mean(vt::vmap([&](const vt::Tensor& p) { return example(p, shared); })(P)) + prior(theta);
  }
};

// While it lives, with chunk > 0: jitted plans run by chunks of `chunk` examples, on 2 OpenMP threads.
class ChunkedRun {
 public:
  explicit ChunkedRun(std::int64_t chunk) : threads_(omp_get_max_threads()), scope_(chunk) {
    if (chunk > 0) omp_set_num_threads(2);
  }
  ~ChunkedRun() { omp_set_num_threads(threads_); }

 private:
  int threads_;
  vt::JitChunkExamples scope_;
};

void test_slices() {
  for (std::int64_t batch : {0, 1, 2, 7, 10, 11}) {
    std::int64_t next = 0;
    for (int r = 0; r < vt::mpi::size(); ++r) {
      const vt::mpi::Slice s = vt::mpi::slice(batch, r);
      const std::int64_t even = batch / vt::mpi::size();
      check(s.offset == next && (s.count == even || s.count == even + 1) &&
                (s.count == even + 1) == (r < batch % vt::mpi::size()),
            fmt::format("slice({}, rank {}) = offset {}, count {}", batch, r, s.offset, s.count));
      next += s.count;
    }
    check(next == batch, fmt::format("the slices of {} cover it", batch));
  }
}

void test_sum_mean_gather() {
  for (std::int64_t batch : {10, 7, 2, 1}) {
    const vt::Tensor X = vt::randn({batch, 3, 2}, 7 + batch);
    const vt::Tensor mine = vt::mpi::shard(vt::as_batch(X));
    check_close(vt::mpi::global_sum(mine), vt::sum(X, {0}), 1e-12, fmt::format("global_sum, B = {}", batch));
    check_close(vt::mpi::global_mean(mine), vt::mean(X, {0}), 1e-12, fmt::format("global_mean, B = {}", batch));
    check_close(vt::unbatch(vt::mpi::gather(mine)), X, 0, fmt::format("gather(shard(X)), B = {}", batch));
    check_close(vt::mpi::gather(vt::mpi::shard(X)), X, 0, fmt::format("gather(shard(X)) of a plain X, B = {}", batch));
    // d/dx of sum(w * global_mean(x)^2): this rank's rows of the single-process gradient.
    const vt::Tensor W = vt::randn({3, 2}, 3);
    const vt::Tensor g =
        vt::grad([&](const vt::Tensor& x) { return vt::sum(W * vt::square(vt::mpi::global_mean(x))); })(mine);
    const vt::Tensor want = vt::grad([&](const vt::Tensor& x) { return vt::sum(W * vt::square(vt::mean(x, {0}))); })(X);
    check_close(vt::unbatch(g), rows(want, vt::mpi::slice(batch, vt::mpi::rank())), 1e-12,
                fmt::format("gradient of global_mean, B = {}", batch));
    const vt::Tensor gs =
        vt::grad([&](const vt::Tensor& x) { return vt::sum(W * vt::square(vt::mpi::global_sum(x))); })(mine);
    const vt::Tensor wants = vt::grad([&](const vt::Tensor& x) { return vt::sum(W * vt::square(vt::sum(x, {0}))); })(X);
    check_close(vt::unbatch(gs), rows(wants, vt::mpi::slice(batch, vt::mpi::rank())), 1e-12,
                fmt::format("gradient of global_sum, B = {}", batch));
  }
  // A batch that is not this rank's shard: global_mean cannot know the global size, and says so (on every rank, through
  // call). One rank holds the whole batch, whatever it is.
  std::string message = "(none)";
  try {
    vt::mpi::call([] { return vt::mpi::global_mean(vt::as_batch(vt::ones({5, 2}))); });
    message = "(no error)";
  } catch (const vt::Error& e) {
    message = e.what();
  }
  if (vt::mpi::size() > 1)
    check(message.find("vt::mpi::global_mean: this rank's batch has 5 examples, but the slice vt::mpi::shard took last "
                       "has") != std::string::npos,
          "global_mean of a batch that is not the shard: " + message);
  else check(message == "(no error)", "global_mean with one rank: " + message);
  // allreduce of a tensor: the sum of every rank's; its gradient the cotangent.
  const vt::Tensor mine = vt::full({2, 2}, vt::mpi::rank() + 1.0);
  const double ranks = vt::mpi::size();
  check_close(vt::mpi::allreduce(mine), vt::full({2, 2}, ranks * (ranks + 1) / 2), 1e-15, "allreduce");
  try {
    vt::mpi::allreduce(vt::as_batch(vt::ones({3, 2})));
    check(false, "allreduce of a batched tensor raises");
  } catch (const vt::Error& e) {
    check(std::string(e.what()).find("vt::mpi::allreduce: the tensor of shape [2] is batched") != std::string::npos,
          std::string("allreduce of a batched tensor: ") + e.what());
  }
}

// Centring by the global mean: the collective's result meets the per-example values again. Through replicated() the
// gradient is the single-process one; without it, allreduce's backward sees a cotangent that differs across ranks and
// every rank raises, naming the rule (no hang).
void test_centring() {
  for (std::int64_t batch : {10, 7, 2}) {
    const vt::Tensor X = vt::randn({batch, 3}, 40 + batch);
    const vt::Tensor mine = vt::mpi::shard(vt::as_batch(X));
    const auto right = [](const vt::Tensor& x) {
      return vt::sum(vt::mpi::global_mean(vt::square(x - vt::mpi::replicated(vt::mpi::global_mean(x)))));
    };
    const auto wrong = [](const vt::Tensor& x) {
      return vt::sum(vt::mpi::global_mean(vt::square(x - vt::mpi::global_mean(x))));
    };
    const vt::Tensor want =
        vt::grad([](const vt::Tensor& x) { return vt::sum(vt::mean(vt::square(x - vt::mean(x, {0})), {0})); })(X);
    const std::string how = fmt::format("B = {}", batch);
    for (bool jitted : {false, true}) {
      const vt::Tensor g =
          jitted ? vt::mpi::call(vt::jit(vt::grad(right)), mine) : vt::mpi::call(vt::grad(right), mine);
      check_close(
          vt::unbatch(g), rows(want, vt::mpi::slice(batch, vt::mpi::rank())), 1e-12,
          fmt::format("gradient of the centred variance through replicated, {}, {}", jitted ? "jit" : "eager", how));
      std::string message = "(no error)";
      try {
        if (jitted) vt::mpi::call(vt::jit(vt::grad(wrong)), mine);
        else vt::mpi::call(vt::grad(wrong), mine);
      } catch (const vt::Error& e) {
        message = e.what();
      }
      if (vt::mpi::size() > 1) {
        check(message.find("without vt::mpi::replicated()") != std::string::npos,
              fmt::format("the centring without replicated raises, {}: {}", how, message));
        check(same_on_every_rank(message), "every rank raises the same message for the centring, " + how);
      } else {
        check(message == "(no error)", "one rank: the centring without replicated is right: " + message);
      }
    }
  }
}

// Data split by the user (no shard, and a stale shard of another batch): global_mean(x, B) and its gradient are the
// single-process ones; a NotPositiveDefinite keeps its local index and names the rank.
void test_user_split() {
  vt::mpi::shard(vt::ones({4, 1}));  // last_shard: another batch
  const std::int64_t batch = 9;
  const vt::Tensor X = vt::randn({batch, 3}, 77);
  const vt::mpi::Slice s = vt::mpi::slice(batch, vt::mpi::rank());
  const vt::Tensor mine = vt::as_batch(rows(X, s));
  const auto loss = [&](const vt::Tensor& x) { return vt::sum(vt::square(vt::mpi::global_mean(x, batch))); };
  check_close(vt::mpi::call([&] { return vt::mpi::global_mean(mine, batch); }), vt::mean(X, {0}), 1e-12,
              "global_mean(x, B) of a user split");
  const vt::Tensor want = vt::grad([](const vt::Tensor& x) { return vt::sum(vt::square(vt::mean(x, {0}))); })(X);
  check_close(vt::unbatch(vt::mpi::call(vt::jit(vt::grad(loss)), mine)), rows(want, s), 1e-12,
              "gradient of global_mean(x, B) of a user split");
  try {
    vt::mpi::global_mean(mine, 0);
    check(false, "global_mean(x, 0) raises");
  } catch (const vt::Error& e) {
    check(std::string(e.what()).find("must be positive, got 0") != std::string::npos, e.what());
  }
  // A non-SPD example 0 on the last rank's own batch: not renamed (the batch is not the last shard's).
  std::vector<double> p(static_cast<std::size_t>(s.count), 1.0);
  if (vt::mpi::rank() == vt::mpi::size() - 1 && s.count > 0) p[0] = -1.0;
  const vt::Tensor P = vt::as_batch(vt::Tensor::from_vector(p, {s.count, 1}));
  std::string message = "(none)";
  long index = -2;
  try {
    vt::mpi::call([&] {
      return vt::mpi::global_mean(vt::vmap([](const vt::Tensor& q) {
                                    return vt::sum(vt::cho_solve(vt::cho_factor(q * vt::eye(2)), vt::ones({2})));
                                  })(P),
                                  batch);
    });
  } catch (const vt::NotPositiveDefinite& e) {
    message = e.what();
    index = e.batch_index;
  }
  if (vt::mpi::size() > 1) {
    check(index == 0 && message.find("global batch") == std::string::npos &&
              message.find(fmt::format("(on rank {} of", vt::mpi::size() - 1)) != std::string::npos,
          fmt::format("a user split's error keeps its local index 0 (got {}) and names the rank: {}", index, message));
    check(same_on_every_rank(message), "every rank raises the user split's error");
  }
}

// With `chunk`, the jitted plan runs by chunks of that many examples on 2 threads: the collectives stay once per call.
void test_model(bool jitted, std::int64_t chunk = 0) {
  const ChunkedRun chunked(chunk);
  const Model m;
  const vt::Tensor theta = vt::Tensor::from_vector({0.3, 1.7}, {2});
  auto step =
      vt::jit(vt::value_and_grad([&](const vt::Tensor& P, const vt::Tensor& t) { return m.sharded(P, t); }, {0, 1}));
  auto eager = vt::value_and_grad([&](const vt::Tensor& P, const vt::Tensor& t) { return m.sharded(P, t); }, {0, 1});
  auto reference =
      vt::value_and_grad([&](const vt::Tensor& P, const vt::Tensor& t) { return m.reference(P, t); }, {0, 1});
  // 10 and 7 split unevenly over 3 ranks, 2 and 1 leave ranks without examples.
  for (std::int64_t batch : {10, 7, 2, 1, 12}) {
    const vt::Tensor P = vt::randn({batch, 2 * ngp}, 100 + batch);
    const vt::Tensor mine = vt::mpi::shard(vt::as_batch(P));
    const auto [value, grads] = jitted ? vt::mpi::call(step, mine, theta) : vt::mpi::call(eager, mine, theta);
    const auto [ref_value, ref_grads] = reference(vt::as_batch(P), theta);
    const std::string how = fmt::format("{}, B = {}", jitted ? "jit" : "eager", batch);
    check(relative(value.item(), ref_value.item()) <= 1e-12,
          fmt::format("value, {}: {:.17g} vs {:.17g}", how, value.item(), ref_value.item()));
    check_close(vt::unbatch(grads[0]), rows(vt::unbatch(ref_grads[0]), vt::mpi::slice(batch, vt::mpi::rank())), 1e-12,
                "gradient w.r.t. the slice, " + how);
    check_close(grads[1], ref_grads[1], 1e-12, "gradient w.r.t. the shared parameter, " + how);
    check(same_on_every_rank(fmt::format("{:.17g} {}", value.item(), fmt::join(grads[1].to_vector<double>(), " "))),
          "every rank holds the same value and shared gradient, " + how);
    if (batch == 10) {  // the shared gradient against central differences of the
                        // sharded loss
      for (std::int64_t j = 0; j < 2; ++j) {
        std::vector<double> t = theta.to_vector<double>();
        const double h = 1e-6, t0 = t[static_cast<std::size_t>(j)];
        t[static_cast<std::size_t>(j)] = t0 + h;
        const double plus = vt::mpi::call(eager, mine, vt::Tensor::from_vector(t, {2})).first.item();
        t[static_cast<std::size_t>(j)] = t0 - h;
        const double minus = vt::mpi::call(eager, mine, vt::Tensor::from_vector(t, {2})).first.item();
        const double fd = (plus - minus) / (2 * h), ad = grads[1].to_vector<double>()[static_cast<std::size_t>(j)];
        check(std::abs(ad - fd) <= 1e-6 * std::max(1.0, std::abs(fd)),
              fmt::format("shared gradient {} vs finite differences {}, {}", ad, fd, how));
      }
    }
  }
  if (chunk > 0)
    check(step.counters().chunked_calls > 0,
          fmt::format("the calls ran by chunks of {}: {} chunked calls", chunk, step.counters().chunked_calls));
  if (jitted) {
    const vt::JitCounters c = step.counters();
    check(c.traces == 1, fmt::format("one trace for every local batch size "
                                     "(empty ones included): {} traces",
                                     c.traces));
  }
}

// Bytes per call of the seed-like step do not grow with B: the loss, and the status words.
void test_traffic() {
  const Model m;
  const vt::Tensor theta = vt::Tensor::from_vector({0.3, 1.7}, {2});
  auto step = vt::jit(vt::value_and_grad([&](const vt::Tensor& P) { return m.sharded(P, theta); }));
  std::vector<std::int64_t> bytes;
  for (std::int64_t batch : {6, 600}) {
    const vt::Tensor mine = vt::mpi::shard(vt::as_batch(vt::randn({batch, 2 * ngp}, 5)));
    vt::mpi::call(step, mine);  // the first call folds the plan's constants
    vt::mpi::reset_counters();
    vt::mpi::call(step, mine);
    bytes.push_back(vt::mpi::counters().bytes_sent);
    check(vt::mpi::counters().payload_bytes == (vt::mpi::size() > 1 ? 8 : 0),
          fmt::format("payload per call: the loss, 8 bytes, got {}", vt::mpi::counters().payload_bytes));
  }
  check(bytes[0] == bytes[1], fmt::format("bytes per call at B = 6 and 600: {} and {}", bytes[0], bytes[1]));
  if (vt::mpi::rank() == 0) fmt::print("bytes sent per call and rank: {} (B = 6), {} (B = 600)\n", bytes[0], bytes[1]);
}

// A non-SPD matrix on one rank: every rank raises NotPositiveDefinite naming the lowest failing example of the global
// batch, with the same message; then the ranks go on together.
void test_errors(bool jitted, std::int64_t chunk = 0) {
  const ChunkedRun chunked(chunk);
  const auto func = [](const vt::Tensor& p) {  // p[0] I: not positive definite where p[0] <= 0
    return vt::sum(vt::cho_solve(vt::cho_factor(vt::slice(p, 0, 0, 1) * vt::eye(3)), vt::ones({3})));
  };
  const auto loss = [&](const vt::Tensor& P) { return vt::mpi::global_mean(vt::vmap(func)(P)); };
  auto step = vt::jit(vt::value_and_grad(loss));
  auto eager = vt::value_and_grad(loss);
  const std::int64_t batch = 11;
  for (std::vector<std::int64_t> bad : std::vector<std::vector<std::int64_t>>{{9}, {0}, {10, 4}, {5, 6}}) {
    std::vector<double> p(static_cast<std::size_t>(batch * 2), 1.0);
    for (std::int64_t b : bad) p[static_cast<std::size_t>(b * 2)] = -1.0;
    const vt::Tensor mine = vt::mpi::shard(vt::as_batch(vt::Tensor::from_vector(p, {batch, 2})));
    const std::int64_t want = *std::min_element(bad.begin(), bad.end());
    const std::string how = fmt::format("{}, bad examples {}", jitted ? "jit" : "eager", fmt::join(bad, ","));
    std::string message = "(none)";
    long index = -1;
    try {
      if (jitted) vt::mpi::call(step, mine);
      else vt::mpi::call(eager, mine);
    } catch (const vt::NotPositiveDefinite& e) {
      message = e.what();
      index = e.batch_index;
    } catch (const std::exception& e) {
      message = std::string("another error: ") + e.what();
    }
    check(index == want,
          fmt::format("NotPositiveDefinite at global example {}, got {}: {}, {}", want, index, message, how));
    check(message.find(fmt::format("example {} of the global batch of 11", want)) != std::string::npos,
          fmt::format("the message names the global example {}: {}, {}", want, message, how));
    check(same_on_every_rank(message), "every rank raises the same message, " + how);
    // The ranks go on together.
    const vt::Tensor good = vt::mpi::shard(vt::as_batch(vt::ones({batch, 2})));
    const double v = (jitted ? vt::mpi::call(step, good) : vt::mpi::call(eager, good)).first.item();
    check(std::abs(v - 3.0) < 1e-14, fmt::format("a good call after the error: {} (want 3), {}", v, how));
  }
  if (chunk > 0)
    check(step.counters().chunked_calls > 0,
          fmt::format("the erring calls ran by chunks of {}: {} chunked calls", chunk, step.counters().chunked_calls));
  // An exception of user code on the last rank only: every rank raises it as vt::Error.
  const vt::Tensor good = vt::mpi::shard(vt::as_batch(vt::ones({4, 2})));
  std::string message = "(none)";
  try {
    vt::mpi::call([&] {
      if (vt::mpi::rank() == vt::mpi::size() - 1) throw std::runtime_error("the last rank's own failure");
      return step(good);
    });
  } catch (const vt::Error& e) {
    message = e.what();
  }
  check(message.find("the last rank's own failure (on rank") != std::string::npos, "a user exception: " + message);
  check(same_on_every_rank(message), "every rank raises the user exception");
  // A failure on rank 0 before a gather: the others meet it in the gather's status agreement.
  message = "(none)";
  try {
    vt::mpi::call([&] {
      if (vt::mpi::rank() == 0) throw std::runtime_error("rank 0 fails before the gather");
      return vt::mpi::gather(good);
    });
  } catch (const vt::Error& e) {
    message = e.what();
  }
  check(message.find("rank 0 fails before the gather (on rank 0") != std::string::npos,
        "a failure before a gather: " + message);
  check(same_on_every_rank(message), "every rank raises the failure before the gather");
  // Rows of another shape on the last rank: every rank raises.
  message = "(no error)";
  try {
    vt::mpi::call([&] { return vt::mpi::gather(vt::ones({2, vt::mpi::rank() == vt::mpi::size() - 1 ? 4 : 3})); });
  } catch (const vt::Error& e) {
    message = e.what();
  }
  if (vt::mpi::size() > 1) {
    check(message.find("vt::mpi::gather: rank") != std::string::npos &&
              message.find("of another shape") != std::string::npos,
          "gather of rows of another shape: " + message);
    check(same_on_every_rank(message), "every rank raises the gather's shape mismatch");
  }
}

}  // namespace

int main(int argc, char** argv) {
  vt::mpi::Session session(argc, argv);
  if (vt::mpi::size() < 2) fmt::print("note: one rank; run under mpirun -np 2 or more\n");
  try {
    test_slices();
    test_sum_mean_gather();
    test_model(false);
    test_model(true);
    test_centring();
    test_user_split();
    test_traffic();
    test_errors(false);
    test_errors(true);
    test_model(true, 2);
    test_errors(true, 2);
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  int local = failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  fmt::print("rank {} of {}: {} checks, {} failed\n", vt::mpi::rank(), vt::mpi::size(), checks, failures);
  if (vt::mpi::rank() == 0 && total == 0) fmt::print("mpi checks ok on {} ranks\n", vt::mpi::size());
  return total == 0 ? 0 : 1;
}
