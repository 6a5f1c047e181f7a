// Integer tensors (int32, int64): creation, conversion, promotion, the ops that take them, the ops
// that refuse them, autodiff, vmap, jit and .npy files written by numpy.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "gradcheck.hpp"
#include "opaque_device.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

using I64 = std::vector<std::int64_t>;
using I32 = std::vector<std::int32_t>;
constexpr std::int64_t big = std::int64_t{1} << 53;
constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t i64_min = std::numeric_limits<std::int64_t>::min();
constexpr std::int32_t i32_max = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t i32_min = std::numeric_limits<std::int32_t>::min();

Tensor ints(const I64& v, const Shape& shape, DType dtype = DType::i64) { return Tensor::from_ints(v, shape, dtype); }
Tensor ints(const I64& v, DType dtype = DType::i64) {
  return Tensor::from_ints(v, {static_cast<std::int64_t>(v.size())}, dtype);
}

std::string data(const std::string& name) { return std::string(VTAPE_TEST_DATA) + "/ints/" + name; }

}  // namespace

TEST_CASE("integer dtypes: names, sizes, kinds and C++ types", "[int]") {
  CHECK(name_of(DType::i32) == "int32");
  CHECK(name_of(DType::i64) == "int64");
  CHECK(size_of(DType::i32) == 4);
  CHECK(size_of(DType::i64) == 8);
  STATIC_REQUIRE(is_integer(DType::i32));
  STATIC_REQUIRE(is_integer(DType::i64));
  STATIC_REQUIRE(!is_integer(DType::f64));
  STATIC_REQUIRE(is_floating(DType::f32));
  STATIC_REQUIRE(!is_floating(DType::i64));
  STATIC_REQUIRE(dtype_of<std::int32_t>() == DType::i32);
  STATIC_REQUIRE(dtype_of<std::int64_t>() == DType::i64);
  CHECK(visit_dtype(DType::i32, [](auto z) { return sizeof(z); }) == 4);
  CHECK(visit_dtype(DType::i64, [](auto z) { return std::is_same_v<decltype(z), std::int64_t>; }));
  CHECK_THROWS_AS(visit_float_dtype(DType::i64, [](auto z) { return sizeof(z); }), std::logic_error);
}

TEST_CASE("from_ints is exact for every int64, and checks int32 and float dtypes", "[int]") {
  const I64 v{0, -1, big + 1, -(big + 3), i64_max, i64_min};
  const Tensor t = ints(v, {2, 3});
  CHECK(t.dtype() == DType::i64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector<std::int64_t>() == v);
  CHECK(t.at<std::int64_t>({0, 2}) == big + 1);  // float64 would read 2^53
  CHECK(ints({big + 1}, Shape{}).item<std::int64_t>() == big + 1);
  const Tensor s = ints({5, -6, i32_max, i32_min}, DType::i32);
  CHECK(s.dtype() == DType::i32);
  CHECK(s.to_vector<std::int32_t>() == I32{5, -6, i32_max, i32_min});
  CHECK_THAT(error_of([] { ints({std::int64_t{i32_max} + 1}, DType::i32); }),
             Catch::Contains("from_ints") && Catch::Contains("2147483648") && Catch::Contains("int32"));
  CHECK_THAT(error_of([] { ints({1}, DType::f64); }), Catch::Contains("from_ints") && Catch::Contains("float64"));
  CHECK_THAT(error_of([] { ints({1, 2}, {3}); }), Catch::Contains("from_ints"));
}

TEST_CASE("creation ops make integer tensors", "[int]") {
  CHECK(Tensor::empty({2, 2}, DType::i32).dtype() == DType::i32);
  CHECK(zeros({3}, DType::i64).to_vector<std::int64_t>() == I64{0, 0, 0});
  CHECK(ones({2}, DType::i32).to_vector<std::int32_t>() == I32{1, 1});
  CHECK(full({2}, -7, DType::i64).to_vector<std::int64_t>() == I64{-7, -7});
  CHECK(arange(0, 5, 2, DType::i64).to_vector<std::int64_t>() == I64{0, 2, 4});
  CHECK(arange(3, 0, -1, DType::i32).to_vector<std::int32_t>() == I32{3, 2, 1});
  CHECK(eye(2, DType::i32).to_vector<std::int32_t>() == I32{1, 0, 0, 1});
  CHECK(Tensor::scalar(9, DType::i64).item<std::int64_t>() == 9);
  CHECK(Tensor::from_vector({1.0, 2.0}, {2}, DType::i32).to_vector<std::int32_t>() == I32{1, 2});
  CHECK_THAT(error_of([] { randn({2}, 1, DType::i64); }), Catch::Contains("randn") && Catch::Contains("int64"));
  CHECK_THAT(error_of([] { rand({2}, 1, DType::i32); }), Catch::Contains("rand") && Catch::Contains("int32"));
}

TEST_CASE("reading values converts: floats truncate toward zero, NaN gives 0, out of range saturates", "[int]") {
  const Tensor f = Tensor::from_vector({2.7, -2.7, 0.5, -0.5, 1e6 + 0.9}, {5});
  CHECK(f.to_vector<std::int64_t>() == I64{2, -2, 0, 0, 1000000});
  CHECK(f.to_vector<std::int32_t>() == I32{2, -2, 0, 0, 1000000});
  CHECK(f.at<std::int32_t>({1}) == -2);
  const Tensor odd = Tensor::from_vector({std::nan(""), 1e300, -1e300, 3e9, -3e9}, {5});
  CHECK(odd.to_vector<std::int64_t>() == I64{0, i64_max, i64_min, 3000000000, -3000000000});
  CHECK(odd.to_vector<std::int32_t>() == I32{0, i32_max, i32_min, i32_max, i32_min});
  const Tensor f32 = Tensor::from_vector({2147483648.0, -2147483648.0}, {2}, DType::f32);
  CHECK(f32.to_vector<std::int32_t>() == I32{i32_max, i32_min});
  // Integers read as floats; int64 to int32 keeps the low 32 bits, as numpy's astype.
  const Tensor i = ints({3, -4, big + 1});
  CHECK(i.to_vector<double>() == std::vector<double>{3, -4, static_cast<double>(big)});
  CHECK(i.to_vector<float>() == std::vector<float>{3, -4, static_cast<float>(big)});
  CHECK(ints({(std::int64_t{1} << 32) + 5, -1}).to_vector<std::int32_t>() == I32{5, -1});
  CHECK(ints({7}, Shape{}).item<double>() == 7.0);
}

TEST_CASE("astype converts both ways as element reads do", "[int]") {
  const Tensor f = Tensor::from_vector({2.7, -2.7, std::nan(""), 1e20}, {4});
  const Tensor i = f.astype(DType::i64);
  CHECK(i.dtype() == DType::i64);
  CHECK(i.to_vector<std::int64_t>() == I64{2, -2, 0, i64_max});
  CHECK(f.astype(DType::i32).to_vector<std::int32_t>() == I32{2, -2, 0, i32_max});
  const Tensor back = ints({1, -2, 3}).astype(DType::f32);
  CHECK(back.dtype() == DType::f32);
  CHECK(back.to_vector<float>() == std::vector<float>{1, -2, 3});
  CHECK(ints({i32_min, 9}, DType::i32).astype(DType::i64).to_vector<std::int64_t>() == I64{i32_min, 9});
}

TEST_CASE("promotion: int with float gives the float, int32 with int64 gives int64, scalars are weak", "[int]") {
  const Tensor i32 = ints({1, 2}, DType::i32), i64 = ints({3, 4}), f32 = ones({2}, DType::f32), f64 = ones({2});
  CHECK(promote(DType::i32, DType::f32) == DType::f32);
  CHECK(promote(DType::i64, DType::f32) == DType::f32);
  CHECK(promote(DType::f64, DType::i32) == DType::f64);
  CHECK(promote(DType::i32, DType::i64) == DType::i64);
  CHECK((i32 + i64).dtype() == DType::i64);
  CHECK((i64 * f32).dtype() == DType::f32);
  CHECK((f64 - i32).dtype() == DType::f64);
  require_close(i64 * f32, {3, 4});
  // C++ integer scalars keep the tensor's dtype; floating ones keep a float's and make an integer float64.
  CHECK((i32 + 1).dtype() == DType::i32);
  CHECK((i32 + 1).to_vector<std::int32_t>() == I32{2, 3});
  CHECK((2 * i64).to_vector<std::int64_t>() == I64{6, 8});
  CHECK((10 - i64).to_vector<std::int64_t>() == I64{7, 6});
  CHECK((i64 + big).to_vector<std::int64_t>() == I64{big + 3, big + 4});  // exact above 2^53
  CHECK((i32 * 0.5).dtype() == DType::f64);
  require_close(i32 * 0.5, {0.5, 1.0});
  CHECK((f32 * 2).dtype() == DType::f32);
  CHECK((2 * f32).dtype() == DType::f32);
  CHECK((f32 + std::int64_t{3}).dtype() == DType::f32);
  CHECK((f32 * 2u).dtype() == DType::f32);
  CHECK(add(i64, 1).dtype() == DType::i64);
  CHECK((i32 + std::int64_t{1}).dtype() == DType::i32);
  CHECK_THAT(error_of([&] { (void)(i32 + (std::int64_t{1} << 40)); }), Catch::Contains("int32"));
}

TEST_CASE("integer arithmetic is exact, wraps on overflow, and division is true division", "[int]") {
  const Tensor a = ints({big + 1, -7, 5}), b = ints({2, 3, -5});
  CHECK((a + b).to_vector<std::int64_t>() == I64{big + 3, -4, 0});
  CHECK((a - b).to_vector<std::int64_t>() == I64{big - 1, -10, 10});
  CHECK((a * b).to_vector<std::int64_t>() == I64{2 * big + 2, -21, -25});
  CHECK((-a).to_vector<std::int64_t>() == I64{-(big + 1), 7, -5});
  CHECK(abs(a).to_vector<std::int64_t>() == I64{big + 1, 7, 5});
  CHECK(sign(a).to_vector<std::int64_t>() == I64{1, -1, 1});
  CHECK(maximum(a, b).to_vector<std::int64_t>() == I64{big + 1, 3, 5});
  // Two's complement wrap-around, as numpy's fixed-width integers.
  CHECK((ints({i64_max}) + 1).to_vector<std::int64_t>() == I64{i64_min});
  CHECK((ints({i32_max}, DType::i32) + 1).to_vector<std::int32_t>() == I32{i32_min});
  CHECK((ints({i32_max}, DType::i32) * 2).to_vector<std::int32_t>() == I32{-2});
  CHECK((-ints({i64_min})).to_vector<std::int64_t>() == I64{i64_min});
  CHECK(abs(ints({i32_min}, DType::i32)).to_vector<std::int32_t>() == I32{i32_min});
  // div: float64 true division, as numpy's `/`.
  const Tensor q = ints({7, -7, 1}) / ints({2, 2, 3}, DType::i32);
  CHECK(q.dtype() == DType::f64);
  require_close(q, {3.5, -3.5, 1.0 / 3.0}, 0.0);
  CHECK((ints({9}) / 2).dtype() == DType::f64);
  require_close(ints({9}) / 2, {4.5}, 0.0);
  require_close(3 / ints({4}), {0.75}, 0.0);
  CHECK((ints({1}, DType::i32) / ones({1}, DType::f32)).dtype() == DType::f32);
}

TEST_CASE("comparisons on integers compare the integers exactly and give bools", "[int]") {
  const Tensor a = ints({big + 1, 2, 3}), b = ints({big, 2, 4});  // big + 1 and big are equal as doubles
  CHECK(less(a, b).dtype() == DType::boolean);
  CHECK(less(a, b).to_vector<std::int64_t>() == I64{0, 0, 1});
  CHECK(greater(a, b).to_vector<std::int64_t>() == I64{1, 0, 0});
  CHECK(equal(a, b).to_vector<std::int64_t>() == I64{0, 1, 0});
  CHECK(not_equal(a, b).to_vector<std::int64_t>() == I64{1, 0, 1});
  CHECK(less_equal(a, b).to_vector<std::int64_t>() == I64{0, 1, 1});
  CHECK(greater_equal(a, b).to_vector<std::int64_t>() == I64{1, 1, 0});
  CHECK(less(ints({1, 5}, DType::i32), ints({3, 3}, DType::i32)).dtype() == DType::boolean);
  const Tensor f = Tensor::from_vector({1.5, 2.0}, {2});
  CHECK(less(f, ints({2, 2})).dtype() == DType::boolean);
  require_close(less(f, ints({2, 2})), {1, 0});
  require_close(equal(f, Tensor::from_vector({1.5, 3.0}, {2})), {1, 0});
}

TEST_CASE("where takes integer values and conditions of any dtype", "[int]") {
  const Tensor a = ints({big + 1, 2, 3}), b = ints({-1, -2, -3});
  const Tensor c = ints({1, 0, 5});
  const Tensor w = where(c, a, b);
  CHECK(w.dtype() == DType::i64);
  CHECK(w.to_vector<std::int64_t>() == I64{big + 1, -2, 3});
  // A float condition picks by != 0, also where a conversion to the integers would make it 0.
  const Tensor fc = Tensor::from_vector({0.5, 0.0, std::nan("")}, {3});
  CHECK(where(fc, a, b).to_vector<std::int64_t>() == I64{big + 1, -2, 3});
  // An int64 condition that would wrap to 0 as int32 still selects.
  const Tensor wide = ints({std::int64_t{1} << 32, 0});
  CHECK(where(wide, ints({1, 1}, DType::i32), ints({0, 0}, DType::i32)).to_vector<std::int32_t>() == I32{1, 0});
  // An integer condition for float values.
  require_close(where(ints({0, 3}), Tensor::from_vector({1.5, 2.5}, {2}), zeros({2})), {0, 2.5});
  CHECK(where(fc, a, Tensor::from_vector({0.25, 0.25, 0.25}, {3})).dtype() == DType::f64);
}

TEST_CASE("sum and max of integers are exact, sums wrap, mean is float64", "[int]") {
  const Tensor m = ints({big, 1, 1, -2, i64_max, i64_min}, {2, 3});
  CHECK(sum(m, {1}).to_vector<std::int64_t>() == I64{big + 2, -3});
  CHECK(sum(m).item<std::int64_t>() == big - 1);
  CHECK(sum(m).dtype() == DType::i64);
  CHECK(max(m, {0}).to_vector<std::int64_t>() == I64{big, i64_max, 1});
  CHECK(max(m).item<std::int64_t>() == i64_max);
  CHECK(max(ints({i64_min, i64_min})).item<std::int64_t>() == i64_min);
  CHECK(sum(ints({i64_max, 1})).item<std::int64_t>() == i64_min);  // wraps
  CHECK(sum(ints({i32_max, i32_max, 2}, DType::i32)).item<std::int32_t>() == 0);
  CHECK(sum(ints({i32_max, i32_max, 2}, DType::i32)).dtype() == DType::i32);
  CHECK(sum(ints({1, 2}, {2}), {0}, true).shape() == Shape{1});
  const Tensor mu = mean(ints({1, 2}));
  CHECK(mu.dtype() == DType::f64);
  CHECK(mu.item() == 1.5);
  CHECK(mean(ints({big + 1, big + 1})).item() == static_cast<double>(big));
}

TEST_CASE("layout and indexing ops move integers exactly", "[int]") {
  const Tensor m = ints({big + 1, 2, 3, 4, 5, big + 7}, {2, 3});
  CHECK(m.reshape({3, 2}).to_vector<std::int64_t>() == I64{big + 1, 2, 3, 4, 5, big + 7});
  CHECK(transpose(m).to_vector<std::int64_t>() == I64{big + 1, 4, 2, 5, 3, big + 7});
  CHECK(m.t().dtype() == DType::i64);
  CHECK(swapaxes(m, 0, 1).to_vector<std::int64_t>() == I64{big + 1, 4, 2, 5, 3, big + 7});
  CHECK(slice(m, 1, 1, 3).to_vector<std::int64_t>() == I64{2, 3, 5, big + 7});
  CHECK(broadcast_to(ints({big + 1, 2}, {2}), {2, 2}).to_vector<std::int64_t>() == I64{big + 1, 2, big + 1, 2});
  CHECK(concatenate({ints({1}), ints({big + 1})}).to_vector<std::int64_t>() == I64{1, big + 1});
  CHECK(concatenate({ints({1}, DType::i32), ints({big + 1})}).dtype() == DType::i64);
  CHECK(stack({ints({1, 2}), ints({3, 4})}).shape() == Shape{2, 2});
  CHECK(stack({ints({1, 2}), ints({3, 4})}, 1).to_vector<std::int64_t>() == I64{1, 3, 2, 4});
  const Tensor sq = ints({1, 2, 3, 4}, {2, 2});
  CHECK(diagonal(sq).to_vector<std::int64_t>() == I64{1, 4});
  CHECK(diag(ints({big + 1, 2})).to_vector<std::int64_t>() == I64{big + 1, 0, 0, 2});
  CHECK(tril(sq).to_vector<std::int64_t>() == I64{1, 0, 3, 4});
  CHECK(triu(sq).to_vector<std::int64_t>() == I64{1, 2, 0, 4});
  CHECK(stop_gradient(m).dtype() == DType::i64);
  CHECK(fmt::format("{}", ints({big + 1, -2})) == "Tensor([9007199254740993,               -2], dtype=int64)");
}

TEST_CASE("float-only ops refuse integers with an error naming the op and the dtype", "[int]") {
  const Tensor i = ints({1, 2, 3, 4}, {2, 2}), f = eye(2);
  const Tensor v = ints({1, 2}, DType::i32);
  auto refuses = [](auto&& fn, const std::string& op, const std::string& dtype) {
    const std::string e = error_of(fn);
    CHECK_THAT(e, Catch::StartsWith(op + ":") && Catch::Contains(dtype));
  };
  refuses([&] { exp(i); }, "exp", "int64");
  refuses([&] { log(v); }, "log", "int32");
  refuses([&] { log1p(i); }, "log1p", "int64");
  refuses([&] { sqrt(i); }, "sqrt", "int64");
  refuses([&] { square(i); }, "square", "int64");
  refuses([&] { sin(i); }, "sin", "int64");
  refuses([&] { cos(i); }, "cos", "int64");
  refuses([&] { tanh(i); }, "tanh", "int64");
  refuses([&] { pow(i, i); }, "pow", "int64");
  refuses([&] { matmul(i, i); }, "matmul", "int64");
  refuses([&] { cholesky(i); }, "cholesky", "int64");
  refuses([&] { cholesky_checked(i); }, "cholesky_checked", "int64");
  refuses([&] { cho_factor(i); }, "cho_factor", "int64");
  refuses([&] { logdet(i); }, "cho_factor", "int64");  // logdet(A) factors A first
  refuses([&] { triangular_solve(i, i); }, "triangular_solve", "int64");
  refuses([&] { cumsum(i, 1); }, "cumsum", "int64");
  refuses([&] { logsumexp(v); }, "logsumexp", "int32");
  refuses([&] { logsumexp(ints({}, {0})); }, "logsumexp", "int64");
  // A float operand promotes the integer one first (int with float gives the float).
  CHECK(pow(i, 2.0).dtype() == DType::f64);
  require_close(pow(i, 2.0), {1, 4, 9, 16});
  require_close(matmul(i, f), {1, 2, 3, 4});
  require_close(cho_solve(cho_factor(f), i), {1, 2, 3, 4});
}

TEST_CASE("no gradient flows through integers; integer arguments, captures and results are allowed", "[int]") {
  const Tensor x = Tensor::from_vector({0.5, -1.0, 2.0}, {3});
  const Tensor groups = ints({0, 1, 1});
  // An integer argument that is not differentiated, used as a mask and as a count.
  auto loss = [](const Tensor& p, const Tensor& g) { return sum(p * p * g) + sum(g) * sum(p); };
  const auto [value, grads] = value_and_grad(loss, {0})(x, groups);
  CHECK(value.item() == Approx(1.0 + 4.0 + 2.0 * 1.5));
  require_close(grads[0], {2 * 0.5 * 0 + 2, 2 * -1.0 + 2, 2 * 2.0 + 2}, 1e-14);
  // The same with the integers captured.
  const Tensor g = grad([&](const Tensor& p) { return loss(p, groups); })(x);
  require_close(g, grads[0], 0.0);
  // Against central differences.
  vt::testing::check_gradients([&](const std::vector<Tensor>& a) { return loss(a[0], groups); }, {x});
  // A gradient stops where a float becomes an integer: floor-like truncation is piecewise constant.
  const Tensor through = grad([](const Tensor& p) { return sum(p.astype(DType::i64).astype(DType::f64) + p); })(x);
  require_close(through, {1, 1, 1}, 0.0);
  // Differentiating with respect to an integer, or an integer output, is an error.
  CHECK_THAT(error_of([&] { value_and_grad(loss, {1})(x, groups); }),
             Catch::Contains("grad") && Catch::Contains("argument 1") && Catch::Contains("int64"));
  CHECK_THAT(error_of([&] { grad([](const Tensor& p) { return sum(p); })(groups); }),
             Catch::Contains("grad") && Catch::Contains("int64"));
  CHECK_THAT(error_of([&] { grad([&](const Tensor& p) { return sum(p.astype(DType::i64)); })(x); }),
             Catch::Contains("grad") && Catch::Contains("int64"));
  // vjp: integer primals get zero cotangents of their dtype; an integer result's pullback gives zeros.
  auto [out, pullback] = vjp([](const Tensor& p, const Tensor& k) { return p * k; }, x, groups);
  const std::vector<Tensor> cot = pullback(ones({3}));
  require_close(cot[0], {0, 1, 1}, 0.0);
  CHECK(cot[1].dtype() == DType::i64);
  CHECK(cot[1].to_vector<std::int64_t>() == I64{0, 0, 0});
  auto [iout, ipull] = vjp([](const Tensor& p, const Tensor& k) { return k + p.astype(DType::i64); }, x, groups);
  CHECK(iout.dtype() == DType::i64);
  CHECK(iout.to_vector<std::int64_t>() == I64{0, 0, 3});
  require_close(ipull(ones({3}, DType::i64))[0], {0, 0, 0}, 0.0);
}

TEST_CASE("vmap over integer inputs, with integer results", "[int][vmap]") {
  const Tensor X = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor K = ints({big + 1, 2, 3, 4, 5, 6}, {3, 2});
  auto f = [](const Tensor& x, const Tensor& k) { return std::pair{sum(x * k), k * 2 + 1}; };
  const auto [s, k2] = vmap(f)(X, K);
  CHECK(s.is_batched());
  CHECK(k2.is_batched());
  CHECK(k2.dtype() == DType::i64);
  CHECK(unbatch(k2).to_vector<std::int64_t>() == I64{2 * big + 3, 5, 7, 9, 11, 13});
  require_close(unbatch(s), {1 + 2.0 * 2 + static_cast<double>(big + 1) * 1 - 1 + 1, 3 * 3 + 4 * 4.0, 5 * 5 + 6 * 6.0},
                1e-15);
  // as_batch of integers, batch reductions and an unmapped integer argument.
  const Tensor B = as_batch(K);
  CHECK(B.dtype() == DType::i64);
  CHECK(batch_sum(B).to_vector<std::int64_t>() == I64{big + 9, 12});
  CHECK(batch_max(B).to_vector<std::int64_t>() == I64{big + 1, 6});
  CHECK(batch_mean(B).dtype() == DType::f64);
  CHECK(sum(B).item<std::int64_t>() == big + 21);
  const Tensor offsets = ints({10, 20});
  const Tensor shifted = vmap([](const Tensor& k, const Tensor& o) { return k + o; }, {0, not_mapped})(K, offsets);
  CHECK(unbatch(shifted).to_vector<std::int64_t>() == I64{big + 11, 22, 13, 24, 15, 26});
  // Per-example gradients with an integer argument.
  const Tensor G = vmap(grad([](const Tensor& x, const Tensor& k) { return sum(x * x * k); }))(X, K);
  require_close(unbatch(G), {2.0 * static_cast<double>(big + 1), 8, 18, 32, 50, 72}, 1e-15);
}

TEST_CASE("jit takes integer arguments, constants and results; one trace serves every batch size", "[int][jit]") {
  const Tensor weights = ints({1, 2, 3});  // a captured integer constant
  auto step = jit([&](const Tensor& p, const Tensor& k) {
    const Tensor counts = k * weights + 1;             // int64
    const Tensor small = less(k, ints({2}, Shape{}));  // bool
    const Tensor odd = k.astype(DType::i32) * 3;       // 12 bytes per example between 8-byte values in the arena
    return std::tuple{sum(p * counts, {0}) + sum(p * odd, {0}), counts, where(small, p, zeros({})),
                      sum(k, {0}).astype(DType::i32)};
  });
  for (std::int64_t b : {1, 2, 5}) {
    std::vector<double> pv;
    I64 kv;
    for (std::int64_t i = 0; i < 3 * b; ++i) {
      pv.push_back(0.25 * static_cast<double>(i) - 1.0);
      kv.push_back((i % 4) + (i == 0 ? big : 0));
    }
    const Tensor P = as_batch(Tensor::from_vector(pv, {b, 3}));
    const Tensor K = as_batch(ints(kv, {b, 3}));
    const auto [s, counts, masked, ksum] = step(P, K);
    // Eagerly, op by op.
    const Tensor es = sum(P * (K * weights + 1), {0}) + sum(P * (K.astype(DType::i32) * 3), {0});
    const Tensor ecounts = K * weights + 1;
    const Tensor emasked = where(less(K, ints({2}, Shape{})), P, zeros({}));
    const Tensor eksum = sum(K, {0}).astype(DType::i32);
    require_close(unbatch(s), unbatch(es), 1e-15);
    CHECK(counts.dtype() == DType::i64);
    CHECK(unbatch(counts).to_vector<std::int64_t>() == unbatch(ecounts).to_vector<std::int64_t>());
    CHECK(masked.dtype() == DType::f64);
    require_close(unbatch(masked), unbatch(emasked), 0.0);
    // An int32 result mixed with 8-byte values in the plan's arena.
    CHECK(ksum.dtype() == DType::i32);
    CHECK(ksum.is_batched());
    CHECK(ksum.to_vector<std::int32_t>() == eksum.to_vector<std::int32_t>());
    CHECK(unbatch(counts).at<std::int64_t>({0, 0}) == big + 1);
  }
  CHECK(step.counters().traces == 1);
  // The dtype is part of the cache key.
  const Tensor P = as_batch(randn({2, 3}, 3));
  step(P, as_batch(ints({0, 1, 2, 3, 0, 1}, {2, 3}, DType::i32)));
  CHECK(step.counters().traces == 2);
  // A jitted gradient with an integer argument.
  auto g = jit(grad([](const Tensor& x, const Tensor& k) { return sum(x * x * k); }));
  require_close(g(Tensor::from_vector({1, 2}, {2}), ints({3, 4})), {6, 16}, 0.0);
}

TEST_CASE("npy: numpy's int32 and int64 files load exactly and integer tensors round-trip", "[int][npy]") {
  const Tensor i64 = load_npy(data("i64.npy"));
  CHECK(i64.dtype() == DType::i64);
  CHECK(i64.shape() == Shape{2, 4});
  CHECK(i64.to_vector<std::int64_t>() == I64{0, -1, 7, big + 1, -(big + 3), i64_max, i64_min, 42});
  const Tensor i32 = load_npy(data("i32.npy"));
  CHECK(i32.dtype() == DType::i32);
  CHECK(i32.to_vector<std::int32_t>() == I32{3, -4, i32_max, i32_min, 0, 1});
  CHECK(load_npy(data("scalar_i64.npy")).item<std::int64_t>() == big + 1);
  CHECK(load_npy(data("groups.npy")).to_vector<std::int64_t>() == I64{0, 2, 1, 2, 0, 2});
  // vtape's results against numpy's.
  CHECK(sum(i64, {1}).to_vector<std::int64_t>() == load_npy(data("i64_sum_axis1.npy")).to_vector<std::int64_t>());
  CHECK(sum(i32).item<std::int32_t>() == load_npy(data("i32_sum.npy")).item<std::int32_t>());
  CHECK(max(i64, {0}).to_vector<std::int64_t>() == load_npy(data("i64_max_axis0.npy")).to_vector<std::int64_t>());
  CHECK(load_npy(data("floats.npy")).astype(DType::i64).to_vector<std::int64_t>() ==
        load_npy(data("floats_as_i64.npy")).to_vector<std::int64_t>());
  // Round trips, plain and batched (batch as the leading axis).
  const std::string path = "vtape_test_int_roundtrip.npy";
  for (const Tensor& t : {i64, i32, ints({big + 1}, Shape{}), ints({}, {0, 3}, DType::i32)}) {
    save_npy(path, t);
    const Tensor back = load_npy(path);
    CHECK(back.dtype() == t.dtype());
    CHECK(back.shape() == t.shape());
    CHECK(back.to_vector<std::int64_t>() == t.to_vector<std::int64_t>());
  }
  save_npy(path, as_batch(i32.reshape({3, 2})));
  const Tensor batched = load_npy(path);
  CHECK(batched.shape() == Shape{3, 2});
  CHECK(batched.to_vector<std::int32_t>() == I32{3, -4, i32_max, i32_min, 0, 1});
  std::remove(path.c_str());
}

TEST_CASE("integer tensors on a stand-in device: creation, reads, transfers, ops and jit", "[int][device]") {
  const Device stand_in = Device::cuda(6);
  vt::testing::OpaqueDevice device(stand_in);
  const Tensor k = Tensor::from_ints({big + 1, -2, 3, i64_min}, {2, 2}, DType::i64, stand_in);
  CHECK(k.device() == stand_in);
  CHECK(k.to_vector<std::int64_t>() == I64{big + 1, -2, 3, i64_min});
  CHECK(k.at<std::int64_t>({0, 0}) == big + 1);
  CHECK(k.to_vector<std::int32_t>() == I32{1, -2, 3, 0});  // low 32 bits
  CHECK(to_device(k, Device::cpu()).to_vector<std::int64_t>() == k.to_vector<std::int64_t>());
  CHECK(fmt::format("{}", k) ==
        "Tensor([[    9007199254740993,                   -2],\n"
        "        [                   3, -9223372036854775808]], dtype=int64)");
  CHECK((k + 1).to_vector<std::int64_t>() == I64{big + 2, -1, 4, i64_min + 1});
  CHECK(sum(k, {1}).to_vector<std::int64_t>() == I64{big - 1, i64_min + 3});
  CHECK(zeros({2}, DType::i32, stand_in).to_vector<std::int32_t>() == I32{0, 0});
  CHECK(arange(0, 3, 1, DType::i32, stand_in).to_vector<std::int32_t>() == I32{0, 1, 2});
  const Tensor f = Tensor::from_vector({2.9, -2.9, std::nan("")}, {3}, DType::f32, stand_in);
  CHECK(f.astype(DType::i32).to_vector<std::int32_t>() == I32{2, -2, 0});
  CHECK(f.to_vector<std::int64_t>() == I64{2, -2, 0});
  // A jitted function with integer arguments on the device, one trace for two batch sizes.
  auto step = jit([](const Tensor& x, const Tensor& i) { return std::pair{sum(x * i, {0}), i * i}; });
  for (std::int64_t b : {2, 3}) {
    const Tensor X = as_batch(ones({b, 2}, DType::f64, stand_in));
    const Tensor I = as_batch(arange(0, static_cast<double>(2 * b), 1, DType::i64, stand_in).reshape({b, 2}));
    const auto [s, sq] = step(X, I);
    CHECK(s.device() == stand_in);
    CHECK(sq.dtype() == DType::i64);
    CHECK(unbatch(sq).to_vector<std::int64_t>().back() == (2 * b - 1) * (2 * b - 1));
    CHECK(unbatch(s).to_vector<double>().front() == 1.0);
  }
  CHECK(step.counters().traces == 1);
}
