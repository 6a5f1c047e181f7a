// Bool tensors (masks): the comparisons and logical ops that make them, where that reads them,
// promotion, reductions, the ops that move them and those that refuse them, autodiff, vmap, jit,
// another device, printing and .npy files written by numpy (tools/reference/make_integer_reference.py).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "opaque_device.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

using Bools = std::vector<bool>;
using I64 = std::vector<std::int64_t>;

Tensor bools(const Bools& v, const Shape& shape) {
  I64 ints(v.begin(), v.end());
  return Tensor::from_ints(ints, shape, DType::boolean);
}
Tensor bools(const Bools& v) { return bools(v, {static_cast<std::int64_t>(v.size())}); }
Tensor vec(const std::vector<double>& v, DType dtype = DType::f64) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, dtype);
}

std::string data(const std::string& name) { return std::string(VTAPE_TEST_DATA) + "/ints/" + name; }

}  // namespace

TEST_CASE("bool dtype: name, size, kind, C++ type and promotion", "[bool]") {
  CHECK(name_of(DType::boolean) == "bool");
  CHECK(size_of(DType::boolean) == 1);
  STATIC_REQUIRE(is_boolean(DType::boolean));
  STATIC_REQUIRE(!is_integer(DType::boolean));
  STATIC_REQUIRE(!is_floating(DType::boolean));
  STATIC_REQUIRE(dtype_of<bool>() == DType::boolean);
  // A boolean with any other dtype gives the other, as numpy and JAX.
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    CHECK(promote(DType::boolean, d) == d);
    CHECK(promote(d, DType::boolean) == d);
  }
  CHECK(promote(DType::boolean, DType::boolean) == DType::boolean);
}

TEST_CASE("comparisons give bools that agree with numpy's on NaN, infinities and signed zeros", "[bool]") {
  // numpy's a OP b for every pair of {nan, -inf, -1, -0, 0, 2, inf}: [6, 7, 7], in the order below.
  const Tensor special = load_npy(data("special.npy"));
  const Tensor expected = load_npy(data("special_compared.npy"));
  REQUIRE(expected.dtype() == DType::boolean);
  REQUIRE(expected.shape() == Shape{6, 7, 7});
  using Compare = Tensor (*)(const Tensor&, const Tensor&);
  const Compare ops[] = {less, less_equal, greater, greater_equal, equal, not_equal};
  for (DType d : {DType::f64, DType::f32}) {
    const Tensor x = special.astype(d);
    // a along rows, b along columns: broadcast operands, a scalar per row for one of them.
    const Tensor a = reshape(x, {7, 1}), b = reshape(x, {1, 7});
    for (std::size_t k = 0; k < 6; ++k) {
      INFO(name_of(d) << ", comparison " << k);
      const Tensor got = ops[k](a, b);
      CHECK(got.dtype() == DType::boolean);
      CHECK(got.to_vector<bool>() ==
            slice(expected, 0, static_cast<std::int64_t>(k), static_cast<std::int64_t>(k + 1)).to_vector<bool>());
      // The same under jit, with b broadcast the other way (its transpose, read along columns).
      auto jitted = jit([&](const Tensor& u, const Tensor& v) { return ops[k](u, transpose(v)); });
      CHECK(jitted(a, reshape(x, {7, 1})).to_vector<bool>() == got.to_vector<bool>());
    }
  }
}

TEST_CASE("comparisons of integers and of bools", "[bool]") {
  const Tensor i = Tensor::from_ints({(std::int64_t{1} << 53) + 1, 3, -4}, {3});
  const Tensor j = Tensor::from_ints({std::int64_t{1} << 53, 3, 5}, {3});
  CHECK(greater(i, j).to_vector<bool>() == Bools{true, false, false});  // exact, where doubles would tie
  CHECK(not_equal(i, j).to_vector<bool>() == Bools{true, false, true});
  const Tensor p = bools({false, false, true, true}), q = bools({false, true, false, true});
  CHECK(less(p, q).to_vector<bool>() == Bools{false, true, false, false});  // false < true, as numpy
  CHECK(equal(p, q).to_vector<bool>() == Bools{true, false, false, true});
  CHECK(greater_equal(p, q).to_vector<bool>() == Bools{true, false, true, true});
  // A bool against a float promotes to the float: true == 1.0.
  CHECK(equal(p, vec({0, 0, 1, 2})).to_vector<bool>() == Bools{true, true, true, false});
}

TEST_CASE("logical ops: truth tables, any dtype read as nonzero, and where", "[bool]") {
  const Tensor p = bools({false, false, true, true}), q = bools({false, true, false, true});
  CHECK(logical_and(p, q).to_vector<bool>() == Bools{false, false, false, true});
  CHECK(logical_or(p, q).to_vector<bool>() == Bools{false, true, true, true});
  CHECK(logical_xor(p, q).to_vector<bool>() == Bools{false, true, true, false});
  CHECK(logical_not(p).to_vector<bool>() == Bools{true, true, false, false});
  // Other dtypes are read as booleans: nonzero (NaN and -inf too) is true, -0.0 is false.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = vec({0.0, -0.0, nan, -inf, 0.5});
  CHECK(logical_not(x).to_vector<bool>() == Bools{true, true, false, false, false});
  CHECK(x.astype(DType::boolean).to_vector<bool>() == Bools{false, false, true, true, true});
  CHECK(logical_and(x, Tensor::from_ints({1, 1, 1, 0, 2}, {5})).to_vector<bool>() ==
        Bools{false, false, true, false, true});
  CHECK(logical_and(p, q).dtype() == DType::boolean);
  // where reads its condition as a boolean, of any dtype; its values may be bools too.
  require_close(where(x, vec({1, 2, 3, 4, 5}), zeros({})), {0, 0, 3, 4, 5}, 0.0);
  require_close(where(Tensor::from_ints({0, 7}, {2}), vec({1, 2}), vec({-1, -2})), {-1, 2}, 0.0);
  const Tensor chosen = where(p, q, logical_not(q));
  CHECK(chosen.dtype() == DType::boolean);
  CHECK(chosen.to_vector<bool>() == Bools{true, false, false, true});
}

TEST_CASE("bools in arithmetic promote to the other operand, and two bools add and multiply as numpy's", "[bool]") {
  const Tensor m = bools({true, false, true});
  const Tensor x32 = vec({1.5, 2.5, -3.0}, DType::f32);
  CHECK((m * x32).dtype() == DType::f32);  // a mask keeps a float32 model in float32
  require_close(m * x32, {1.5, 0.0, -3.0}, 0.0);
  CHECK((1 - m).dtype() == DType::i64);  // an integer C++ scalar: int64, as numpy
  CHECK((1 - m).to_vector<std::int64_t>() == I64{0, 1, 0});
  CHECK((m * 0.5).dtype() == DType::f64);
  require_close(m * 0.5, {0.5, 0.0, 0.5}, 0.0);
  const std::vector<double> ratio = (m / m).to_vector<double>();  // true division, in float64
  CHECK((ratio[0] == 1.0 && std::isnan(ratio[1]) && ratio[2] == 1.0));
  const Tensor p = bools({false, false, true, true}), q = bools({false, true, false, true});
  CHECK((p + q).dtype() == DType::boolean);
  CHECK((p + q).to_vector<bool>() == Bools{false, true, true, true});    // or
  CHECK((p * q).to_vector<bool>() == Bools{false, false, false, true});  // and
  CHECK(maximum(p, q).to_vector<bool>() == Bools{false, true, true, true});
  CHECK(minimum(p, q).to_vector<bool>() == Bools{false, false, false, true});
  CHECK_THAT(error_of([&] { (void)(p - q); }), Catch::Contains("sub: of two bool tensors"));
}

TEST_CASE("reductions of bools: counts, means, any and all", "[bool]") {
  const Tensor m = bools({true, false, true, true, false, false}, {2, 3});
  CHECK(sum(m).dtype() == DType::i64);
  CHECK(sum(m).item<std::int64_t>() == 3);
  CHECK(sum(m, {1}).to_vector<std::int64_t>() == I64{2, 1});
  CHECK(mean(m, {0}).dtype() == DType::f64);
  require_close(mean(m, {0}), {1.0, 0.0, 0.5}, 0.0);
  CHECK(max(m, {1}).dtype() == DType::boolean);
  CHECK(max(m, {1}).to_vector<bool>() == Bools{true, true});
  CHECK(any(m, {0}).to_vector<bool>() == Bools{true, false, true});
  CHECK(all(m, {1}).to_vector<bool>() == Bools{false, false});
  CHECK(all(logical_or(m, logical_not(m))).item<bool>());
  CHECK(any(vec({0.0, std::nan("")})).item<bool>());  // any dtype: NaN is nonzero
  // Over no elements: any is false and all is true, as numpy.
  const Tensor empty = zeros({0, 2}, DType::boolean);
  CHECK(any(empty).item<bool>() == false);
  CHECK(all(empty).item<bool>() == true);
  CHECK(all(empty, {0}, true).shape() == Shape{1, 2});
}

TEST_CASE("ops that move data take bools; arithmetic and gradients refuse them by name", "[bool]") {
  const Tensor m = bools({true, false, false, true, true, false}, {2, 3});
  CHECK(transpose(m).to_vector<bool>() == Bools{true, true, false, true, false, false});
  CHECK(reshape(m, {3, 2}).dtype() == DType::boolean);
  CHECK(slice(m, 1, 1, 3).to_vector<bool>() == Bools{false, false, true, false});
  CHECK(concatenate({m, logical_not(m)}, 0).to_vector<bool>() ==
        Bools{true, false, false, true, true, false, false, true, true, false, false, true});
  CHECK(take(m, Tensor::from_ints({2, 0}, {2}), 1).to_vector<bool>() == Bools{false, true, false, true});
  CHECK(broadcast_to(bools({true, false}), {2, 2}).to_vector<bool>() == Bools{true, false, true, false});
  CHECK(diagonal(reshape(slice(m, 1, 0, 2), {2, 2})).to_vector<bool>() == Bools{true, true});
  CHECK(stop_gradient(m).dtype() == DType::boolean);
  CHECK(m.at<bool>({1, 0}) == true);
  CHECK(m.at<double>({1, 2}) == 0.0);
  CHECK(full({2}, 3.0, DType::boolean).to_vector<bool>() == Bools{true, true});
  CHECK(eye(2, DType::boolean).to_vector<bool>() == Bools{true, false, false, true});
  CHECK_THAT(error_of([&] { (void)exp(m); }), Catch::Contains("exp: takes floating-point tensors, got bool (input 0)"));
  CHECK_THAT(error_of([&] { (void)neg(m); }), Catch::Contains("neg: takes numeric tensors, got bool"));
  CHECK_THAT(error_of([&] { (void)matmul(m, transpose(m)); }), Catch::Contains("got bool"));
  CHECK_THAT(error_of([&] { (void)randn({2}, 1, DType::boolean); }), Catch::Contains("randn"));
  CHECK_THAT(error_of([&] { (void)grad([](const Tensor& x) { return sum(x); })(m); }),
             Catch::Contains("argument 0 is bool, which has no gradient"));
  CHECK_THAT(error_of([&] { (void)grad([](const Tensor& x) { return greater(sum(x), zeros({})); })(vec({1.0})); }),
             Catch::Contains("scalar of dtype bool, which has no gradient"));
}

TEST_CASE("gradients through masks: where selects, a mask scales, comparisons stop the gradient", "[bool]") {
  // f(x) = sum(where(x > 0, x^2, -x) * (x < 1)): 2x on (0, 1), -1 below 0, 0 from 1 on.
  const auto f = [](const Tensor& x) {
    return sum(where(greater(x, zeros({})), square(x), neg(x)) * less(x, ones({})));
  };
  const Tensor x = vec({-2.0, -0.5, 0.25, 0.75, 1.5, 3.0});
  require_close(grad(f)(x), {-1, -1, 0.5, 1.5, 0, 0}, 0.0);
  require_close(jit(grad(f))(x), {-1, -1, 0.5, 1.5, 0, 0}, 0.0);
  vt::testing::check_gradients([&](const std::vector<Tensor>& a) { return f(a[0]) * a[0]; }, {x});
  // Per example, under vmap and jit: one trace for two batch sizes.
  auto per_example = jit(vmap(grad(f)));
  for (std::int64_t b : {2, 5}) {
    std::vector<double> v;
    for (std::int64_t k = 0; k < 6 * b; ++k) v.push_back(0.1 * static_cast<double>(k) - 1.05);
    const Tensor X = Tensor::from_vector(v, {b, 6});
    const Tensor G = per_example(as_batch(X));
    for (std::int64_t e = 0; e < b; ++e)
      require_close(slice(unbatch(G), 0, e, e + 1), grad(f)(slice(X, 0, e, e + 1)), 0.0);
  }
  CHECK(per_example.counters().traces == 1);
}

TEST_CASE("jit and vmap make, pass and return bools, fused or not, as eager", "[bool]") {
  // Large enough that jit runs its elementwise steps tile by tile (autodiff/jit/fuse.cpp).
  const std::int64_t n = 3 * 4096 + 5;
  const Tensor x = randn({n}, 7), y = randn({n}, 8);
  const auto f = [](const Tensor& a, const Tensor& b) {
    const Tensor m = logical_and(greater(a, b), less_equal(a * b, ones({})));
    return std::pair{m, where(m, a, b) + logical_xor(m, less(a, zeros({}))) * 0.5};
  };
  const auto [m, v] = f(x, y);
  const auto [jm, jv] = jit(f)(x, y);
  CHECK(jm.dtype() == DType::boolean);
  CHECK(jm.to_vector<bool>() == m.to_vector<bool>());
  require_close(jv, v, 0.0);
  // A bool argument, batched: a mask per example.
  const Tensor masks = as_batch(bools({true, false, true, false, false, true}, {3, 2}));
  const Tensor scaled = vmap([](const Tensor& p, const Tensor& k) { return sum(where(k, p, zeros({}))); })(
      as_batch(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2})), masks);
  require_close(unbatch(scaled), {1, 3, 6}, 0.0);
  CHECK(batch_sum(masks).to_vector<std::int64_t>() == I64{2, 1});
  CHECK(unbatch(vmap([](const Tensor& k) { return any(k); })(masks)).to_vector<bool>() == Bools{true, true, true});
}

TEST_CASE("bools on another device: comparisons, where, logical ops and conversions", "[bool][device]") {
  const Device stand_in = Device::cuda(6);
  vt::testing::OpaqueDevice device(stand_in);
  const Tensor x = Tensor::from_vector({-1.0, 0.0, std::nan(""), 2.0}, {4}, DType::f64, stand_in);
  const Tensor m = greater_equal(x, zeros({}, DType::f64, stand_in));
  CHECK(m.device() == stand_in);
  CHECK(m.to_vector<bool>() == Bools{false, true, false, true});
  const Tensor picked = where(logical_or(m, not_equal(x, x)), x, full({}, -5.0, DType::f64, stand_in));
  CHECK(picked.to_vector<double>()[0] == -5.0);
  CHECK(std::isnan(picked.to_vector<double>()[2]));
  CHECK(sum(m).item<std::int64_t>() == 2);
  CHECK(m.to(Device::cpu()).to_vector<bool>() == Bools{false, true, false, true});
}

TEST_CASE("bools print as numpy's and round-trip through .npy files numpy reads", "[bool]") {
  CHECK(fmt::format("{}", bools({true, false, true})) == "Tensor([ True, False,  True], dtype=bool)");
  CHECK(fmt::format("{}", bools({true, true})) == "Tensor([ True,  True], dtype=bool)");
  CHECK(fmt::format("{}", bools({false}, {})) == "Tensor(False, dtype=bool)");
  const Tensor mask = load_npy(data("mask.npy"));  // written by numpy
  CHECK(mask.dtype() == DType::boolean);
  CHECK(mask.shape() == Shape{2, 3});
  CHECK(mask.to_vector<bool>() == Bools{true, false, true, false, false, true});
  const std::string path = "vtape_test_bool_roundtrip.npy";
  save_npy(path, logical_not(mask));
  CHECK(load_npy(path).to_vector<bool>() == Bools{false, true, false, true, true, false});
  std::remove(path.c_str());
}
