#include <vtape/core/eigen.hpp>

#include <Eigen/Dense>
#include <array>

#include "forwarding_backend.hpp"
#include "gradcheck.hpp"
#include "threads.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::on_threads;
using vt::testing::require_close;

TEST_CASE("matmul agrees with Eigen for matrix-matrix, matrix-vector, vector-matrix and dot", "[matmul]") {
  const Tensor a = randn({3, 4}, 1), b = randn({4, 2}, 2), v = randn({4}, 3), w = randn({3}, 4);
  const Eigen::MatrixXd ea = a.as_eigen<double>(), eb = b.as_eigen<double>();
  const Eigen::VectorXd ev = v.as_eigen<double>(), ew = w.as_eigen<double>();
  const Eigen::MatrixXd ab = ea * eb;
  require_close(matmul(a, b), Tensor::from_eigen(ab));
  const Eigen::VectorXd av = ea * ev, wa = ea.transpose() * ew;
  require_close(matmul(a, v), Tensor::from_eigen(av));
  require_close(matmul(w, a), Tensor::from_eigen(wa));
  CHECK(matmul(v, v).ndim() == 0);
  CHECK(matmul(v, v).item() == Approx(ev.dot(ev)));
}

TEST_CASE("matmul broadcasts leading batch axes", "[matmul]") {
  const Tensor a = randn({2, 1, 3, 4}, 5), b = randn({5, 4, 2}, 6);
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 5, 3, 2});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 5; ++j) {
      const Tensor ai = reshape(slice(a, 0, i, i + 1), {3, 4});
      const Tensor bj = reshape(slice(b, 0, j, j + 1), {4, 2});
      const Tensor cij = reshape(slice(slice(c, 0, i, i + 1), 1, j, j + 1), {3, 2});
      require_close(cij, matmul(ai, bj), 1e-12);
    }
  CHECK(matmul(randn({7, 3, 4}, 7), randn({4}, 8)).shape() == Shape{7, 3});
  CHECK(matmul(randn({4}, 8), randn({7, 4, 3}, 7)).shape() == Shape{7, 3});
}

TEST_CASE("matmul gradients match finite differences", "[matmul][grad]") {
  const std::vector<std::pair<Shape, Shape>> cases = {{{3, 4}, {4, 2}}, {{3, 4}, {4}},       {{4}, {4, 2}},
                                                      {{4}, {4}},       {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
                                                      {{1, 1}, {1, 1}}, {{5, 4}, {2, 4, 1}}};
  for (const auto& [sa, sb] : cases) {
    INFO("matmul of " << to_string(sa) << " and " << to_string(sb));
    check_gradients([](auto& a) { return matmul(a[0], a[1]); }, {randn(sa, 9), randn(sb, 10)});
  }
}

TEST_CASE("matmul in float32", "[matmul]") {
  const Tensor a = randn({3, 4}, 1, DType::f32), b = randn({4, 2}, 2, DType::f32);
  const Tensor c = matmul(a, b);
  CHECK(c.dtype() == DType::f32);
  require_close(c, matmul(a.astype(DType::f64), b.astype(DType::f64)), 1e-5);
}

// ---------------------------------------------------------------- a batch sharing one operand
namespace {

// A device that computes on the CPU and keeps every GEMM's arguments: how many GEMMs an op ran,
// and over how many rows.
class GemmCounter final : public vt::testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void gemm(const GemmArgs& args) override {
    gemms.push_back(args);
    ForwardingBackend::gemm(args);
  }

  std::vector<GemmArgs> gemms;
};

const Device counted = Device::cuda(7);

// Row i of a plain tensor, and example i of x (x itself when unbatched).
Tensor row(const Tensor& x, std::int64_t i) {
  return reshape(slice(x, 0, i, i + 1), Shape(x.shape().begin() + 1, x.shape().end()));
}
Tensor example(const Tensor& x, std::int64_t i) { return x.is_batched() ? row(unbatch(x), i) : x; }

// A per-example operand of rank 1 or 2 as an Eigen matrix: a vector is a row on the left, a
// column on the right.
Eigen::MatrixXd matrix_of(const Tensor& x, bool left) {
  const Eigen::MatrixXd m = x.as_eigen<double>();  // rank 1 gives a column
  return x.ndim() == 1 && left ? Eigen::MatrixXd(m.transpose()) : m;
}

// op(a_i) op(b_i) for every example, by Eigen, flattened batch first.
std::vector<double> per_example_products(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const std::int64_t batch = a.is_batched() ? a.batch_size() : b.batch_size();
  std::vector<double> out;
  for (std::int64_t i = 0; i < batch; ++i) {
    Eigen::MatrixXd ea = matrix_of(example(a, i), true), eb = matrix_of(example(b, i), false);
    if (ta) ea.transposeInPlace();
    if (tb) eb.transposeInPlace();
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c = ea * eb;
    out.insert(out.end(), c.data(), c.data() + c.size());
  }
  return out;
}

struct SharedCase {
  std::string name;
  Shape a, b;      // per example
  bool a_batched;  // the other operand is shared
  bool ta = false, tb = false;
  std::int64_t rows;  // the folded GEMM's rows per example (0: not folded)
};

// A batch sharing one operand, in the layouts that fold into one GEMM (x_i W, x_i W^T, W x_i,
// W^T x_i, X_i W) and forms whose layout cannot be folded (they keep one GEMM per example).
std::vector<SharedCase> shared_cases() {
  return {{"vectors times a shared matrix", {7}, {7, 5}, true, false, false, 1},
          {"vectors times a shared matrix transposed", {7}, {5, 7}, true, false, true, 1},
          {"matrices times a shared matrix", {3, 7}, {7, 5}, true, false, false, 3},
          {"matrices times a shared matrix transposed", {3, 7}, {5, 7}, true, false, true, 3},
          {"a shared matrix times vectors", {5, 7}, {7}, false, false, false, 1},
          {"a shared matrix transposed times vectors", {7, 5}, {7}, false, true, false, 1},
          {"a shared matrix times one-column matrices", {5, 7}, {7, 1}, false, false, false, 1},
          {"a shared vector times matrices transposed", {7}, {4, 7}, false, false, true, 4},
          {"vectors dotted with a shared vector", {7}, {7}, true, false, false, 1},
          {"a shared matrix times matrices (not folded)", {5, 7}, {7, 3}, false, false, false, 0},
          {"transposed matrices times a shared matrix (not folded)", {7, 3}, {7, 5}, true, true, false, 0},
          {"a shared vector times matrices (not folded)", {7}, {7, 4}, false, false, false, 0}};
}

}  // namespace

TEST_CASE("a batch sharing one matmul operand is one GEMM, with the per-example products' values", "[matmul]") {
  GemmCounter device(counted);
  for (const SharedCase& c : shared_cases())
    for (std::int64_t batch : {1, 4}) {
      INFO(c.name << ", B = " << batch);
      Shape batched = c.a_batched ? c.a : c.b;
      batched.insert(batched.begin(), batch);
      const Tensor x = as_batch(randn(batched, 1)), w = randn(c.a_batched ? c.b : c.a, 2);
      const Tensor a = c.a_batched ? x : w, b = c.a_batched ? w : x;
      device.gemms.clear();
      const Tensor out = matmul(a.to(counted), b.to(counted), c.ta, c.tb);
      CHECK(out.is_batched());
      require_close(out, per_example_products(a, b, c.ta, c.tb), 1e-12);
      REQUIRE(device.gemms.size() == 1);
      const GemmArgs& g = device.gemms[0];
      if (c.rows > 0) {
        CHECK(g.count == 1);
        if (batch > 1) CHECK(g.m == batch * c.rows);  // B = 1: the product as it is
      } else {
        CHECK(g.count == batch);
      }
    }
}

TEST_CASE("matmul with a shared operand: gradients of both by finite differences", "[matmul][grad]") {
  for (const SharedCase& c : shared_cases()) {
    INFO(c.name);
    Shape batched = c.a_batched ? c.a : c.b;
    batched.insert(batched.begin(), 3);
    // The batched operand enters as a plain [B, ...] tensor made a batch inside, so that finite
    // differences can perturb it; the loss sums over the batch.
    const bool ta = c.ta, tb = c.tb, a_batched = c.a_batched;
    check_gradients(
        [=](auto& v) {
          const Tensor x = as_batch(v[0]);
          return a_batched ? matmul(x, v[1], ta, tb) : matmul(v[1], x, ta, tb);
        },
        {randn(batched, 3), randn(c.a_batched ? c.b : c.a, 4)});
  }
  // Shared operands with leading axes of their own, and batched ones with several matrices each.
  check_gradients([](auto& v) { return matmul(as_batch(v[0]), v[1]); }, {randn({2, 3, 2, 4}, 5), randn({4, 5}, 6)});
  check_gradients([](auto& v) { return matmul(v[1], as_batch(v[0])); }, {randn({2, 3, 4}, 7), randn({2, 5, 3}, 8)});
  check_gradients([](auto& v) { return matmul(v[1], as_batch(v[0])); }, {randn({2, 3, 4, 1}, 9), randn({5, 4}, 10)});
  // Second order: the shared operand's summed cotangent (one GEMM over the batch) differentiated.
  check_gradients(
      [](auto& v) {
        return grad([&](const Tensor& w) { return sum(square(matmul(as_batch(v[0]), w, false, true))); })(v[1]);
      },
      {randn({3, 4}, 11), randn({2, 4}, 12)});
  {
    OpCounter ops;
    (void)grad([](const Tensor& x, const Tensor& w) {
      return sum(grad([&](const Tensor& u) { return sum(square(matmul(as_batch(x), u))); })(w));
    })(randn({3, 4}, 11), randn({4, 2}, 12));
    CHECK(ops.adjoint("matmul_batch_sum") == 1);  // the check above goes through its adjoint
  }
  check_gradients(
      [](auto& v) { return grad([&](const Tensor& w) { return sum(sin(matmul(w, as_batch(v[0])))); })(v[1]); },
      {randn({3, 4}, 13), randn({2, 4}, 14)});
}

TEST_CASE("value_and_grad of sum(square(x W)): one GEMM forward, one for each cotangent", "[matmul][grad]") {
  GemmCounter device(counted);
  const std::int64_t k = 9, n = 4;
  const Tensor w = randn({k, n}, 11);
  auto loss = [](const Tensor& x, const Tensor& wt) { return sum(square(matmul(x, wt))); };
  for (std::int64_t batch : {0, 1, 5}) {
    INFO("B = " << batch);
    const Tensor xs = randn({batch, k}, 12);
    device.gemms.clear();
    OpCounter ops;
    const auto [value, grads] = value_and_grad(loss, {0, 1})(as_batch(xs).to(counted), w.to(counted));
    CHECK(ops.forward("matmul_batch_sum") == 1);  // W's cotangent: summed over the batch in the GEMM
    CHECK(ops.forward("batch_sum") == 1);         // the loss's own sum over the batch, none for W
    // Three GEMMs over the whole batch: x W, (2 x W) W^T and x^T (2 x W).
    REQUIRE(device.gemms.size() == (batch == 0 ? 0u : 3u));  // B = 0: W's cotangent, an empty sum, is a fill
    for (const GemmArgs& g : device.gemms) CHECK(g.count == 1);
    const Eigen::MatrixXd ex = xs.as_eigen<double>(), ew = w.as_eigen<double>();
    const Eigen::MatrixXd y = ex * ew;
    CHECK(value.item() == Approx(y.squaredNorm()).epsilon(1e-12).margin(1e-14));
    const Eigen::MatrixXd gx = 2 * y * ew.transpose(), gw = 2 * ex.transpose() * y;
    CHECK_FALSE(grads[1].is_batched());
    require_close(unbatch(grads[0].to(Device::cpu())), Tensor::from_eigen(gx).reshape({batch, k}), 1e-12);
    require_close(grads[1], Tensor::from_eigen(gw), 1e-12);
  }
}

TEST_CASE("an empty batch of several matrices each sums to a zero cotangent for the shared operand", "[matmul][grad]") {
  // B = 0 examples of three matrices each: folding the batch into one GEMM would write one of the
  // three summed products and leave the others as they were allocated.
  const std::int64_t k = 3000;  // large enough for the allocator to hand back used memory
  const Tensor a = randn({k, 1}, 34);
  const Tensor x = as_batch(zeros({0, 3, 2, k}));
  const Tensor ga = grad([&](const Tensor& at) { return sum(matmul(at, x, true, true)); })(a);
  REQUIRE(ga.shape() == Shape{k, 1});
  CHECK(max(abs(ga)).item() == 0.0);
}

TEST_CASE("matmul with a shared operand and an empty dimension: zero gradients of the right shapes", "[matmul][grad]") {
  struct EmptyCase {
    Shape x, w;   // x per example
    bool w_left;  // W x_i, else x_i W
  };
  const std::vector<EmptyCase> cases = {{{0}, {0, 5}, false},   {{2, 0}, {0, 5}, false}, {{5}, {0, 5}, true},
                                        {{5, 1}, {0, 5}, true}, {{3}, {3, 0}, false},    {{2, 3}, {3, 0}, false},
                                        {{4, 0}, {3, 4}, true}, {{0}, {4, 0}, true}};
  for (const EmptyCase& c : cases) {
    INFO("x_i " << to_string(c.x) << ", W " << to_string(c.w) << (c.w_left ? ", W x_i" : ", x_i W"));
    Shape batched = c.x;
    batched.insert(batched.begin(), 3);
    const bool w_left = c.w_left;
    auto loss = [w_left](const Tensor& x, const Tensor& w) { return sum(w_left ? matmul(w, x) : matmul(x, w)); };
    const Tensor x = as_batch(randn(batched, 36)), w = randn(c.w, 37);
    const Tensor gw = grad([&](const Tensor& wt) { return loss(x, wt); })(w);
    CHECK(gw.shape() == c.w);
    CHECK(sum(abs(gw)).item() == 0.0);
    const auto [value, grads] = value_and_grad(loss, {0, 1})(x, w);
    CHECK(value.item() == 0.0);
    CHECK(grads[0].is_batched());
    CHECK(grads[0].shape() == c.x);
    CHECK(sum(abs(unbatch(grads[0]))).item() == 0.0);
    CHECK(grads[1].shape() == c.w);
    CHECK(sum(abs(grads[1])).item() == 0.0);
  }
}

TEST_CASE("matmul with a shared operand under vmap, per-example gradients and jit", "[matmul][vmap][jit]") {
  const std::int64_t k = 6, n = 3;
  const Tensor w = randn({n, k}, 13);
  // W x and x W^T for every example x, in a vmap body.
  auto f = [&](const Tensor& x) { return matmul(w, x) + matmul(x, w, false, true); };
  const Tensor xs = randn({4, k}, 14);
  const Tensor mapped = vmap(f)(xs);
  for (std::int64_t i = 0; i < 4; ++i) require_close(example(mapped, i), matmul(w, row(xs, i)) * 2.0, 1e-12);
  // Per-example gradients of the shared W (grad inside vmap): each example keeps its own.
  auto per_example =
      vmap([&](const Tensor& x) { return grad([&](const Tensor& wt) { return sum(square(matmul(wt, x))); })(w); });
  const Tensor gw = per_example(xs);
  REQUIRE(gw.is_batched());
  for (std::int64_t i = 0; i < 4; ++i) {
    const Tensor xi = row(xs, i);
    const Tensor expected = grad([&](const Tensor& wt) { return sum(square(matmul(wt, xi))); })(w);
    require_close(example(gw, i), expected, 1e-12);
  }
  // One trace serves every batch size, B = 0 included; the values and gradients match eager ones.
  auto loss = [](const Tensor& x, const Tensor& wt) {
    return sum(square(matmul(wt, x))) + sum(matmul(x, wt, false, true));
  };
  auto step = jit(value_and_grad(loss, {0, 1}));
  for (std::int64_t batch : {1, 2, 7, 0}) {
    INFO("B = " << batch);
    const Tensor x = as_batch(randn({batch, k}, 15 + static_cast<std::uint64_t>(batch)));
    const auto [v, g] = step(x, w);
    const auto [ve, ge] = value_and_grad(loss, {0, 1})(x, w);
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-12).margin(1e-14));
    require_close(unbatch(g[0]), unbatch(ge[0]), 1e-12);
    require_close(g[1], ge[1], 1e-12);
  }
  CHECK(step.counters().traces == 1);
}

TEST_CASE("jit runs a shared operand's products as single GEMMs and never transposes a captured constant",
          "[matmul][jit]") {
  GemmCounter device(counted);
  const std::int64_t k = 8, n = 5;
  const Tensor w = randn({k, n}, 16).to(counted);  // captured: a constant of the plan
  auto step = jit(value_and_grad([&](const Tensor& x) { return sum(square(matmul(x, w))); }));
  for (std::int64_t batch : {3, 6}) {
    const Tensor x = as_batch(randn({batch, k}, 17));
    OpCounter ops;
    device.gemms.clear();
    const auto [v, g] = step(x.to(counted));
    CHECK(ops.forward("transpose") == 0);
    REQUIRE(device.gemms.size() == 2);  // x W and (2 x W) W^T
    for (const GemmArgs& gm : device.gemms) {
      CHECK(gm.count == 1);
      CHECK(gm.m == batch);
    }
    const auto [ve, ge] = value_and_grad([&](const Tensor& xe) { return sum(square(matmul(xe, w))); })(x.to(counted));
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-12));
    require_close(unbatch(g), unbatch(ge), 1e-12);
  }
  CHECK(step.counters().traces == 1);
}

TEST_CASE("matmul's adjoints transpose by GEMM flags, not copies", "[matmul][grad]") {
  const Tensor a = randn({4, 6}, 18), b = randn({6, 3}, 19);
  OpCounter ops;
  const auto g = grad([](const Tensor& x, const Tensor& y) { return sum(square(matmul(x, y))); }, {0, 1})(a, b);
  CHECK(ops.forward("transpose") == 0);
  CHECK(ops.forward("matmul") == 3);
  const Eigen::MatrixXd ea = a.as_eigen<double>(), eb = b.as_eigen<double>();
  const Eigen::MatrixXd y = ea * eb;
  require_close(g[0], Tensor::from_eigen(Eigen::MatrixXd(2 * y * eb.transpose())), 1e-12);
  require_close(g[1], Tensor::from_eigen(Eigen::MatrixXd(2 * ea.transpose() * y)), 1e-12);
}

TEST_CASE("matmul with transpose flags: values, gradients and errors", "[matmul]") {
  const Tensor a = randn({2, 4, 3}, 20), b = randn({5, 4}, 21);
  const Tensor c = matmul(a, b, true, true);  // a_i^T b^T: [2, 3, 5]
  require_close(c, matmul(swapaxes(a, -1, -2), b.t()), 1e-12);
  check_gradients([](auto& v) { return matmul(v[0], v[1], true, true); }, {a, b});
  check_gradients([](auto& v) { return matmul(v[0], v[1], true, false); }, {randn({4, 3}, 22), randn({4, 2}, 23)});
  CHECK_THAT(error_of([&] { matmul(randn({4}, 1), b, true, false); }),
             Catch::Contains("only matrices can be transposed"));
  CHECK_THAT(error_of([&] { matmul(a, b, false, true); }),
             Catch::Contains("matmul") && Catch::Contains("[5, 4] (transposed)"));
}

TEST_CASE("batched operands that cannot fold: broadcast per-example axes and transposed copies", "[matmul]") {
  GemmCounter device(counted);
  // x_i [2, 3] against W [4, 3, 5]: W's leading axis is per example, so the batch cannot fold.
  const Tensor x = as_batch(randn({3, 2, 3}, 24)), w = randn({4, 3, 5}, 25);
  const Tensor out = matmul(x.to(counted), w.to(counted));
  CHECK(out.shape() == Shape{4, 2, 5});
  for (std::int64_t i = 0; i < 3; ++i)
    require_close(example(out, i).to(Device::cpu()), matmul(example(x, i), w), 1e-12);
  // A batched operand made by a transpose or a slice of a larger batch is folded correctly.
  const Tensor big = randn({5, 3, 7}, 26), shared = randn({7, 2}, 27);
  const Tensor xt = swapaxes(as_batch(randn({5, 7, 3}, 28)), -1, -2), xs = slice(as_batch(big), 0, 1, 3);
  for (const Tensor& xb : {xt, xs}) {
    device.gemms.clear();
    const Tensor y = matmul(xb.to(counted), shared.to(counted));
    CHECK(device.gemms.size() == 1);
    require_close(y, per_example_products(xb, shared, false, false), 1e-12);
  }
}

TEST_CASE("jit reads x.t() feeding a matmul through a GEMM flag, with reassociation across flags", "[matmul][jit]") {
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& v) {
    return matmul(matmul(x, w.t()), v.t());  // (x_i W^T) V^T
  };
  const Tensor x = as_batch(randn({4, 3, 2}, 29)), w = randn({40, 2}, 30), v = randn({2, 40}, 31);
  auto j = jit(f);
  const PlanSummary s = j.compile(x, w, v);
  CHECK(s.rewrites_by("fold_transposes_into_matmuls") == 2);
  CHECK(s.rewrites_by("reassociate_matmuls") == 1);  // x_i (W^T V^T): no [3, 40] product per example
  CHECK(s.kernels == 2);                             // two matmuls, no transposed copies
  require_close(j(x, w, v), f(x, w, v), 1e-12);
  // A batched operand transposed: its rows are not contiguous, so no fold, and still its values.
  auto g = [](const Tensor& a, const Tensor& b) { return matmul(swapaxes(a, -1, -2), b); };
  const Tensor a = as_batch(randn({3, 5, 4}, 32)), b = randn({5, 2}, 33);
  auto jg = jit(g);
  CHECK(jg.compile(a, b).rewrites_by("fold_transposes_into_matmuls") == 1);
  require_close(jg(a, b), per_example_products(a, b, true, false), 1e-12);
}

TEST_CASE("jit marks F diag(p^2) Y symmetric when a captured Y holds F^T, bit for bit", "[matmul][jit]") {
  GemmCounter device(counted);
  const Tensor f = randn({6, 4}, 34).to(counted), ft = f.t();  // ft: its own buffer, holding F^T
  std::vector<double> values = ft.to(Device::cpu()).to_vector<double>();
  values[5] += 1e-3;  // one entry that is not F's
  const Tensor off_t = Tensor::from_vector(values, {4, 6}).to(counted), p = randn({4}, 35).to(counted);
  struct Case {
    std::string name;
    Tensor transposed;
    bool symmetric;
  };
  for (const Case& c : {Case{"F.t()", ft, true}, Case{"F.t() with one entry changed", off_t, false}}) {
    INFO(c.name);
    // The seed's F diag(p^2) F^T, and a product that reads only the transpose (the gradient's [x, xbar]^T F).
    auto fn = [&](const Tensor& q) { return matmul(f * square(q), c.transposed) + matmul(q * 2.0, c.transposed); };
    auto j = jit(fn);
    device.gemms.clear();
    const Tensor got = j(p);
    std::int64_t reads_transposed = 0;
    bool symmetric = false;
    for (const GemmArgs& g : device.gemms) {
      reads_transposed += (g.a == c.transposed.raw_data()) + (g.b == c.transposed.raw_data());
      symmetric = symmetric || g.symmetric;
    }
    CHECK(reads_transposed == 2);  // both products read the captured transpose itself
    CHECK(symmetric == c.symmetric);
    require_close(got.to(Device::cpu()), fn(p).to(Device::cpu()), 1e-12);
  }
}

// ---------------------------------------------------------------- symmetric products, X D X^T
namespace {

// max |got - expected| / max(1, |expected|) over the elements.
double max_relative_error(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  const std::vector<double> g = got.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - e[i]) / std::max(1.0, std::abs(e[i])));
  return worst;
}

// Whether every matrix of x (batched or not) equals its transpose bit for bit.
bool exactly_symmetric(const Tensor& x) {
  const Tensor plain = (x.is_batched() ? unbatch(x) : x).to(Device::cpu());
  return plain.to_vector<double>() == swapaxes(plain, -1, -2).to_vector<double>();
}

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

// Element (i, j) of op(A) op(B) summed in doubles, and the sum of its terms' magnitudes: the reference for the CPU
// GEMM's kernels. a is one row-major A, [m, k] ([k, m] where ta); b one B, [k, n] ([n, k] where tb).
std::pair<double, double> plain_dot(const double* a, const double* b, std::int64_t m, std::int64_t n, std::int64_t k,
                                    bool ta, bool tb, std::int64_t i, std::int64_t j) {
  double dot = 0, scale = 0;
  for (std::int64_t l = 0; l < k; ++l) {
    const double x = a[ta ? l * m + i : i * k + l], y = b[tb ? j * k + l : l * n + j];
    dot += x * y;
    scale += std::fabs(x * y);
  }
  return {dot, scale};
}

}  // namespace

// The CPU computes a flagged product's lower triangle and mirrors it from order 192 on (below, the
// full product, which is faster there and symmetric only to rounding).
TEST_CASE("the CPU GEMM of a product flagged symmetric computes the full product's values, exactly symmetric",
          "[matmul]") {
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t count = 3;
  for (DType dtype : {DType::f64, DType::f32})
    for (std::int64_t m : {1, 5, 65, 192, 250, 300})
      for (std::int64_t k : {1, 9, 70})
        for (bool ta : {false, true})
          for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {2.0, 0.0}, {1.0, 1.0}, {0.5, -1.5}}) {
            INFO(name_of(dtype) << " m = " << m << ", k = " << k << (ta ? ", X^T D X" : ", X D X^T") << ", alpha "
                                << alpha << ", beta " << beta);
            // op(A_i) op(B) = X^T D_i X (A_i = D_i X stored [k, m], read transposed; B = X) when ta,
            // X D_i X^T (A_i = X D_i; B = X read transposed) otherwise; B is shared (stride 0).
            const Tensor x = ta ? randn({k, m}, 40, dtype) : randn({m, k}, 40, dtype);
            const Tensor a = (ta ? randn({count, k, 1}, 41, dtype) : randn({count, 1, k}, 41, dtype)) * x;
            const Tensor s = randn({count, m, m}, 42, dtype), c0 = s + swapaxes(s, -1, -2);  // symmetric
            const Tensor full = c0 * 1.0, flagged = c0 * 1.0;  // fresh buffers for the GEMMs to write
            GemmArgs g{.dtype = dtype,
                       .count = count,
                       .m = m,
                       .n = m,
                       .k = k,
                       .trans_a = ta,
                       .trans_b = !ta,
                       .alpha = alpha,
                       .beta = beta,
                       .a = a.raw_data(),
                       .stride_a = m * k,
                       .b = x.raw_data(),
                       .stride_b = 0,
                       .c = const_cast<void*>(full.raw_data()),
                       .stride_c = m * m};
            cpu.gemm(g);
            g.c = const_cast<void*>(flagged.raw_data());
            g.symmetric = true;
            cpu.gemm(g);
            CHECK(max_relative_error(flagged, full) <= tolerance(dtype) * static_cast<double>(k));
            if (m >= 192) CHECK(exactly_symmetric(flagged));
          }
}

// Products with one to four rows or an inner dimension of one to four take loops that stream op(B)
// instead of Eigen's GEMM: their values against a product of doubles computed here, for every flag,
// alpha and beta, with a shared B (stride 0) as the cotangents of solves have it.
TEST_CASE("the CPU GEMM of thin products (m or k up to 4) matches a reference for every flag", "[matmul]") {
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t count = 2;
  // n: a few columns, and the few-row kernel's register blocks (16 to 64 columns by dtype and rows, then 8) with a
  // tail.
  for (std::int64_t n : {7, 45, 70})
    for (DType dtype : {DType::f64, DType::f32})
      for (std::int64_t m : {1, 2, 3, 4, 5, 40})
        for (std::int64_t k : {1, 3, 4, 5, 70})
          for (bool ta : {false, true})
            for (bool tb : {false, true})
              for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {-0.5, 0.0}, {1.0, 1.0}, {2.0, -1.5}}) {
                INFO(name_of(dtype) << " m = " << m << ", n = " << n << ", k = " << k << ", ta " << ta << ", tb " << tb
                                    << ", alpha " << alpha << ", beta " << beta);
                const Tensor a = ta ? randn({count, k, m}, 50, dtype) : randn({count, m, k}, 50, dtype);
                const Tensor b = tb ? randn({n, k}, 51, dtype) : randn({k, n}, 51, dtype);
                // A fresh buffer for the GEMM to write; NaN where beta = 0 says C is not read.
                const Tensor c =
                    beta == 0 ? full({count, m, n}, std::nan(""), dtype) : randn({count, m, n}, 52, dtype) * 1.0;
                const std::vector<double> av = a.astype(DType::f64).to_vector<double>(),
                                          bv = b.astype(DType::f64).to_vector<double>(),
                                          c0 = c.astype(DType::f64).to_vector<double>();
                cpu.gemm(GemmArgs{.dtype = dtype,
                                  .count = count,
                                  .m = m,
                                  .n = n,
                                  .k = k,
                                  .trans_a = ta,
                                  .trans_b = tb,
                                  .alpha = alpha,
                                  .beta = beta,
                                  .a = a.raw_data(),
                                  .stride_a = m * k,
                                  .b = b.raw_data(),
                                  .stride_b = 0,
                                  .c = const_cast<void*>(c.raw_data()),
                                  .stride_c = m * n});
                const std::vector<double> got = c.astype(DType::f64).to_vector<double>();
                double worst = 0;
                for (std::int64_t e = 0; e < count; ++e)
                  for (std::int64_t i = 0; i < m; ++i)
                    for (std::int64_t j = 0; j < n; ++j) {
                      const auto [dot, scale] = plain_dot(av.data() + e * m * k, bv.data(), m, n, k, ta, tb, i, j);
                      const std::size_t at = static_cast<std::size_t>((e * m + i) * n + j);
                      const double want = alpha * dot + (beta == 0 ? 0.0 : beta * c0[at]);
                      const double error =
                          std::fabs(got[at] - want) /
                          (std::fabs(alpha) * scale + (beta == 0 ? 0.0 : std::fabs(beta * c0[at])) + 1e-300);
                      worst = std::isnan(error) ? INFINITY : std::max(worst, error);
                    }
                CHECK(worst <= tolerance(dtype) * static_cast<double>(k + 2));
              }
}

TEST_CASE("jit marks exactly the products it can prove symmetric, X D X^T, with the full product's values",
          "[matmul][jit]") {
  GemmCounter device(counted);
  const std::int64_t m = 7, k = 5;
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor& x, const Tensor& d, const Tensor& e)> f;  // x [m, k], d [k], e [m]
    bool symmetric;
  };
  for (DType dtype : {DType::f64, DType::f32}) {
    // Captured: x and its transpose computed eagerly (two constants of the plan), another matrix.
    const Tensor xc = randn({m, k}, 50, dtype).to(counted), xtc = xc.t(), y = randn({m, k}, 51, dtype).to(counted);
    const Tensor yt = y.t(), full = randn({m, k}, 52, dtype).to(counted);
    std::vector<double> near = xtc.to(Device::cpu()).to_vector<double>();
    near[7] += 0.5;
    const Tensor almost = Tensor::from_vector(near, {k, m}, dtype).to(counted);  // x^T but for one element
    const std::vector<Case> cases = {
        {"x diag(d) x^T", [](auto& x, auto& d, auto&) { return matmul(x * d, x, false, true); }, true},
        {"x.t() traced", [](auto& x, auto& d, auto&) { return matmul(x * d, x.t()); }, true},
        {"diag(d) on the right", [](auto& x, auto& d, auto&) { return matmul(x, d * x, false, true); }, true},
        {"both sides scaled", [](auto& x, auto& d, auto&) { return matmul(x * d, square(d) * x, false, true); }, true},
        {"a [1, k] scale and a scalar",
         [](auto& x, auto& d, auto&) {
           return matmul(x * d.reshape({1, k}) * 2.0, x, false, true);
         },
         true},
        {"x x^T", [](auto& x, auto&, auto&) { return matmul(x, x, false, true); }, true},
        {"x^T diag(e) x",
         [](auto& x, auto&, auto& e) {
           return matmul(e.reshape({m, 1}) * x, x, true, false);
         },
         true},
        {"captured x and x.t()", [&](auto&, auto& d, auto&) { return matmul(xc * d, xtc); }, true},
        {"captured x^T diag(e) x",
         [&](auto&, auto&, auto& e) {
           return matmul(xtc, e.reshape({m, 1}) * xc);
         },
         true},
        {"scaled along rows",
         [](auto& x, auto&, auto& e) {
           return matmul(e.reshape({m, 1}) * x, x, false, true);
         },
         false},
        {"x^T diag(d) x scaled along columns", [](auto& x, auto& d, auto&) { return matmul(x * d, x, true, false); },
         false},
        {"scaled elementwise", [&](auto& x, auto&, auto&) { return matmul(x * full, x, false, true); }, false},
        {"another matrix", [&](auto& x, auto& d, auto&) { return matmul(x * d, y, false, true); }, false},
        {"a captured transpose of another matrix", [&](auto&, auto& d, auto&) { return matmul(xc * d, yt); }, false},
        {"a captured near-transpose", [&](auto&, auto& d, auto&) { return matmul(xc * d, almost); }, false},
    };
    const Tensor x = randn({m, k}, 53, dtype).to(counted), d = randn({k}, 54, dtype).to(counted);
    const Tensor e = randn({m}, 55, dtype).to(counted);
    for (const Case& c : cases) {
      INFO(name_of(dtype) << ": " << c.name);
      auto f = c.f;
      auto j = jit([f](const Tensor& xa, const Tensor& da, const Tensor& ea) { return f(xa, da, ea); });
      device.gemms.clear();
      const Tensor out = j(x, d, e);
      REQUIRE(device.gemms.size() == 1);
      CHECK(device.gemms[0].symmetric == c.symmetric);
      device.gemms.clear();
      const Tensor eager = f(x, d, e);
      REQUIRE(device.gemms.size() == 1);
      CHECK_FALSE(device.gemms[0].symmetric);  // only a plan marks products
      CHECK(max_relative_error(out, eager) <= tolerance(dtype));
    }
  }
}

TEST_CASE("jit marks X (S X) and (X S) X symmetric for symmetric X and S, and no other sandwich", "[matmul][jit]") {
  GemmCounter device(counted);
  const std::int64_t n = 6;
  const Tensor a = randn({n, n}, 56), b = randn({n, n}, 57);
  // Captured and exactly symmetric (a_ij + a_ji is a_ji + a_ij), and a matrix that is not.
  const Tensor x = (a + a.t()).to(counted), c = (b + b.t()).to(counted), other = randn({n, n}, 58).to(counted);
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor& s)> f;  // s: one number, S = exp(s c) is symmetric
    bool symmetric;
  };
  const std::vector<Case> cases = {
      {"X (S X)", [&](auto& s) { return matmul(x, matmul(exp(s * c), x)); }, true},
      {"(X S) X", [&](auto& s) { return matmul(matmul(x, exp(s * c)), x); }, true},
      {"X (S X), S read by a flag", [&](auto& s) { return matmul(x, matmul(exp(s * c).t(), x)); }, true},
      {"X (S X)^T = X X S", [&](auto& s) { return matmul(x, matmul(exp(s * c), x), false, true); }, false},
      {"(S X) X", [&](auto& s) { return matmul(matmul(exp(s * c), x), x); }, false},
      {"X (S Y)", [&](auto& s) { return matmul(x, matmul(exp(s * c), c)); }, false},
      {"X (N X), N not symmetric", [&](auto& s) { return matmul(x, matmul(s * other, x)); }, false},
      {"N (S N), N not symmetric", [&](auto& s) { return matmul(other, matmul(exp(s * c), other)); }, false},
  };
  const Tensor s = full({}, 0.3).to(counted);
  for (const Case& k : cases) {
    INFO(k.name);
    auto j = jit(k.f);
    device.gemms.clear();
    const Tensor out = j(s);
    REQUIRE(device.gemms.size() == 2);
    CHECK_FALSE(device.gemms[0].symmetric);  // the inner product
    CHECK(device.gemms[1].symmetric == k.symmetric);
    CHECK(max_relative_error(out, k.f(s)) <= 1e-13);
  }
  // On the CPU the marked product is mirrored: exactly symmetric.
  auto sandwich = jit([&](const Tensor& t) {
    const Tensor xc = x.to(Device::cpu());
    return matmul(xc, matmul(exp(t * c.to(Device::cpu())), xc));
  });
  const Tensor out = sandwich(full({}, 0.3));
  CHECK(out.to_vector<double>() == out.t().to_vector<double>());
}

TEST_CASE("jit's symmetric products over a batch: scales per example with a shared x, and per-example x",
          "[matmul][jit]") {
  GemmCounter device(counted);
  const std::int64_t m = 260, k = 20, batch = 4;  // large enough for the CPU's triangle
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(name_of(dtype));
    const Tensor x = randn({m, k}, 60, dtype).to(counted), xt = x.t();
    const Tensor ps = randn({batch, k}, 61, dtype).to(counted);
    // F diag(p_i^2) F^T + I as the seed program writes it: captured F and F.t(), vmap over p.
    auto seed = jit(vmap([&](const Tensor& p) { return matmul(x * square(p), xt) + eye(m, dtype, counted); }));
    device.gemms.clear();
    const Tensor out = seed(ps);
    REQUIRE(device.gemms.size() == 1);
    CHECK(device.gemms[0].symmetric);
    CHECK(device.gemms[0].count == batch);  // not folded into one product of batch * m rows
    CHECK(exactly_symmetric(out));
    for (std::int64_t i = 0; i < batch; ++i) {
      const Tensor p = row(ps, i);
      CHECK(max_relative_error(example(out, i), matmul(x * square(p), xt) + eye(m, dtype, counted)) <=
            tolerance(dtype));
    }
    // Per-example x with a shared scale.
    const Tensor xs = as_batch(randn({batch, m, k}, 62, dtype)).to(counted), d = randn({k}, 63, dtype).to(counted);
    auto per_x = jit([](const Tensor& xa, const Tensor& da) { return matmul(xa * da, xa, false, true); });
    device.gemms.clear();
    const Tensor out2 = per_x(xs, d);
    REQUIRE(device.gemms.size() == 1);
    CHECK(device.gemms[0].symmetric);
    CHECK(exactly_symmetric(out2));
    for (std::int64_t i = 0; i < batch; ++i) {
      const Tensor xi = example(xs, i);
      CHECK(max_relative_error(example(out2, i), matmul(xi * d, xi, false, true)) <= tolerance(dtype));
    }
  }
}

TEST_CASE("gradients through a symmetric product under jit match finite differences", "[matmul][jit][grad]") {
  GemmCounter device(counted);
  const std::int64_t m = 6, k = 4;
  const Tensor w = randn({m, m}, 70);
  // Both x and d get cotangents; the weights make the product's cotangent non-symmetric.
  auto loss = [&](const Tensor& x, const Tensor& d) {
    return sum(sin(matmul(x * square(d), x, false, true)) * w.to(x.device()));
  };
  auto step = jit(value_and_grad(loss, {0, 1}));
  const Tensor x = randn({m, k}, 71), d = randn({k}, 72);
  device.gemms.clear();
  const auto [value, grads] = step(x.to(counted), d.to(counted));
  std::int64_t marked = 0;
  for (const GemmArgs& g : device.gemms) marked += g.symmetric ? 1 : 0;
  CHECK(marked == 1);  // the forward product; its cotangents' products are not symmetric
  const vt::testing::Fn eager = [&](const std::vector<Tensor>& a) { return loss(a[0], a[1]); };
  CHECK(value.item() == Approx(eager({x, d}).item()).epsilon(1e-12));
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("argument " << i);
    require_close(grads[i].to(Device::cpu()), vt::testing::numeric_gradient(eager, {x, d}, i), 1e-6);
  }
  // At an order where the CPU computes a triangle: the eager gradients (full products, unmarked).
  const std::int64_t big = 200;
  const Tensor wb = randn({big, big}, 73), xb = randn({big, k}, 74);
  auto big_loss = [&](const Tensor& xa, const Tensor& da) {
    return sum(sin(matmul(xa * square(da), xa, false, true)) * wb);
  };
  const auto [vj, gj] = jit(value_and_grad(big_loss, {0, 1}))(xb, d);
  const auto [ve, ge] = value_and_grad(big_loss, {0, 1})(xb, d);
  CHECK(vj.item() == Approx(ve.item()).epsilon(1e-12));
  for (std::size_t i = 0; i < 2; ++i) CHECK(max_relative_error(gj[i], ge[i]) <= 1e-10);
}

// ------------------------------------------------- a diagonal added to a product, X D X^T + c I
namespace {

// Kernels of f's plan for these arguments.
template <class F, class... Args>
std::int64_t plan_kernels(F f, const Args&... args) {
  return jit(f).compile(args...).kernels;
}

}  // namespace

TEST_CASE("jit adds a captured diagonal matrix into the product it is added to, and nothing else", "[matmul][jit]") {
  for (DType dtype : {DType::f64, DType::f32}) {
    for (std::int64_t m : {7, 200}) {  // 200: the CPU's triangle and mirror
      INFO(name_of(dtype) << ", m = " << m);
      const std::int64_t k = 5;
      const Tensor x = randn({m, k}, 80, dtype), d = randn({k}, 81, dtype), xt = x.t();
      const Tensor y = randn({m, k}, 82, dtype), v = randn({m}, 83, dtype);
      const Tensor identity = eye(m, dtype), scaled = eye(m, dtype) * 2.5, diagonal = diag(v);
      std::vector<double> near_values = diagonal.to_vector<double>();
      near_values[static_cast<std::size_t>(m * (m - 1))] = 0.25;  // off the diagonal, symmetric
      near_values[static_cast<std::size_t>(m - 1)] = 0.25;
      const Tensor near = Tensor::from_vector(near_values, {m, m}, dtype);
      std::vector<double> negative_zeros(static_cast<std::size_t>(m * m), -0.0);
      for (std::int64_t i = 0; i < m; ++i) negative_zeros[static_cast<std::size_t>(i * (m + 1))] = 3.0;
      const Tensor zeros_off = Tensor::from_vector(negative_zeros, {m, m}, dtype);
      const Tensor stack = eye(m, dtype).reshape({1, m, m}) + zeros(Shape{2, 1, 1}, dtype);  // [2, m, m]
      struct Case {
        std::string name;
        std::function<Tensor(const Tensor& xa, const Tensor& da)> f;
        bool folded;
        bool symmetric;
      };
      const auto sym = [&](const Tensor& xa, const Tensor& da) { return matmul(xa * square(da), xa.t()); };
      const std::vector<Case> cases = {
          {"x diag(d^2) x^T + I", [&](auto& xa, auto& da) { return sym(xa, da) + identity; }, true, true},
          {"I + x diag(d^2) x^T", [&](auto& xa, auto& da) { return identity + sym(xa, da); }, true, true},
          {"+ 2.5 I", [&](auto& xa, auto& da) { return sym(xa, da) + scaled; }, true, true},
          {"+ diag(v), an unsymmetric product",
           [&](auto& xa, auto& da) { return matmul(xa * da, y, false, true) + diagonal; }, true, false},
          {"-0 off the diagonal", [&](auto& xa, auto& da) { return sym(xa, da) + zeros_off; }, true, true},
          {"two entries off the diagonal", [&](auto& xa, auto& da) { return sym(xa, da) + near; }, false, true},
          {"a stack that broadcasts the product", [&](auto& xa, auto& da) { return sym(xa, da) + stack; }, false, true},
          {"the product read again",
           [&](auto& xa, auto& da) {
             const Tensor p = sym(xa, da);
             return (p + identity) * sum(p);
           },
           false, true},
          {"a diagonal computed in the function", [&](auto& xa, auto& da) { return sym(xa, da) + diag(sum(da) + v); },
           false, true},
      };
      for (const Case& c : cases) {
        INFO(c.name);
        auto f = c.f;
        const auto product_only = [&](const Tensor& xa, const Tensor& da) {
          return c.symmetric ? sym(xa, da) : matmul(xa * da, y, false, true);
        };
        const std::int64_t with_add = plan_kernels(f, x, d);
        const std::int64_t without = plan_kernels(product_only, x, d);
        const std::int64_t extra =
            plan_kernels([&](const Tensor& xa, const Tensor& da) { return f(xa, da) * 1.0; }, x, d);
        CHECK(extra == with_add + 1);  // the count is sensitive to one more kernel
        if (c.folded) CHECK(with_add == without);
        else CHECK(with_add > without);
        const Tensor got = jit(f)(x, d), eager = f(x, d);
        CHECK(max_relative_error(got, eager) <= tolerance(dtype));
        if (c.symmetric && m >= 192 && got.ndim() == 2) CHECK(exactly_symmetric(got));
      }
      // Over a batch, vmapped as the seed program is: folded, with the eager values per example.
      const Tensor ds = randn({3, k}, 84, dtype);
      auto seed = [&](const Tensor& da) { return matmul(x * square(da), xt) + identity; };
      auto seed_product = [&](const Tensor& da) { return matmul(x * square(da), xt); };
      CHECK(jit(vmap(seed)).compile(as_batch(ds)).kernels == jit(vmap(seed_product)).compile(as_batch(ds)).kernels);
      const Tensor batched = jit(vmap(seed))(as_batch(ds));
      for (std::int64_t i = 0; i < 3; ++i)
        CHECK(max_relative_error(example(batched, i), seed(row(ds, i))) <= tolerance(dtype));
    }
  }
}

// A 1x1 constant is "diagonal", but it broadcasts onto every entry of a larger product: an add,
// never the diagonal fold.
TEST_CASE("a 1x1 constant added to a larger product under jit adds to every entry", "[matmul][jit]") {
  const Tensor x = randn({4, 3}, 95), b = randn({3, 5}, 96), c = randn({3, 4}, 97);
  const Tensor one = Tensor::from_vector({2.5}, {1, 1});
  const std::vector<std::function<Tensor(const Tensor&)>> forms = {
      [&](const Tensor& xa) { return matmul(xa, b) + one; },   // [4, 5]
      [&](const Tensor& xa) { return matmul(xa, c) + one; },   // [4, 4], square
      [&](const Tensor& xa) { return one + matmul(xa, c); }};  // the constant first
  for (std::size_t i = 0; i < forms.size(); ++i) {
    INFO("form " << i);
    const Tensor got = jit(forms[i])(x), eager = forms[i](x);
    CHECK(max_relative_error(got, eager) <= 1e-15);
    CHECK(max_relative_error(got - matmul(x, i == 0 ? b : c), full(got.shape(), 2.5)) <= 1e-12);
  }
}

TEST_CASE("gradients through a product with a diagonal added under jit match finite differences",
          "[matmul][jit][grad]") {
  for (std::int64_t m : {6, 200}) {
    INFO("m = " << m);
    const std::int64_t k = 4;
    const Tensor w = randn({m, m}, 90), v = randn({m}, 91), identity = eye(m), diagonal = diag(v);
    auto loss = [&](const Tensor& x, const Tensor& d) {
      return sum(sin(matmul(x * square(d), x.t()) + identity) * w) + sum(cos(matmul(x, x * d, false, true) + diagonal));
    };
    auto unfolded = [&](const Tensor& x, const Tensor& d) {  // the same kernels less the two adds
      return sum(sin(matmul(x * square(d), x.t())) * w) + sum(cos(matmul(x, x * d, false, true)));
    };
    const Tensor x = randn({m, k}, 92), d = randn({k}, 93);
    auto step = jit(value_and_grad(loss, {0, 1}));
    CHECK(step.compile(x, d).kernels == jit(value_and_grad(unfolded, {0, 1})).compile(x, d).kernels);
    const auto [value, grads] = step(x, d);
    const vt::testing::Fn eager = [&](const std::vector<Tensor>& a) { return loss(a[0], a[1]); };
    CHECK(value.item() == Approx(eager({x, d}).item()).epsilon(1e-12));
    if (m > 10) {  // finite differences at the small order; at the large one, the eager gradients
      const auto [ve, ge] = value_and_grad(loss, {0, 1})(x, d);
      for (std::size_t i = 0; i < 2; ++i) CHECK(max_relative_error(grads[i], ge[i]) <= 1e-10);
      continue;
    }
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("argument " << i);
      require_close(grads[i], vt::testing::numeric_gradient(eager, {x, d}, i), 1e-6);
    }
  }
}

TEST_CASE("jit leaves a symmetric product's upper triangle unwritten only when Cholesky alone reads it",
          "[matmul][jit][linalg]") {
  GemmCounter device(counted);
  const std::int64_t m = 200, k = 6;  // the CPU's triangle, whose mirror lower_only skips
  const Tensor x = randn({m, k}, 100).to(counted), d = randn({k}, 101).to(counted);
  const Tensor identity = eye(m).to(counted), ones_m = ones({m}).to(counted);
  const auto a_of = [&](const Tensor& xa, const Tensor& da) { return matmul(xa * square(da), xa.t()) + identity; };
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor& xa, const Tensor& da)> f;
    bool lower_only;
  };
  const std::vector<Case> cases = {
      {"cho_solve(cho_factor(A))",
       [&](auto& xa, auto& da) { return mean(cho_solve(cho_factor(a_of(xa, da)), ones_m)); }, true},
      {"cholesky(A)", [&](auto& xa, auto& da) { return cholesky(a_of(xa, da)); }, true},
      {"A read by an add before cholesky",
       [&](auto& xa, auto& da) { return cholesky(matmul(xa * square(da), xa.t()) + 0.0 * identity + identity); },
       false},  // 0 I is computed in the plan: the add is not folded
      {"A also summed",
       [&](auto& xa, auto& da) {
         const Tensor a = a_of(xa, da);
         return mean(cho_solve(cho_factor(a), ones_m)) + sum(a);
       },
       false},
      {"A also a result's part", [&](auto& xa, auto& da) { return cholesky(a_of(xa, da)) + a_of(xa, da); }, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto f = c.f;
    device.gemms.clear();
    const Tensor got = jit(f)(x, d);
    bool marked = false, symmetric = false;
    for (const GemmArgs& g : device.gemms) {
      marked = marked || g.lower_only;
      symmetric = symmetric || g.symmetric;
    }
    CHECK(symmetric);
    CHECK(marked == c.lower_only);
    const Tensor eager = f(x, d);
    CHECK(max_relative_error(got.to(Device::cpu()), eager.to(Device::cpu())) <= 1e-10);
  }
  // Gradients of the seed's form, through the unmirrored product, against the eager ones.
  auto loss = [&](const Tensor& xa, const Tensor& da) { return mean(cho_solve(cho_factor(a_of(xa, da)), ones_m)); };
  device.gemms.clear();
  const auto [vj, gj] = jit(value_and_grad(loss, {0, 1}))(x, d);
  bool marked = false;
  for (const GemmArgs& g : device.gemms) marked = marked || g.lower_only;
  CHECK(marked);
  const auto [ve, ge] = value_and_grad(loss, {0, 1})(x, d);
  CHECK(vj.item() == Approx(ve.item()).epsilon(1e-12));
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(max_relative_error(gj[i].to(Device::cpu()), ge[i].to(Device::cpu())) <= 1e-8);
}

TEST_CASE("a single large product has the same bits on one thread and on several", "[matmul][threads]") {
  // The CPU splits a single product of over 2^20 multiply-adds by blocks of 48 of C's columns across the threads
  // when every thread gets one (backends/cpu/matrix.cpp); every element is then summed as by the whole product on one
  // thread. Widths that are and are not multiples of the block, both operands' transposes, an inner dimension over
  // Eigen's k blocking, float64 and float32 (whose kernels cover 48 columns on AVX-512).
  for (auto [m, k, n] : {std::array<std::int64_t, 3>{12, 700, 400}, {40, 300, 150}, {9, 7758, 360}, {64, 64, 1000}})
    for (DType dtype : {DType::f64, DType::f32})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO(m << " x " << k << " x " << n << (ta ? " a^T" : "") << (tb ? " b^T" : "") << " " << name_of(dtype));
          const Tensor a = randn(ta ? Shape{k, m} : Shape{m, k}, 11).astype(dtype);
          const Tensor b = randn(tb ? Shape{n, k} : Shape{k, n}, 12).astype(dtype);
          const auto product = [&] { return matmul(ta ? a.t() : a, tb ? b.t() : b).to_vector<double>(); };
          const std::vector<double> one = on_threads(1, product), two = on_threads(2, product),
                                    three = on_threads(3, product);
          CHECK(one == two);
          CHECK(one == three);
          // And the values are the product's.
          const Eigen::MatrixXd ea = a.astype(DType::f64).as_eigen<double>(),
                                eb = b.astype(DType::f64).as_eigen<double>();
          const Eigen::MatrixXd want =
              (ta ? Eigen::MatrixXd(ea.transpose()) : ea) * (tb ? Eigen::MatrixXd(eb.transpose()) : eb);
          require_close(Tensor::from_vector(two, {m, n}), Tensor::from_eigen(want), dtype == DType::f64 ? 1e-12 : 2e-3);
        }
}

TEST_CASE("small batched products of every order up to 5 and every transpose agree with a plain sum", "[matmul]") {
  // Orders 1 to 4 run tiny_products (backends/cpu/matrix.cpp), 5 the general path beside them.
  Backend& cpu = backend_for(Device{});
  constexpr std::int64_t count = 300;  // large enough to be shared among threads where there are several
  for (std::int64_t m = 1; m <= 5; ++m)
    for (std::int64_t n = 1; n <= 5; ++n)
      for (std::int64_t k = 1; k <= 5; ++k)
        for (int flags = 0; flags < 8; ++flags) {
          const bool ta = flags & 1, tb = flags & 2, accumulate = flags & 4;
          INFO("m " << m << " n " << n << " k " << k << " trans_a " << ta << " trans_b " << tb << " beta "
                    << accumulate);
          const std::vector<double> a = randn({count, m * k}, 11).to_vector<double>();
          const bool shared = (m + n + k) % 2 == 1;  // one B for every product (stride 0), or one each
          const std::vector<double> b = randn({shared ? 1 : count, k * n}, 12).to_vector<double>();
          const std::vector<double> c0 = randn({count, m * n}, 13).to_vector<double>();
          const double beta = accumulate ? 0.5 : 0.0;
          const auto product = [&](int threads) {
            // Where beta is 0 C is not read: NaN there must not reach the result.
            std::vector<double> c = accumulate ? c0 : std::vector<double>(c0.size(), std::nan(""));
            on_threads(threads, [&] {
              cpu.gemm(GemmArgs{.dtype = DType::f64,
                                .count = count,
                                .m = m,
                                .n = n,
                                .k = k,
                                .trans_a = ta,
                                .trans_b = tb,
                                .alpha = 1.5,
                                .beta = beta,
                                .a = a.data(),
                                .stride_a = m * k,
                                .b = b.data(),
                                .stride_b = shared ? 0 : k * n,
                                .c = c.data(),
                                .stride_c = m * n});
            });
            return c;
          };
          const std::vector<double> got = product(1);
          CHECK(product(2) == got);  // the same bits on every thread count
          double worst = 0;
          for (std::int64_t p = 0; p < count; ++p)
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                const double sum =
                    plain_dot(a.data() + p * m * k, b.data() + (shared ? 0 : p * k * n), m, n, k, ta, tb, i, j).first;
                const auto at = static_cast<std::size_t>(p * m * n + i * n + j);
                const double want = 1.5 * sum + beta * c0[at];
                worst = std::max(worst, std::abs(got[at] - want));
              }
          CHECK(worst < 1e-13);
        }
  // A product marked symmetric comes out exactly symmetric.
  const std::vector<double> a = randn({count, 12}, 14).to_vector<double>();
  std::vector<double> c(static_cast<std::size_t>(count * 9));
  cpu.gemm(GemmArgs{.dtype = DType::f64,
                    .count = count,
                    .m = 3,
                    .n = 3,
                    .k = 4,
                    .trans_a = false,
                    .trans_b = true,
                    .alpha = 1.0,
                    .beta = 0.0,
                    .a = a.data(),
                    .stride_a = 12,
                    .b = a.data(),
                    .stride_b = 12,
                    .c = c.data(),
                    .stride_c = 9,
                    .symmetric = true});
  for (std::int64_t p = 0; p < count; ++p)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        CHECK(c[static_cast<std::size_t>(p * 9 + i * 3 + j)] == c[static_cast<std::size_t>(p * 9 + j * 3 + i)]);
}
