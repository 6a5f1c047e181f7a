// jit plans on the CPU by chunks of examples: results agree with whole-batch runs (up to the rounding
// of reductions over the batch) and are identical whatever the number of threads; plans that need a
// whole-batch reduction before a batched step run whole-batch; errors name the global example.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "forwarding_backend.hpp"
#include "gradcheck.hpp"
#include "threads.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::on_threads;
using vt::testing::require_close;

namespace {

// A tensor's values, batched or not, as doubles: compared with == for bitwise equality (no NaN here).
std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

Tensor gp_func(const Tensor& p, const Tensor& F) {  // the seed program's likelihood, small
  const Tensor A = matmul(F * square(p), F.t()) + eye(F.shape(0));
  return mean(cho_solve(cho_factor(A), ones({F.shape(0)})));
}

// The whole-batch run: one chunk holds every example.
constexpr std::int64_t whole = std::int64_t{1} << 40;

// The planner's cache sizes (JitOptions::cache_bytes) that the cost model's tests run at: a core's L2 on common CPUs.
// The chunks and segments then depend on the option, never on the host's cache.
constexpr std::size_t KiB = 1024;
const std::vector<std::size_t> cache_sizes{256 * KiB, 512 * KiB, 1024 * KiB, 4096 * KiB};

}  // namespace

TEST_CASE("the seed program by chunks: equal to whole-batch, identical for 1, 2 and 3 threads", "[jit][chunks]") {
  const std::int64_t n = 24, m = 6;
  const Tensor F = randn({n, m}, 101);
  auto loss = [&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); };
  auto step = jit(value_and_grad(loss));
  for (const std::int64_t batch : {7, 8, 2}) {
    const Tensor P = as_batch(randn({batch, m}, 102 + static_cast<std::uint64_t>(batch)));
    const auto [v_eager, g_eager] = value_and_grad(loss)(P);
    const auto before = step.counters().chunked_calls;
    const auto [v_whole, g_whole] = [&] {
      const JitChunkExamples one_chunk(whole);
      return step(P);
    }();
    CHECK(step.counters().chunked_calls == before);  // one chunk: the whole-batch path
    require_close(v_whole, v_eager.to_vector<double>(), 1e-13);
    require_close(unbatch(g_whole), unbatch(g_eager), 1e-13);
    for (const std::int64_t chunk : {1, 2, 3}) {
      const JitChunkExamples chunks(chunk);
      std::vector<std::vector<double>> first;
      for (const int threads : {1, 2, 3}) {
        const auto [v, g] = on_threads(threads, [&] { return step(P); });
        if (chunk < batch) CHECK(step.counters().chunk_examples == chunk);
        CHECK(g.is_batched());
        CHECK(g.batch_size() == batch);
        require_close(v, v_whole.to_vector<double>(), 1e-13);
        require_close(unbatch(g), unbatch(g_whole), 1e-13);
        if (first.empty()) {
          first = {values_of(v), values_of(g)};
        } else {
          CHECK(values_of(v) == first[0]);
          CHECK(values_of(g) == first[1]);
        }
      }
    }
  }
  CHECK(step.counters().chunked_calls == 3 * 3 + 3 * 3 + 3);  // B = 2 by chunks of 1 only
  CHECK(step.counters().traces == 1);
}

TEST_CASE("by chunks: a shared parameter's gradient sums the chunks' partials in chunk order", "[jit][chunks]") {
  const Tensor W = randn({5, 4}, 111), b = randn({5}, 112);
  // W and b are shared by every example: their gradients reduce over the batch.
  auto loss = [](const Tensor& w, const Tensor& c, const Tensor& X) {
    return mean(vmap([&](const Tensor& x) { return sum(tanh(matmul(w, x) + c)) + max(x); })(X));
  };
  auto step = jit(value_and_grad(loss, {0, 1}));
  const Tensor X = as_batch(randn({11, 4}, 113));
  const auto [v_eager, g_eager] = value_and_grad(loss, {0, 1})(W, b, X);
  std::vector<std::vector<double>> first;
  for (const int threads : {1, 2, 3}) {
    const JitChunkExamples chunks(3);
    const auto before = step.counters().chunked_calls;
    const auto [v, g] = on_threads(threads, [&] { return step(W, b, X); });
    CHECK(step.counters().chunked_calls == before + 1);
    require_close(v, v_eager.to_vector<double>(), 1e-13);
    require_close(g[0], g_eager[0], 1e-13);
    require_close(g[1], g_eager[1], 1e-13);
    if (first.empty()) {
      first = {values_of(v), values_of(g[0]), values_of(g[1])};
    } else {
      CHECK(values_of(v) == first[0]);
      CHECK(values_of(g[0]) == first[1]);
      CHECK(values_of(g[1]) == first[2]);
    }
  }
  // The gradient against finite differences, through the chunked plan.
  vt::testing::check_gradients(
      [&](const std::vector<Tensor>& a) {
        const JitChunkExamples chunks(3);
        return jit(loss)(a[0], a[1], X);
      },
      {W, b}, 1e-6, 1e-7);
}

TEST_CASE("by chunks: batch_sum, batch_mean and batch_max of batched values", "[jit][chunks]") {
  auto f = jit([](const Tensor& x) { return std::tuple{batch_sum(x * 2.0), batch_mean(exp(x)), batch_max(sin(x))}; });
  const Tensor X = as_batch(randn({10, 3}, 121));
  const auto [s, m, mx] = [&] {
    const JitChunkExamples chunks(4);
    return f(X);
  }();
  CHECK(f.counters().chunked_calls == 1);
  require_close(s, batch_sum(X * 2.0), 1e-13);
  require_close(m, batch_mean(exp(X)), 1e-13);
  require_close(mx, batch_max(sin(X)), 0.0);  // a max is exact
  // Integers sum exactly.
  auto fi = jit([](const Tensor& x) { return batch_sum(x); });
  const Tensor I = as_batch(astype(randn({9, 2}, 122) * 100.0, DType::i64));
  const JitChunkExamples chunks(2);
  require_close(fi(I), batch_sum(I), 0.0);
  CHECK(fi.counters().chunked_calls == 1);
}

TEST_CASE("by chunks: batched steps that read a reduction over the batch run whole-batch", "[jit][chunks]") {
  const JitChunkExamples chunks(2);
  const Tensor X = as_batch(randn({9, 3}, 131));
  // batch_max's gradient compares every example with the batch's max.
  auto vg = jit(value_and_grad([](const Tensor& x) { return sum(batch_max(x)); }));
  const auto [v, g] = vg(X);
  const auto [ve, ge] = value_and_grad([](const Tensor& x) { return sum(batch_max(x)); })(X);
  CHECK(vg.counters().chunked_calls == 0);
  require_close(v, ve.to_vector<double>(), 0.0);
  require_close(unbatch(g), unbatch(ge), 0.0);
  // Centring by the batch mean.
  auto centred = [](const Tensor& x) { return batch_sum(square(x - batch_mean(x))); };
  auto c = jit(centred);
  require_close(c(X), centred(X), 1e-13);
  CHECK(c.counters().chunked_calls == 0);
  // A fixed batch (vmap of a plain argument) runs whole-batch too.
  auto plain = jit([](const Tensor& P) { return vmap([](const Tensor& p) { return sum(exp(p)); })(P); });
  const Tensor P = randn({9, 3}, 132);
  require_close(unbatch(plain(P)), unbatch(vmap([](const Tensor& p) { return sum(exp(p)); })(P)), 1e-14);
  CHECK(plain.counters().chunked_calls == 0);
}

TEST_CASE("by chunks: batches of one and of none", "[jit][chunks]") {
  const JitChunkExamples chunks(1);
  auto f = jit([](const Tensor& x) { return std::pair{exp(x) * 2.0, batch_sum(x)}; });
  const Tensor one = as_batch(randn({1, 3}, 141));
  const auto [y, s] = f(one);
  require_close(unbatch(y), unbatch(exp(one) * 2.0), 0.0);
  require_close(s, batch_sum(one), 0.0);
  CHECK(f.counters().chunked_calls == 0);  // one example: one chunk
  const Tensor none = as_batch(zeros({0, 3}));
  const auto [y0, s0] = f(none);
  CHECK(y0.batch_size() == 0);
  require_close(s0, std::vector<double>{0, 0, 0}, 0.0);
}

TEST_CASE("by chunks: a failing example is named by its index in the whole batch", "[jit][chunks][errors]") {
  auto f = jit([](const Tensor& a) { return logdet(a) * 2.0; });
  std::vector<Tensor> mats;
  for (int i = 0; i < 10; ++i) mats.push_back(eye(3) * (1.0 + i));
  mats[7] = eye(3) * -1.0;  // in the third chunk of 3
  const Tensor A = as_batch(stack(mats));
  mats[4] = eye(3) * -1.0;  // and another, earlier, in the second
  const Tensor B = as_batch(stack(mats));
  const JitChunkExamples chunks(3);
  for (const int threads : {1, 2, 3}) {
    on_threads(threads, [&] {
      CHECK_THAT(error_of([&] { f(A); }), Catch::Contains("example 7 of the batch of 10"));
      try {
        f(B);
        FAIL("no error");
      } catch (const NotPositiveDefinite& e) {
        CHECK(e.batch_index == 4);
        CHECK_THAT(e.what(), Catch::Contains("example 4 of the batch of 10"));
      }
      return 0;
    });
  }
  CHECK(f.counters().chunked_calls == 6);
  // Two factorizations: the second fails for example 0, the first for example 5. A whole-batch run
  // stops at the first factorization, example 5; by chunks of 4 too, though chunk 0 fails first
  // (at the second step) and chunk 1 only at the first.
  auto two = jit([](const Tensor& a, const Tensor& b) { return logdet(a) + logdet(b); });
  std::vector<Tensor> as(8, eye(3)), bs(8, eye(3));
  as[5] = eye(3) * -1.0;
  bs[0] = eye(3) * -1.0;
  const Tensor A2 = as_batch(stack(as)), B2 = as_batch(stack(bs));
  const std::string whole_error = [&] {
    const JitChunkExamples one_chunk(whole);
    return error_of([&] { two(A2, B2); });
  }();
  CHECK_THAT(whole_error, Catch::Contains("example 5 of the batch of 8"));
  {
    const JitChunkExamples by_four(4);
    for (const int threads : {1, 2})
      CHECK(on_threads(threads, [&] { return error_of([&] { two(A2, B2); }); }) == whole_error);
  }
  // An index out of range in a chunk: the example's global index too.
  auto g = jit([](const Tensor& x, const Tensor& i) { return take(x, i) * 2.0; });
  std::vector<std::int64_t> idx(8, 1);
  idx[6] = 9;
  const Tensor I = as_batch(Tensor::from_ints(idx, {8, 1}));
  CHECK_THAT(error_of([&] { g(randn({4}, 151), I); }), Catch::Contains("example 6 of the batch of 8"));
  CHECK(g.counters().chunked_calls == 1);
  // After a failure the plan runs again.
  require_close(f(as_batch(stack({eye(3), eye(3)}))), std::vector<double>{0, 0}, 1e-14);
}

TEST_CASE("by chunks: one plan called from several threads at once", "[jit][chunks]") {
  const Tensor F = randn({16, 4}, 161);
  auto loss = [&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); };
  auto step = jit(value_and_grad(loss));
  std::vector<Tensor> inputs;
  for (std::int64_t b = 5; b <= 12; ++b) inputs.push_back(as_batch(randn({b, 4}, 170 + static_cast<std::uint64_t>(b))));
  std::vector<std::vector<double>> alone(inputs.size()), together(inputs.size());
  for (std::size_t t = 0; t < inputs.size(); ++t) {
    const JitChunkExamples chunks(2);
    const auto [v, g] = step(inputs[t]);
    alone[t] = values_of(g);
    alone[t].push_back(v.item());
  }
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < inputs.size(); ++t)
    threads.emplace_back([&, t] {
      const JitChunkExamples chunks(2);  // per thread
      for (int rep = 0; rep < 3; ++rep) {
        const auto [v, g] = step(inputs[t]);
        together[t] = values_of(g);
        together[t].push_back(v.item());
      }
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < inputs.size(); ++t) CHECK(together[t] == alone[t]);
  CHECK(step.counters().chunked_calls == static_cast<std::int64_t>(4 * inputs.size()));
}

TEST_CASE("by chunks: the cost model fits a chunk's working set to the planner's cache", "[jit][chunks]") {
  // 16 examples of a 256 x 256 float64 factorization: half a megabyte each, a few per chunk. A larger cache holds more
  // of them, and the size is the option's, whatever the host's.
  const std::int64_t n = 256;
  const Tensor F = randn({n, 4}, 181);
  auto loss = [&](const Tensor& P) { return mean(vmap([&](const Tensor& p) { return gp_func(p, F); })(P)); };
  const Tensor P = as_batch(randn({16, 4}, 182));
  std::vector<std::int64_t> per_chunk;
  for (const std::size_t cache : cache_sizes) {
    INFO("cache " << cache);
    auto step = jit(value_and_grad(loss), JitOptions{.cache_bytes = cache});
    const PlanSummary s = step.compile(P);
    const std::int64_t fits = static_cast<std::int64_t>(cache) / s.arena_bytes_per_example;
    REQUIRE(fits < 16);  // more than one chunk at every size
    CHECK_THAT(step.explain(P), Catch::Contains(fmt::format("for a cache of {:.1f} KiB", cache / 1024.0)));
    const auto [v, g] = step(P);
    CHECK(step.counters().chunked_calls == 1);
    per_chunk.push_back(step.counters().chunk_examples);
    CHECK(per_chunk.back() >= 1);
    CHECK(per_chunk.back() <= std::max<std::int64_t>(fits, 1));
    const JitChunkExamples one_chunk(whole);
    const auto [vw, gw] = step(P);
    require_close(v, vw.to_vector<double>(), 1e-13);
    require_close(unbatch(g), unbatch(gw), 1e-13);
  }
  CHECK(std::is_sorted(per_chunk.begin(), per_chunk.end()));
  CHECK(per_chunk.back() > per_chunk.front());
}

TEST_CASE("by chunks: a loop under vmap runs each step over many examples, not over a cache-sized few",
          "[jit][chunks][loops]") {
  // A damped two-number recurrence over 1,500 steps: its stored carries make each example larger than the planner's
  // cache, so the cache alone would give chunks of one example, and each step would replay once per example. Each
  // step's fixed cost (OpDef::calls_per_run) makes the model take chunks of at least half the batch.
  const std::int64_t steps = 1500, examples = 16;
  const Tensor xs = randn({steps, 1}, 191) * 0.1;
  const auto loglik = [&](const Tensor& theta) {
    const Tensor a = slice(theta, 0, 0, 1), b = slice(theta, 0, 1, 2);
    auto [carry, ys] = scan(
        [&](const Tensor& c, const Tensor& x) {
          const Tensor c0 = slice(c, 0, 0, 1), c1 = slice(c, 0, 1, 2);
          const Tensor next = concatenate({tanh(a * c0 + x), c1 * b + c0}, 0);
          return std::pair{next, square(next - x)};
        },
        zeros({2}), xs);
    return sum(ys) + sum(carry);
  };
  const Tensor thetas = rand({examples, 2}, 192) * 0.5 + 0.25;
  auto step = jit(vmap(value_and_grad(loglik)), JitOptions{.cache_bytes = 128 * KiB});
  const PlanSummary s = step.compile(as_batch(thetas));
  REQUIRE(s.arena_bytes_per_example > static_cast<std::int64_t>(128 * KiB));
  const auto [values, grads] = step(as_batch(thetas));
  const JitCounters c = step.counters();
  CHECK((c.chunked_calls == 0 ? examples : c.chunk_examples) >= examples / 2);  // no chunks: the whole batch
  for (std::int64_t i = 0; i < examples; i += 5) {
    const Tensor theta = reshape(slice(thetas, 0, i, i + 1), {2});
    const auto [v, g] = value_and_grad(loglik)(theta);
    require_close(reshape(slice(unbatch(values), 0, i, i + 1), {}), v.to_vector<double>(), 1e-12);
    require_close(reshape(slice(unbatch(grads), 0, i, i + 1), {2}), g, 1e-12);
  }
}

TEST_CASE("by chunks: a plan of many kernels over large examples runs each kernel over several examples",
          "[jit][chunks]") {
  // 4,096 numbers an example, a chain of 240 elementwise kernels: a 64 KiB cache holds less than one example's
  // working set, so the cache alone would give chunks of one example, each paying every kernel call's fixed cost.
  // Each kernel call counts in the cost model (PlanSchedule::kernel_calls_per_chunk), so chunks hold several.
  auto f = [](const Tensor& x) {
    Tensor y = x;
    for (int k = 0; k < 60; ++k) y = sin(y) * 0.5 + cos(y);
    return batch_sum(y);
  };
  const std::int64_t examples = 32;
  const Tensor X = rand({examples, 4096}, 193);
  auto chunked = jit(f, JitOptions{.cache_bytes = 64 * KiB});
  const PlanSummary s = chunked.compile(as_batch(X));
  REQUIRE(s.arena_bytes_per_example + 4096 * 8 > static_cast<std::int64_t>(64 * KiB));
  const Tensor got = chunked(as_batch(X));
  const JitCounters c = chunked.counters();
  CHECK((c.chunked_calls == 0 ? examples : c.chunk_examples) > 1);
  require_close(got, f(as_batch(X)), 1e-12);
}

TEST_CASE("by chunks: the planner's cache is JitOptions::cache_bytes, else VTAPE_JIT_CACHE_BYTES, when a plan is built",
          "[jit][chunks]") {
  auto f = [](const Tensor& x) { return batch_sum(exp(x) * 2.0); };
  const Tensor X = as_batch(randn({64, 1024}, 185));  // 8 KiB an example, and as much again for exp(x)
  const auto chunk_of = [&](const auto& jitted) {
    (void)jitted(X);
    return jitted.counters().chunk_examples;
  };
  const std::int64_t small = chunk_of(jit(f, JitOptions{.cache_bytes = 64 * KiB}));
  const std::int64_t large = chunk_of(jit(f, JitOptions{.cache_bytes = 256 * KiB}));
  CHECK(small >= 1);
  CHECK(large > small);
  ::setenv("VTAPE_JIT_CACHE_BYTES", std::to_string(64 * KiB).c_str(), 1);
  auto from_env = jit(f);
  const std::int64_t env_chunk = chunk_of(from_env);
  const std::int64_t option_chunk = chunk_of(jit(f, JitOptions{.cache_bytes = 256 * KiB}));
  ::setenv("VTAPE_JIT_CACHE_BYTES", "half a megabyte", 1);
  const std::string bad = error_of([&] { (void)jit(f)(X); });
  ::unsetenv("VTAPE_JIT_CACHE_BYTES");
  CHECK(env_chunk == small);
  CHECK(option_chunk == large);
  CHECK_THAT(bad, Catch::Contains("VTAPE_JIT_CACHE_BYTES is \"half a megabyte\""));
  // The variable is read when a plan is built: the plan keeps its size after it changes.
  CHECK(chunk_of(from_env) == small);
  // A backend that runs no plan by chunks (a GPU) ignores the option.
  const vt::testing::ForwardingBackend no_chunks(Device::cuda(6));
  auto there = jit(f, JitOptions{.cache_bytes = 64 * KiB});
  require_close(there(X.to(no_chunks.device())), batch_sum(exp(X) * 2.0), 1e-13);
  CHECK(there.counters().chunked_calls == 0);
}

TEST_CASE("by chunks: segments that need no large shared operand run by sub-chunks, with the same results and errors",
          "[jit][chunks][segments]") {
  // A product by a shared matrix S (a chunk of many examples reads it once), between factorizations of an n x n matrix
  // per example (sub-chunks of a few examples). S is twice the cache, and at least 16 examples' matrices: the cost
  // model weighs it against each example's own traffic. n is a multiple of 48, so that at up to 3 threads the products
  // by S split by columns with the bits of one thread (narrower ones keep Eigen's threading, whose bits depend on the
  // thread count: backends/cpu/matrix.cpp).
  const std::size_t cache = GENERATE(from_range(cache_sizes));
  INFO("cache " << cache);
  const std::int64_t n = 144;
  const std::int64_t cols = std::max(2 * static_cast<std::int64_t>(cache), 16 * n * n * 8) / (8 * n);
  const Tensor S = randn({n, cols}, 191) * 0.1;
  auto model = [&](const Tensor& x) {  // x [n], positive: a positive definite matrix
    const Tensor L = cholesky(diag(x) + 0.5);
    const Tensor y = matmul(sum(L, {1}), S);  // the shared operand
    return sum(square(y)) + logdet(cho_factor(diag(exp(slice(y, 0, 0, n))) + 1.0));
  };
  const auto vg = value_and_grad(model);
  auto f = jit(vmap(vg), JitOptions{.cache_bytes = cache});
  const Tensor X = as_batch(exp(randn({12, n}, 192) * 0.1) + 1.0);
  const std::string plan = f.explain(X);
  INFO(plan);
  REQUIRE(plan.find("by sub-chunks of") != std::string::npos);
  const auto [v, g] = f(X);
  const auto [v_eager, g_eager] = vmap(vg)(X);
  require_close(v, v_eager.to_vector<double>(), 1e-10);
  require_close(unbatch(g), unbatch(g_eager), 1e-10);
  // The same bits with the segments (whole batch, and chunks of 5) at 1 and 3 threads.
  for (const std::int64_t chunk : {std::int64_t{0}, std::int64_t{5}}) {
    const JitChunkExamples chunks(chunk);
    const auto one = on_threads(1, [&] { return f(X); });
    const auto three = on_threads(3, [&] { return f(X); });
    CHECK(values_of(one.first) == values_of(three.first));
    CHECK(values_of(one.second) == values_of(three.second));
    require_close(one.first, v_eager.to_vector<double>(), 1e-10);
  }
  // Without them: the same results up to rounding.
  auto flat = jit(vmap(vg), JitOptions{"-split_into_segments", cache});
  CHECK(flat.explain(X).find("by sub-chunks of") == std::string::npos);
  const auto [v_flat, g_flat] = flat(X);
  require_close(v, v_flat.to_vector<double>(), 1e-12);
  // A failing example in a segment run by sub-chunks: named by its index in the batch, the lowest where two fail, as a
  // whole-batch run names it; and the plan runs again afterwards.
  std::vector<double> bad = X.to_vector<double>();
  bad[static_cast<std::size_t>(9 * n + 3)] = -5;
  bad[static_cast<std::size_t>(4 * n + 7)] = -5;
  const Tensor Y = as_batch(Tensor::from_vector(bad, {12, n}));
  for (const std::int64_t chunk : {std::int64_t{0}, std::int64_t{3}}) {
    const JitChunkExamples chunks(chunk);
    try {
      f(Y);
      FAIL("no error");
    } catch (const NotPositiveDefinite& e) {
      CHECK(e.batch_index == 4);
      CHECK_THAT(e.what(), Catch::Contains("example 4 of the batch of 12"));
    }
  }
  CHECK(values_of(f(X).first) == values_of(v));
}

TEST_CASE("by chunks: a sub-chunked segment never reuses a buffer that a later sub-chunk still reads",
          "[jit][chunks][segments]") {
  // pre = x W (a product by a large shared matrix: over the whole chunk), then gates of pre in a segment run by
  // sub-chunks, whose values the next product by a large shared matrix reads: pre dies inside the segment, and the
  // gates made after it outlive it. The sizes scale with the cache, so that the plan is alike at every size: W is 8
  // times the cache, an example's values about a tenth of it.
  const std::size_t cache = GENERATE(from_range(cache_sizes));
  INFO("cache " << cache);
  const std::int64_t d = 128, m = static_cast<std::int64_t>(cache / 512);
  const Tensor W = randn({d, 4 * m}, 201) * 0.1, V = randn({m, d}, 202) * 0.1, U = randn({m, d}, 204) * 0.1;
  auto cell = [&](const Tensor& x) {
    const Tensor pre = matmul(x, W);
    const Tensor a = slice(pre, 0, 0, m), b = slice(pre, 0, m, 2 * m), c = slice(pre, 0, 2 * m, 3 * m),
                 e = slice(pre, 0, 3 * m, 4 * m);
    // h3 and h2 + h3, made after pre's last read and read by the products after the segment: two buffers of the
    // chunk's arena, the second of which the memory plan once placed inside pre's (wrong by whole units here).
    const Tensor h1 = tanh(a) * sigmoid(b), h2 = sigmoid(c) + exp(e * 0.01), h3 = h2 * 2.0 + 1.0;
    return matmul(h1, V) + matmul(h2 + h3, U) + matmul(h3, V);
  };
  auto f = jit(vmap(cell), JitOptions{.cache_bytes = cache});
  const Tensor X = as_batch(randn({32, d}, 203));
  const std::string plan = f.explain(X);
  INFO(plan);
  REQUIRE(plan.find("by sub-chunks of") != std::string::npos);
  const Tensor want = vmap(cell)(X);
  for (const std::int64_t chunk : {std::int64_t{0}, std::int64_t{7}}) {
    const JitChunkExamples chunks(chunk);
    require_close(f(X), want.to_vector<double>(), 1e-11);
  }
}
