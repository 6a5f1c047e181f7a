// jit for real models: compiling independent of captured constants (ops on constants are folded into
// the plan, computed on its first call), arenas kept across calls and batch sizes, the JAX habit
// jit(vmap(f))(plain X), and clear messages when a batched tensor is read as one value.
#include <algorithm>
#include <thread>

#include "forwarding_backend.hpp"
#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

TEST_CASE("compiling a gradient does not compute on a large captured constant", "[jit]") {
  // The adjoint of F p needs F^T; the trace records it for the plan instead of transposing 25 MB.
  auto make_step_for = [](const Tensor& F, const Tensor& y) {
    return jit(value_and_grad([F, y](const Tensor& P) {
      return mean(vmap([&](const Tensor& p) { return mean(square(matmul(F, p) - y)); })(P));
    }));
  };
  const Tensor big_f = randn({8000, 400}, 1), big_y = randn({8000}, 2);
  const Tensor tiny_f = randn({8, 400}, 3), tiny_y = randn({8}, 4);
  const Tensor P = as_batch(randn({4, 400}, 5));
  {
    // The memory compiling takes, on a device that counts it, instead of its time (which depends on the machine and
    // its load): computing on the constant (a transposed copy of F, say) would take its size. So the same trace takes
    // as much with the big constant as with the tiny one.
    vt::testing::MemoryWatcher device(Device::cuda(6));
    const auto compiling_takes = [&](const Tensor& F, const Tensor& y) {
      const auto step = make_step_for(F.to(device.device()), y.to(device.device()));
      const Tensor p = P.to(device.device());
      const std::size_t before = device.live;
      device.peak = before;
      (void)step.compile(p);
      return device.peak - before;
    };
    const std::size_t big = compiling_takes(big_f, big_y), tiny = compiling_takes(tiny_f, tiny_y);
    INFO("compiling took " << big << " bytes with an 8000 x 400 constant, " << tiny << " with 8 x 400");
    CHECK(big == tiny);
    CHECK(big < 8000 * 400 * 8 / 100);
  }
  // The adjoint reads F through a GEMM transpose flag: no transposed copy of F, at trace time or in
  // the plan (so nothing to fold either).
  auto step = make_step_for(big_f, big_y);
  const PlanSummary plan = step.compile(P);
  CHECK(plan.folded == 0);
  const auto [v, g] = step(P);
  const auto [ve, ge] = value_and_grad([&](const Tensor& Q) {
    return mean(vmap([&](const Tensor& p) { return mean(square(matmul(big_f, p) - big_y)); })(Q));
  })(P);
  CHECK(v.item() == Approx(ve.item()).epsilon(1e-12));
  require_close(unbatch(g), unbatch(ge), 1e-12);
}

TEST_CASE("a captured tensor's values are read by the first plan that asks, not by later ones", "[jit]") {
  // fold_diagonal_adds reads the captured D (is it diagonal?), through the device's copy to the host.
  vt::testing::MemoryWatcher device(Device::cuda(6));
  const Tensor D = (eye(40) * 2.0).to(device.device()), x = randn({40, 3}, 8).to(device.device());
  const auto compile_reads = [&](const Tensor& captured) {
    const std::size_t before = device.read;
    const auto f = jit([captured](const Tensor& a) { return matmul(a, a.t()) + captured; });
    CHECK(std::find(f.compile(x).passes.begin(), f.compile(x).passes.end(), "fold_diagonal_adds") !=
          f.compile(x).passes.end());
    return device.read - before;
  };
  CHECK(compile_reads(D) >= 40 * 40 * sizeof(double));
  // Another jit of it, and a jit of another function capturing it: the answer is kept with D's storage.
  CHECK(compile_reads(D) == 0);
  CHECK(compile_reads(D.reshape({40, 40})) == 0);  // the same storage, seen through another tensor
  // A copy holds the same values in other memory: read again, once.
  const Tensor copy = D + 0.0;
  CHECK(compile_reads(copy) >= 40 * 40 * sizeof(double));
  CHECK(compile_reads(copy) == 0);
  // A tensor made where a freed one may have been is not taken for it: its own values decide, diagonal or not.
  std::size_t reads = 0;
  for (int i = 0; i < 6; ++i) {
    const bool diagonal = i % 2 == 0;
    const Tensor c = ((diagonal ? eye(40) : ones({40, 40})) * static_cast<double>(i + 1)).to(device.device());
    const std::size_t before = device.read;
    const auto f = jit([c](const Tensor& a) { return matmul(a, a.t()) + c; });
    const PlanSummary s = f.compile(x);
    CHECK((std::find(s.passes.begin(), s.passes.end(), "fold_diagonal_adds") != s.passes.end()) == diagonal);
    reads += device.read - before > 0 ? 1 : 0;
    require_close(f(x).to(Device::cpu()), (matmul(x, x.t()) + c).to(Device::cpu()), 1e-12);
  }
  CHECK(reads == 6);
}

TEST_CASE("ops on constants run on the plan's first call, once, not while tracing", "[jit]") {
  const Tensor C = randn({3, 3}, 6);
  const Tensor spd = matmul(C, C.t()) + eye(3);
  const Tensor not_spd = eye(3) * -1.0;
  auto with = [](const Tensor& m) {
    return jit([m](const Tensor& x) { return matmul(cholesky(m), x) + exp(m) * 0.5; });
  };
  const Tensor x = randn({3, 3}, 7);
  // A factorization of a captured constant that fails raises on the call, not while compiling,
  // and the next call tries again (the failure is not kept).
  auto bad = with(not_spd);
  CHECK(bad.compile(x).folded >= 2);
  CHECK_THAT(error_of([&] { (void)bad(x); }), Catch::Contains("cholesky") && Catch::Contains("positive definite"));
  CHECK_THAT(error_of([&] { (void)bad(x); }), Catch::Contains("cholesky"));
  // The folds run on the first call only: later calls run no cholesky or exp (plan steps that run
  // by kernel are not counted by OpCounter; the folds run as eager ops, which are).
  auto good = with(spd);
  (void)good.compile(x);  // the trace records each op once (OpCounter counts that too)
  int first_call = 0, second_call = 0;
  Tensor r1, r2;
  {
    OpCounter ops;
    r1 = good(x);
    first_call = ops.forward("cholesky") + ops.forward("exp");
  }
  {
    OpCounter ops;
    r2 = good(x);
    second_call = ops.forward("cholesky") + ops.forward("exp");
  }
  CHECK(first_call == 2);
  CHECK(second_call == 0);
  const Tensor eager = matmul(cholesky(spd), x) + exp(spd) * 0.5;
  require_close(r1, eager, 1e-14);
  require_close(r2, eager, 1e-14);
  CHECK(good.counters().traces == 1);
}

TEST_CASE("traced code may still read values computed from constants", "[jit]") {
  const Tensor C = randn({4}, 8);
  // sum(C) is deferred while tracing; reading it computes it then, as a constant of the plan.
  auto f = jit([&](const Tensor& x) {
    const double scale = sum(square(C)).item();
    const Tensor batch_of_c = as_batch(reshape(C * 2.0, {4, 1}));  // a constant made a batch while tracing
    return std::pair{x * scale, batch_sum(batch_of_c)};
  });
  const Tensor x = randn({2}, 9);
  const auto [a, b] = f(x);
  require_close(a, x * sum(square(C)).item(), 1e-14);
  require_close(b, reshape(sum(C * 2.0), {1}), 1e-14);
  // A function of constants only is folded whole: its result is computed on the first call.
  auto g = jit([&]() { return sum(exp(C)); });
  CHECK(g.compile().kernels == 0);
  CHECK(g().item() == Approx(sum(exp(C)).item()).epsilon(1e-15));
}

TEST_CASE("a plan keeps its arena across calls and batch sizes, and release_memory hands it back", "[jit]") {
  const Tensor F = randn({6, 4}, 10);
  auto per_example = [&](const Tensor& p) { return mean(exp(matmul(F, square(p)))); };
  auto loss = [&](const Tensor& P) { return mean(vmap(per_example)(P)); };
  auto step = jit(value_and_grad(loss));
  // A plan this small would be recorded (a recording keeps buffers of its own); a whole batch forced as one chunk
  // runs it step by step, on arenas.
  const JitChunkExamples step_by_step(std::int64_t{1} << 40);
  auto check_at = [&](std::int64_t b) {
    const Tensor P = as_batch(randn({b, 4}, 11 + static_cast<std::uint64_t>(b)));
    const auto [v, g] = step(P);
    const auto [ve, ge] = value_and_grad(loss)(P);
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-13));
    require_close(unbatch(g), unbatch(ge), 1e-13);
  };
  check_at(8);
  CHECK(step.counters().arenas == 1);
  for (std::int64_t b : {1, 2, 8, 5, 8}) check_at(b);  // every one fits the arena of 8
  CHECK(step.counters().arenas == 1);
  check_at(16);  // grows it: one more arena, which replaces the first
  CHECK(step.counters().arenas == 2);
  check_at(3);
  CHECK(step.counters().arenas == 2);
  step.release_memory();
  check_at(3);
  CHECK(step.counters().arenas == 3);
  CHECK(step.counters().traces == 1);
}

TEST_CASE("concurrent calls at different batch sizes each get an arena of their own", "[jit]") {
  const Tensor F = randn({12, 4}, 12);
  auto loss = [&](const Tensor& P) {
    return mean(vmap([&](const Tensor& p) { return sum(tanh(matmul(F, p)) * exp(matmul(F, p) * 0.1)); })(P));
  };
  auto step = jit(value_and_grad(loss));
  const std::vector<std::int64_t> sizes = {1, 9, 4, 17};
  std::vector<Tensor> inputs;
  std::vector<double> expected;
  for (std::int64_t b : sizes) {
    inputs.push_back(as_batch(randn({b, 4}, 40 + static_cast<std::uint64_t>(b))));
    expected.push_back(loss(inputs.back()).item());
  }
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 25; ++r) {
        const std::size_t k = (t + static_cast<std::size_t>(r)) % inputs.size();
        const double v = step(inputs[k]).first.item();
        if (std::abs(v - expected[k]) > 1e-12 * std::abs(expected[k])) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) CHECK(w == 0);
  const JitCounters c = step.counters();
  CHECK(c.traces == 1);
  // Never one per call at the same size: at most one per thread and batch size (an arena is
  // allocated only when no idle one fits), not one per call (100).
  CHECK(c.arenas <= static_cast<std::int64_t>(4 * sizes.size()));
}

TEST_CASE("jit(vmap(f)) on a plain [B, k] tensor maps its leading axis (the JAX habit)", "[jit][vmap]") {
  const Tensor W = randn({3, 4}, 13);
  auto f = [&](const Tensor& p) { return tanh(matmul(W, p)) * sum(p); };  // [4] -> [3]
  auto jf = jit(vmap(f));
  const Tensor X3 = randn({3, 4}, 14), X5 = randn({5, 4}, 15);
  const Tensor r3 = jf(X3);
  CHECK(r3.is_batched());
  CHECK(r3.batch_size() == 3);
  require_close(unbatch(r3), unbatch(vmap(f)(X3)), 1e-14);
  (void)jf(randn({3, 4}, 16));
  CHECK(jf.counters().traces == 1);  // the same B: the same plan
  require_close(unbatch(jf(X5)), unbatch(vmap(f)(X5)), 1e-14);
  CHECK(jf.counters().traces == 2);  // a new B is a new plain shape: traced again
  // Batched arguments never retrace: the batch size does not enter the trace.
  auto jb = jit(vmap(f));
  require_close(unbatch(jb(as_batch(X3))), unbatch(vmap(f)(X3)), 1e-14);
  require_close(unbatch(jb(as_batch(X5))), unbatch(vmap(f)(X5)), 1e-14);
  CHECK(jb.counters().traces == 1);
  // Plain results (out_axes 0), gradients through the mapped plain argument, and several arguments.
  require_close(jit(vmap(f, {}, 0))(X5), vmap(f, {}, 0)(X5), 1e-14);
  require_close(jit(vmap(f, {1}, 1))(X5.t()), vmap(f, {1}, 1)(X5.t()), 1e-14);
  auto loss = [&](const Tensor& X) { return mean(vmap(f)(X)); };
  const auto [v, g] = jit(value_and_grad(loss))(X5);
  const auto [ve, ge] = value_and_grad(loss)(X5);
  CHECK_FALSE(g.is_batched());
  CHECK(v.item() == Approx(ve.item()).epsilon(1e-13));
  require_close(g, ge, 1e-13);
  auto two = jit(vmap([](const Tensor& a, const Tensor& b) { return a * b; }));
  require_close(unbatch(two(X5, X5)), unbatch(vmap([](const Tensor& a, const Tensor& b) { return a * b; })(X5, X5)),
                1e-15);
}

TEST_CASE("jit(vmap(f)) on plain tensors: the messages name what was passed", "[jit][vmap][errors]") {
  auto add = [](const Tensor& a, const Tensor& b) { return a + b; };
  CHECK_THAT(
      error_of([&] {
        (void)jit(vmap(add))(randn({3, 2}, 17), randn({4, 2}, 18));
      }),
      Catch::Contains("vmap") && Catch::Contains("different sizes") && Catch::Contains("3") && Catch::Contains("4"));
  // A plain argument fixes the plan's batch size; a batched one of another size is refused by name.
  auto mixed = jit([&](const Tensor& x, const Tensor& P) { return vmap(add)(x, P); });
  CHECK_THAT(error_of([&] {
               (void)mixed(randn({3, 2}, 19), as_batch(randn({5, 2}, 20)));
             }),
             Catch::Contains("batch size 5") && Catch::Contains("plain argument of 3 examples"));
  require_close(unbatch(mixed(randn({3, 2}, 19), as_batch(randn({3, 2}, 20)))), randn({3, 2}, 19) + randn({3, 2}, 20),
                1e-15);
}

TEST_CASE("reading one value of a batched tensor: the message names B and the example shape", "[jit][errors]") {
  const Tensor P = as_batch(randn({4, 3}, 21));
  const std::string item = error_of([&] { (void)P.item(); });
  CHECK_THAT(item, Catch::Contains("item") && Catch::Contains("batch of 4 examples of shape [3]") &&
                       Catch::Contains("to_vector") && Catch::Contains("unbatch"));
  const Tensor S = as_batch(randn({4}, 22));  // 4 scalars: one element each, still 4 values
  CHECK_THAT(error_of([&] { (void)S.item(); }), Catch::Contains("batch of 4 examples of shape []"));
  CHECK(as_batch(randn({1}, 23)).item() == randn({1}, 23).item());  // one example of one element is one value
  CHECK_THAT(error_of([&] { (void)P.at({0}); }), Catch::Contains("at") &&
                                                     Catch::Contains("batch of 4 examples of shape [3]") &&
                                                     Catch::Contains("unbatch"));
  CHECK(unbatch(P).at({2, 1}) == randn({4, 3}, 21).at({2, 1}));
  CHECK_THAT(error_of([&] { (void)P.as_eigen<double>(); }),
             Catch::Contains("as_eigen") && Catch::Contains("batch of 4 examples of shape [3]"));
  // While tracing, B is not known: the message says so.
  CHECK_THAT(error_of([&] { jit([](const Tensor& x) { return x * x.item(); })(P); }),
             Catch::Contains("run-time size under jit"));
}

TEST_CASE("jit: a function that maps a plain argument and takes a batched one runs op by op, as eager", "[jit][vmap]") {
  auto g = [](const Tensor& p) { return tanh(p) * 2.0; };
  auto f = [&](const Tensor& xb, const Tensor& P) { return batch_mean(xb) + sum(vmap(g)(P), {0}); };
  const Tensor P = randn({2, 3}, 60);
  // Eager code allows the two batch sizes to differ.
  const Tensor x2 = as_batch(randn({2, 3}, 61)), x5 = as_batch(randn({5, 3}, 62));
  const Tensor eager5 = f(x5, P);
  CHECK(eager5.batch_size() == 2);
  // A plan has one batch size, P's, where the next call's batched argument may have another: the jitted function runs
  // op by op, whatever the sizes, with eager code's results; explain says why.
  auto jf = jit(f);
  for (const Tensor& x : {x2, x5}) require_close(unbatch(jf(x, P)), unbatch(f(x, P)), 0);
  const std::string plan = jf.explain(x5, P);
  CHECK_THAT(plan, Catch::Contains("op by op") && Catch::Contains("maps over a plain argument of 2 examples"));
  // A plan has one batch size: both batched, or both plain, of one size, works and equals eager.
  auto both_batched = jit([&](const Tensor& xb, const Tensor& Pb) { return batch_mean(xb) + sum(g(Pb), {0}); });
  require_close(unbatch(both_batched(x2, as_batch(P))), unbatch(f(x2, P)), 1e-14);
  auto both_plain = jit([&](const Tensor& X, const Tensor& Pp) { return f(as_batch(X), Pp); });
  require_close(unbatch(both_plain(unbatch(x2), P)), unbatch(f(x2, P)), 1e-14);
}

TEST_CASE("jit: unbatch of a value computed from as_batch of a plain argument traces and equals eager", "[jit][vmap]") {
  auto f = [](const Tensor& p) { return unbatch(exp(as_batch(p) * 2.0) + as_batch(p)); };
  auto jf = jit(f);
  for (std::int64_t b : {2, 4}) {
    const Tensor p = randn({b, 3}, 70 + static_cast<std::uint64_t>(b));
    const Tensor got = jf(p);
    CHECK_FALSE(got.is_batched());
    CHECK(got.shape() == Shape{b, 3});
    require_close(got, f(p), 1e-14);
    const std::vector<double> in = p.to_vector<double>(), out = got.to_vector<double>();
    for (std::size_t k = 0; k < in.size(); ++k) CHECK(std::abs(out[k] - (std::exp(2.0 * in[k]) + in[k])) < 1e-12);
  }
  CHECK(jf.counters().traces == 2);
  // Gradients through it, under jit, against eager.
  auto loss = [&](const Tensor& p) { return sum(square(f(p))); };
  const Tensor p = randn({3, 2}, 75);
  require_close(jit(grad(loss))(p), grad(loss)(p), 1e-12);
  // A batched argument's batch size stays a run-time value: its unbatch still raises.
  CHECK_THAT(error_of([&] { (void)jit([](const Tensor& x) { return unbatch(x * 2.0); })(as_batch(p)); }),
             Catch::Contains("run-time batch size"));
}

TEST_CASE("a value computed from constants that escapes its trace can be read from several threads", "[jit]") {
  const Tensor C = randn({64, 64}, 31);
  Tensor escaped;
  auto f = jit([&](const Tensor& x) {
    escaped = exp(C) * 2.0;  // constants only: recorded, not computed, while tracing
    return x + 1.0;
  });
  (void)f.compile(randn({3}, 32));
  REQUIRE(escaped.is_symbolic());  // not computed yet: the first reader computes it, the others wait
  const std::vector<double> want = (exp(C) * 2.0).to_vector<double>();
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = escaped.to_vector<double>(); });
  for (std::thread& t : threads) t.join();
  for (const std::vector<double>& g : got) CHECK(g == want);
}

TEST_CASE("8 threads x 1000 calls at random batch sizes equal single-threaded calls bit for bit", "[jit][threads]") {
  // A small GP likelihood with a Cholesky per example and a shared parameter's gradient (a reduction
  // over the batch, summed by chunks): the chunks depend on B alone, so every call at one B has the
  // same bits whichever thread makes it and whatever runs beside it.
  const Tensor F = randn({8, 3}, 71), eye8 = eye(8), ones8 = ones({8});
  auto loss = [&](const Tensor& p, const Tensor& shared) {
    const Tensor A = matmul(F * square(p), F.t()) + eye8 * exp(shared);
    return mean(cho_solve(cho_factor(A), ones8));
  };
  auto step = jit([&](const Tensor& P, const Tensor& shared) {
    return value_and_grad(
        [&](const Tensor& Q, const Tensor& s) {
          return batch_sum(vmap([&](const Tensor& q) { return loss(q, s); })(Q));
        },
        {0, 1})(P, shared);
  });
  const Tensor shared = full({}, 0.3);
  constexpr std::int64_t most = 48;
  std::vector<Tensor> inputs;
  std::vector<std::vector<std::vector<double>>> expected;  // by B - 1: value, dP, dshared
  for (std::int64_t b = 1; b <= most; ++b) {
    inputs.push_back(as_batch(randn({b, 3}, 500 + static_cast<std::uint64_t>(b))));
    const auto [value, grads] = step(inputs.back(), shared);
    expected.push_back({value.to_vector<double>(), grads[0].to_vector<double>(), grads[1].to_vector<double>()});
  }
  const std::int64_t arenas_before = step.counters().arenas;
  std::vector<int> wrong(8, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::uint64_t state = 88172645463325252ull + t;  // xorshift: each thread its own sequence of sizes
      for (int r = 0; r < 1000; ++r) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        const std::size_t k = static_cast<std::size_t>(state % most);
        const auto [value, grads] = step(inputs[k], shared);
        if (value.to_vector<double>() != expected[k][0] || grads[0].to_vector<double>() != expected[k][1] ||
            grads[1].to_vector<double>() != expected[k][2])
          ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) CHECK(w == 0);
  const JitCounters c = step.counters();
  CHECK(c.traces == 1);
  CHECK(c.calls == most + 8000);
  // Memory stays flat: arenas are kept and reused, allocated only when no idle one fits (a thread's
  // arena grows a few times as it meets larger sizes), never one per call (8000).
  CHECK(c.arenas - arenas_before <= 8 * 8);
}
