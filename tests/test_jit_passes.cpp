// jit's pipeline of passes: each optional pass, on a small program where its identity holds, changes
// the plan and is named in PlanSummary::passes; turned off (JitOptions::passes, VTAPE_JIT_PASSES)
// it is not, and the results agree; on a program where its identity does not hold it changes
// nothing. The table itself: names unique, documented in docs/ARCHITECTURE.md, bad selections refused.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "../autodiff/jit/plan.hpp"
#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;

namespace {

bool changed_by(const PlanSummary& s, const std::string& pass) {
  return std::find(s.passes.begin(), s.passes.end(), pass) != s.passes.end();
}

// Every element of the results within 1e-10 (relative), the passes being exact up to rounding.
void require_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const std::vector<double> g = got[k].to_vector<double>(), w = want[k].to_vector<double>();
    REQUIRE(g.size() == w.size());
    for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(std::abs(g[i] - w[i]) <= 1e-10 * (1 + std::abs(w[i])));
  }
}

// A k x n matrix of zeros with a 1 in column columns[r] of row r.
Tensor indicator_matrix(const std::vector<std::int64_t>& columns, std::int64_t n, DType dtype = DType::f64) {
  const auto k = static_cast<std::int64_t>(columns.size());
  std::vector<double> s(static_cast<std::size_t>(k * n), 0.0);
  for (std::int64_t r = 0; r < k; ++r) s[static_cast<std::size_t>(r * n + columns[static_cast<std::size_t>(r)])] = 1.0;
  return astype(Tensor::from_vector(s, {k, n}), dtype);
}

using Program = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct Case {
  std::string pass;
  Program fires;  // a program on which the pass changes the plan
  std::vector<Tensor> fires_on;
  Program refuses;  // one with the pattern, one of its preconditions broken: the pass changes nothing
  std::vector<Tensor> refuses_on;
};

// The planner's cache for these plans (JitOptions::cache_bytes): split_into_segments and the chunks decide by it, so
// that the cases and explain's chunks do not depend on the host's.
constexpr std::size_t planner_cache = std::size_t{256} << 10;

// Compiles and runs a program with `passes` selected; returns the summary and the results.
std::pair<PlanSummary, std::vector<Tensor>> run(const Program& p, const std::vector<Tensor>& args,
                                                const std::string& passes) {
  auto f = jit(
      [&](const Tensor& a, const Tensor& b, const Tensor& c) {
        std::vector<Tensor> in{a, b, c};
        in.resize(args.size());
        return p(in);
      },
      JitOptions{passes, planner_cache});
  std::vector<Tensor> in = args;
  in.resize(3, zeros({}));
  return {f.compile(in[0], in[1], in[2]), f(in[0], in[1], in[2])};
}

std::vector<Case> cases() {
  // split_into_segments pays where the shared matrix is large against the cache: of order 2 sqrt(cache / 8) and more.
  const auto shared_order = static_cast<std::int64_t>(2 * std::sqrt(planner_cache / 8));
  const Tensor x53 = randn({5, 3}, 1), y54 = randn({5, 4}, 2), x35 = randn({3, 5}, 3);
  const Tensor p = randn({50, 2}, 4), q = randn({2, 50}, 5), y = randn({50, 50}, 6);
  const Tensor f = randn({6, 4}, 7), ft = f.t(), q4 = randn({4}, 8);
  std::vector<double> off = ft.to_vector<double>();
  off[5] += 1e-3;
  const Tensor off_t = Tensor::from_vector(off, {4, 6});
  const Tensor x43 = randn({4, 3}, 9), z43 = randn({4, 3}, 10), eye4 = eye(4), ones44 = ones({4, 4});
  const Tensor ps = randn({3, 6}, 11), big_f = randn({12, 6}, 12), ones_n = ones({12}), twos = full({12}, 2.0);
  const auto a_of = [=](const Tensor& r) { return matmul(big_f * square(r), big_f.t()) + eye(12); };
  const Tensor u = randn({40, 2}, 13), w = randn({2, 7}, 14), c = randn({40, 7}, 15);
  const Tensor x200 = randn({200, 3}, 18), x100 = randn({100, 3}, 19), s = full({}, 0.7);
  const Tensor half = full({}, -0.5), half2 = full({}, -0.5), quarter = full({}, -0.25), x8 = randn({8}, 20);
  const Tensor big = randn({64, 64}, 21), spd = matmul(x43, x43.t()) + eye4;
  const Tensor indicator = indicator_matrix({2, 0, 3, 3, 1, 0, 2}, 4), not_indicator = indicator * 2.0;
  using V = std::vector<Tensor>;
  return {
      {"fold_transposes_into_matmuls",
       [](const V& a) { return V{matmul(a[0].t(), a[1])}; },
       {x53, y54},
       // A transpose read by an elementwise step, of a matrix that is not symmetric: no GEMM flag can take it.
       [](const V& a) { return V{a[0].t() * a[1]}; },
       {x53, x35}},
      {"fold_broadcasts_into_elementwise",
       [](const V& a) { return V{broadcast_to(reshape(sum(a[0]), {1}), {8}) * a[0]}; },
       {x8},
       [](const V& a) { return V{exp(broadcast_to(reshape(sum(a[0]), {1}), {8})) * a[0]}; },
       {x8}},
      {"take_indicator_products",
       [=](const V& a) { return V{matmul(a[0], indicator)}; },
       {as_batch(randn({3, 7}, 29))},
       [=](const V& a) { return V{matmul(a[0], not_indicator)}; },
       {as_batch(randn({3, 7}, 29))}},
      {"reassociate_matmuls",
       [](const V& a) { return V{matmul(matmul(a[0], a[1]), a[2])}; },
       {p, q, y},
       [](const V& a) { return V{matmul(matmul(a[0], a[1]), a[2])}; },
       {q, p, randn({2, 2}, 22)}},
      {"mark_symmetric_products",
       [](const V& a) { return V{matmul(a[0], a[0].t())}; },
       {x43},
       [](const V& a) { return V{matmul(a[0], a[1].t())}; },
       {x43, z43}},
      {"fold_diagonal_adds",
       [=](const V& a) { return V{matmul(a[0], a[0].t()) + eye4}; },
       {x43},
       [=](const V& a) { return V{matmul(a[0], a[0].t()) + ones44}; },
       {x43}},
      {"scale_repeated_solves",
       [=](const V& a) {
         auto [v, g] =
             vmap(value_and_grad([&](const Tensor& r) { return mean(cho_solve(cho_factor(a_of(r)), ones_n)); }))(a[0]);
         return V{v, g};
       },
       {as_batch(ps)},
       [=](const V& a) {
         auto [v, g] =
             vmap(value_and_grad([&](const Tensor& r) { return mean(cho_solve(cho_factor(a_of(r)), twos)); }))(a[0]);
         return V{v, g};
       },
       {as_batch(ps)}},
      {"contract_low_rank_row_sums",
       [](const V& a) { return V{sum(matmul(a[0], a[1]) * a[2], {0})}; },
       {u, w, c},
       [](const V& a) { return V{sum(matmul(a[0], a[1]) * a[2], {0})}; },
       {randn({4, 6}, 23), randn({6, 7}, 24), randn({4, 7}, 25)}},
      {"move_scalings_out_of_symmetric_sums",
       [](const V& a) { return V{sum(matmul(a[0], a[0].t()) * a[1])}; },
       {x200, s},
       [](const V& a) { return V{sum(matmul(a[0], a[0].t()) * a[1])}; },
       {x100, s}},
      {"merge_common_steps",
       [=](const V& a) { return V{a[0] * half + a[0] * half2}; },
       {x8},
       [=](const V& a) { return V{a[0] * half + a[0] * quarter}; },
       {x8}},
      {"eliminate_dead_steps",
       [](const V& a) { return V{matmul(a[0].t(), a[1])}; },
       {x53, y54},
       // The transpose the matmul no longer reads is a result too: not dead.
       [](const V& a) {
         return V{matmul(a[0].t(), a[1]), a[0].t()};
       },
       {x53, y54}},
      {"mark_lower_only_outputs",
       [=](const V& a) { return V{logdet(cho_factor(matmul(a[0], a[0].t()) + eye4))}; },
       {x43},
       [](const V& a) { return V{cholesky(a[0])}; },
       {spd}},
      {"fold_constants",
       [=](const V& a) { return V{a[0] * exp(half)}; },
       {x8},
       [=](const V& a) { return V{a[0] * half}; },
       {x8}},
      {"order_for_chunks",
       [](const V& a) { return V{batch_sum(exp(a[0]))}; },
       {as_batch(big)},
       // A batched step reads the reduction over the batch: it needs the whole batch's sum first.
       [](const V& a) { return V{batch_sum(exp(a[0]) * batch_sum(a[0]))}; },
       {as_batch(big)}},
      {"split_into_segments",
       [](const V& a) { return V{batch_sum(exp(matmul(exp(a[0]), a[1])))}; },
       {as_batch(randn({4, shared_order}, 26)), randn({shared_order, shared_order}, 27) * 0.01},
       [](const V& a) { return V{batch_sum(exp(matmul(exp(a[0]), a[1])))}; },
       {as_batch(randn({4, shared_order}, 26)), randn({shared_order, 4}, 28) * 0.01}},
      {"fuse_elementwise",
       [](const V& a) { return V{exp(a[0] * 2.0 + 1.0) * a[0]}; },
       {big},
       // Elementwise steps of the same size, but no two adjacent: a product stands between them.
       [](const V& a) { return V{exp(matmul(exp(a[0]), a[0]))}; },
       {big}},
  };
}

}  // namespace

TEST_CASE("every optional pass fires where its identity holds, keeps the values, and can be turned off",
          "[jit][passes]") {
  std::vector<std::string> tested;
  for (const Case& c : cases()) {
    INFO(c.pass);
    tested.push_back(c.pass);
    const auto [on, on_values] = run(c.fires, c.fires_on, "");
    CHECK(changed_by(on, c.pass));
    CHECK(on.rewrites_by(c.pass) >= 1);
    // The rewrites are counted under the names of the passes that changed the plan, and only those.
    CHECK(on.rewrites.size() == on.passes.size());
    for (const std::string& p : on.passes) CHECK(on.rewrites_by(p) >= 1);
    const auto [off, off_values] = run(c.fires, c.fires_on, "-" + c.pass);
    CHECK(!changed_by(off, c.pass));
    CHECK(off.rewrites_by(c.pass) == 0);
    require_same(on_values, off_values);
    const auto [refused, refused_values] = run(c.refuses, c.refuses_on, "");
    CHECK(!changed_by(refused, c.pass));
    const auto [refused_off, refused_off_values] = run(c.refuses, c.refuses_on, "-" + c.pass);
    require_same(refused_values, refused_off_values);
  }
  // Every optional pass of the table has its case.
  for (const detail::Pass& p : detail::plan_passes())
    if (p.optional) CHECK(std::find(tested.begin(), tested.end(), p.name) != tested.end());
}

namespace {

// The plan a program's jit builds for these arguments, and the text of it dumped (VTAPE_JIT_DUMP) as traced and
// after every pass that changed it, in the pipeline's order: (pass, text).
std::pair<std::shared_ptr<const detail::Plan>, std::vector<std::pair<std::string, std::string>>> plan_and_dumps(
    const Program& p, const std::vector<Tensor>& args) {
  char dir[] = "/tmp/vtape_dump_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  ::setenv("VTAPE_JIT_DUMP", dir, 1);
  detail::JitCache cache(JitOptions{.cache_bytes = planner_cache});
  const auto entry = cache.get(
      args,
      [&](const std::vector<Tensor>& symbolic) {
        return detail::Traced{p(symbolic), {}};
      },
      false);
  ::unsetenv("VTAPE_JIT_DUMP");
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') files.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, std::string>> dumps;
  for (const std::string& f : files) {
    const std::string path = std::string(dir) + "/" + f;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    // plan<N>-<KK>-<pass>.txt
    const std::size_t dash = f.find('-', f.find('-') + 1);
    dumps.emplace_back(f.substr(dash + 1, f.size() - dash - 5), text.str());
    CHECK(f.starts_with("plan"));
    std::remove(path.c_str());
  }
  ::rmdir(dir);
  return {entry->plan, dumps};
}

std::string without_passes_marks(std::string text) {
  for (std::size_t at; (at = text.find(" by=")) != std::string::npos;) text.erase(at, text.find('\n', at) - at);
  return text;
}

}  // namespace

TEST_CASE("plan text: every case's plans read back, run, and each pass re-run on its text gives the pipeline's",
          "[jit][passes][text]") {
  for (const Case& c : cases())
    for (const bool firing : {true, false}) {
      INFO(c.pass << (firing ? " (firing)" : " (refusing)"));
      const std::vector<Tensor>& args = firing ? c.fires_on : c.refuses_on;
      const auto [plan, dumps] = plan_and_dumps(firing ? c.fires : c.refuses, args);
      std::map<int, Tensor> constants;
      for (std::size_t v = 0; v < plan->values.size(); ++v)
        if (plan->values[v].kind == detail::PlanValue::Kind::constant)
          constants.emplace(static_cast<int>(v), plan->values[v].constant);
      // The finished plan: the same text back, and the same results when the plan read from it runs.
      const std::string text = detail::plan_text(*plan);
      const std::shared_ptr<detail::Plan> read = detail::parse_plan(text, constants);
      CHECK(detail::plan_text(*read) == text);
      detail::verify_plan(*read, "parse_plan");
      require_same(detail::run_plan(*read, args), detail::run_plan(*plan, args));
      // The dumps: the trace first, the finished plan last; each pass on the text before it gives its own.
      REQUIRE(dumps.size() >= 2);
      CHECK(dumps.front().first == "trace");
      CHECK(without_passes_marks(dumps.back().second) == without_passes_marks(text));
      for (std::size_t k = 1; k < dumps.size(); ++k) {
        INFO("pass " << dumps[k].first);
        const std::shared_ptr<detail::Plan> before = detail::parse_plan(dumps[k - 1].second, constants);
        detail::run_pass(*before, dumps[k].first);
        CHECK(without_passes_marks(detail::plan_text(*before)) == without_passes_marks(dumps[k].second));
      }
      // The pass of the case is among the dumps exactly where it changed the plan.
      const bool dumped = std::any_of(dumps.begin(), dumps.end(), [&](const auto& d) { return d.first == c.pass; });
      CHECK(dumped == firing);
    }
}

TEST_CASE("the pass table: unique names, each in docs/ARCHITECTURE.md, selections checked", "[jit][passes]") {
  const std::string path = VTAPE_SOURCE_DIR "/docs/ARCHITECTURE.md";
  std::ifstream doc(path);
  REQUIRE(doc.good());
  std::stringstream text;
  text << doc.rdbuf();
  // The document's list of the stages is the table's, as markdown (VTAPE_UPDATE_DOCS=1 writes it there).
  const std::string begin = "<!-- pass table:", end = "<!-- end of pass table -->";
  const std::size_t from = text.str().find('\n', text.str().find(begin)) + 1, to = text.str().find(end);
  REQUIRE(text.str().find(begin) != std::string::npos);
  REQUIRE(to != std::string::npos);
  const std::string generated = detail::pass_table_markdown();
  if (const char* update = std::getenv("VTAPE_UPDATE_DOCS"); update && std::string(update) == "1") {
    std::ofstream(path) << text.str().substr(0, from) + generated + text.str().substr(to);
  } else {
    INFO("docs/ARCHITECTURE.md's pass table differs from plan_passes(); VTAPE_UPDATE_DOCS=1 writes this one:\n"
         << generated);
    CHECK(text.str().substr(from, to - from) == generated);
  }
  const std::vector<detail::Pass>& passes = detail::plan_passes();
  for (std::size_t i = 0; i < passes.size(); ++i) {
    INFO(passes[i].name);
    CHECK(text.str().find(std::string("`") + passes[i].name + "`") != std::string::npos);
    for (std::size_t j = 0; j < i; ++j) CHECK(std::string(passes[i].name) != passes[j].name);
  }
  const Tensor x = randn({3, 3}, 30);
  auto f = [](const Tensor& a) { return matmul(a.t(), a); };
  CHECK(error_of([&] { jit(f, JitOptions{"-no_such_pass"}).compile(x); })
            .find("JitOptions::passes names an unknown pass \"no_such_pass\"; the passes are "
                  "fold_transposes_into_matmuls,") != std::string::npos);
  CHECK(error_of([&] {
          jit(f, JitOptions{"-plan_memory"}).compile(x);
        }).find("turns off plan_memory, which every plan needs") != std::string::npos);
  CHECK(error_of([&] { jit(f, JitOptions{"reassociate_matmuls"}).compile(x); }).find("-name (off) or +name (on)") !=
        std::string::npos);
  // Several at once, spaces or commas; and the environment's selection, which the option overrides.
  const PlanSummary both = jit(f, JitOptions{"-fold_transposes_into_matmuls, -mark_symmetric_products"}).compile(x);
  CHECK(!changed_by(both, "fold_transposes_into_matmuls"));
  CHECK(!changed_by(both, "mark_symmetric_products"));
  ::setenv("VTAPE_JIT_PASSES", "-fold_transposes_into_matmuls", 1);
  const PlanSummary from_env = jit(f).compile(x);
  const PlanSummary overridden = jit(f, JitOptions{"+fold_transposes_into_matmuls"}).compile(x);
  ::unsetenv("VTAPE_JIT_PASSES");
  CHECK(!changed_by(from_env, "fold_transposes_into_matmuls"));
  CHECK(changed_by(overridden, "fold_transposes_into_matmuls"));
  CHECK(changed_by(jit(f).compile(x), "fold_transposes_into_matmuls"));
}

TEST_CASE("explain prints the plan a call runs, step by step, with the pass that made each step", "[jit][passes]") {
  const Tensor big_f = randn({40, 6}, 40), ps = randn({512, 6}, 41), ones_n = ones({40});
  auto loss = [&](const Tensor& r) {
    return mean(cho_solve(cho_factor(matmul(big_f * square(r), big_f.t()) + eye(40)), ones_n));
  };
  const auto step = jit(vmap(value_and_grad(loss)), JitOptions{.cache_bytes = planner_cache});
  const std::string text = step.explain(as_batch(ps));
  INFO(text);
  const PlanSummary summary = step.compile(as_batch(ps));
  // A header, the passes, a line per step and per folded step.
  CHECK(text.find("plan on cpu: " + std::to_string(summary.steps) + " steps") == 0);
  CHECK(text.find("at B = 512: steps ") != std::string::npos);
  CHECK(text.find("passes that changed it: fold_transposes_into_matmuls") != std::string::npos);
  std::int64_t lines = std::count(text.begin(), text.end(), '\n');
  CHECK(lines == 4 + 1 + summary.steps + summary.folded);
  CHECK(text.find("cho_factor") != std::string::npos);
  CHECK(text.find("arg0 float64[B,6]") != std::string::npos);
  CHECK(text.find("per chunk") != std::string::npos);
  CHECK(text.find("  reassociate_matmuls") != std::string::npos);  // a step it made
  CHECK(text.find("  trace") != std::string::npos);
  CHECK(text.find("result") != std::string::npos);
  // explain traces as compile does: no call counted, no second trace.
  CHECK(step.counters().calls == 0);
  CHECK(step.counters().traces == 1);
  // Unbatched arguments: no batch size, every step once.
  const std::string plain = jit(loss).explain(reshape(slice(ps, 0, 0, 1), {6}));
  CHECK(plain.find("at B =") == std::string::npos);
  CHECK(plain.find("per chunk") == std::string::npos);
}

TEST_CASE("take_indicator_products: products by an indicator matrix as takes and segment sums", "[jit][passes]") {
  // S [9, 4]: row r has its 1 in column c_r (column 1 empty).
  const std::vector<std::int64_t> c = {2, 0, 3, 3, 0, 2, 2, 0, 3};
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(name_of(dtype));
    const Tensor S = indicator_matrix(c, 4, dtype);
    const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
    // Each form on a batch of 5, as x [k] S, x [.., n] S^T, S X, S^T X, and the gradient through all of them.
    const Tensor xk = randn({5, 9}, 50, dtype), xn = randn({5, 2, 4}, 51, dtype), Xn = randn({5, 4, 3}, 52, dtype),
                 Xk = randn({5, 9, 3}, 53, dtype);
    auto forms = [&](const Tensor& a, const Tensor& b, const Tensor& p, const Tensor& q) {
      return std::vector<Tensor>{matmul(a, S), matmul(b, S, false, true), matmul(S, p), matmul(S, q, true, false),
                                 matmul(b, S.t())};
    };
    auto loss = [&](const Tensor& a, const Tensor& b, const Tensor& p, const Tensor& q) {
      Tensor total = zeros({}, dtype);
      for (const Tensor& t : forms(a, b, p, q)) total = total + sum(sin(t));
      return total;
    };
    const std::vector<Tensor> args{as_batch(xk), as_batch(xn), as_batch(Xn), as_batch(Xk)};
    auto f = jit(vmap(forms));
    auto off = jit(vmap(forms), JitOptions{"-take_indicator_products"});
    CHECK(changed_by(f.compile(args[0], args[1], args[2], args[3]), "take_indicator_products"));
    CHECK(!changed_by(off.compile(args[0], args[1], args[2], args[3]), "take_indicator_products"));
    const std::vector<Tensor> got = f(args[0], args[1], args[2], args[3]);
    const std::vector<Tensor> want = vmap(forms)(args[0], args[1], args[2], args[3]);
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      INFO("form " << k);
      vt::testing::require_close(got[k], want[k].to_vector<double>(), tol);
      CHECK(f.explain(args[0], args[1], args[2], args[3]).find("matmul ") == std::string::npos);
    }
    // Gradients through every form, against the plan without the pass and against eager code.
    auto g = jit(vmap(grad(loss, {0, 1, 2, 3})));
    const auto got_g = g(args[0], args[1], args[2], args[3]);
    const auto want_g = vmap(grad(loss, {0, 1, 2, 3}))(args[0], args[1], args[2], args[3]);
    for (std::size_t k = 0; k < 4; ++k) vt::testing::require_close(got_g[k], want_g[k].to_vector<double>(), tol);
  }
  // Matrices that are no indicator keep their products: a 2, two 1s in a row, a row of zeros, a -1; and x S for a
  // matrix x (a sum along its rows' last axis).
  const Tensor S = indicator_matrix(c, 4);
  std::vector<double> entries = S.to_vector<double>();
  const auto with = [&](std::size_t at, double v) {
    std::vector<double> e = entries;
    e[at] = v;
    return Tensor::from_vector(e, {9, 4});
  };
  const Tensor x = as_batch(randn({5, 9}, 54));
  for (const Tensor& bad : {with(2, 2.0), with(1, 1.0), with(2, 0.0), with(2, -1.0)}) {
    auto h = jit(vmap([&](const Tensor& a) { return matmul(a, bad); }));
    CHECK(!changed_by(h.compile(x), "take_indicator_products"));
    vt::testing::require_close(h(x), vmap([&](const Tensor& a) { return matmul(a, bad); })(x).to_vector<double>(),
                               1e-14);
  }
  auto rows = jit(vmap([&](const Tensor& a) { return matmul(a, S); }));
  CHECK(!changed_by(rows.compile(as_batch(randn({5, 2, 9}, 55))), "take_indicator_products"));
}
