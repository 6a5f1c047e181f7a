#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include <vtape/core/eigen.hpp>
#include <Eigen/Dense>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::require_close;

TEST_CASE("creation ops fill the expected values", "[tensor]") {
  CHECK(zeros({2, 3}).shape() == Shape{2, 3});
  require_close(zeros({2, 2}), {0, 0, 0, 0});
  require_close(ones({3}), {1, 1, 1});
  require_close(full({2}, 2.5), {2.5, 2.5});
  require_close(eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  require_close(arange(0, 5, 2), {0, 2, 4});
  require_close(arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75});
  require_close(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  require_close(linspace(3, 7, 1), {3});
  CHECK(Tensor::scalar(4.0).ndim() == 0);
  CHECK(Tensor::scalar(4.0).item() == 4.0);
  CHECK(zeros({0, 3}).numel() == 0);
}

TEST_CASE("float32 and float64 tensors round-trip their values", "[tensor]") {
  const Tensor a = Tensor::from_vector({1.5, -2.25, 3.0}, {3}, DType::f32);
  CHECK(a.dtype() == DType::f32);
  CHECK(a.to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3.0f});
  CHECK(a.at<double>({1}) == -2.25);
  const Tensor third = Tensor::from_vector({1.0 / 3.0}, {1}, DType::f32);
  CHECK(third.item<double>() == static_cast<double>(1.0f / 3.0f));
  CHECK(third.astype(DType::f64).dtype() == DType::f64);
}

TEST_CASE("dtype promotion: the wider type wins, C++ scalars are weak", "[tensor]") {
  const Tensor f = ones({2}, DType::f32), d = ones({2}, DType::f64);
  CHECK((f + d).dtype() == DType::f64);
  CHECK((d * f).dtype() == DType::f64);
  CHECK((f * 2.0).dtype() == DType::f32);
  CHECK((2.0 - f).dtype() == DType::f32);
  CHECK(matmul(f.reshape({1, 2}), d.reshape({2, 1})).dtype() == DType::f64);
  CHECK(concatenate({f, d}).dtype() == DType::f64);
}

TEST_CASE("element access with at() and item()", "[tensor]") {
  const Tensor m = arange(0, 6).reshape({2, 3});
  CHECK(m.at({0, 0}) == 0);
  CHECK(m.at({1, 2}) == 5);
  CHECK(m.at({1, 0}) == 3);
  CHECK(m.shape(-1) == 3);
  CHECK_THROWS_AS(m.at({2, 0}), vt::Error);
  CHECK_THROWS_AS(m.at({0}), vt::Error);
  CHECK_THROWS_AS(m.item(), vt::Error);
}

TEST_CASE("Shape does what a std::vector of int64 does, within its inline axes and past them", "[tensor]") {
  // Differential: one sequence of edits applied to a Shape and to a std::vector, compared after each.
  Shape s;
  std::vector<std::int64_t> v;
  std::uint64_t state = 7;
  const auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int step = 0; step < 4000; ++step) {
    const auto x = static_cast<std::int64_t>(next(1000)) - 500;
    const std::size_t at = v.empty() ? 0 : next(v.size() + 1);
    switch (next(v.size() > 20 ? 9 : 7)) {  // long lists shrink more often
      case 0:
      case 1: s.push_back(x), v.push_back(x); break;
      case 2: s.insert(s.begin() + at, x), v.insert(v.begin() + at, x); break;
      case 3: {  // a range of itself, spliced in
        const std::size_t end = at + next(v.size() - at + 1);
        s.insert(s.begin() + at, s.begin() + at, s.begin() + end);
        const std::vector<std::int64_t> part(v.begin() + at, v.begin() + end);
        v.insert(v.begin() + at, part.begin(), part.end());
        break;
      }
      case 4: {
        const std::size_t n = next(12);
        s.resize(n, x), v.resize(n, x);
        break;
      }
      case 5: {  // copy and move round trips
        Shape copy = s;
        Shape moved = std::move(copy);
        CHECK(copy.empty());
        s = moved;
        break;
      }
      case 6:
        if (!v.empty()) s.pop_back(), v.pop_back();
        break;
      default: {
        const std::size_t end = at + next(v.size() - at + 1);
        s.erase(s.begin() + at, s.begin() + end), v.erase(v.begin() + at, v.begin() + end);
      }
    }
    REQUIRE(s.size() == v.size());
    REQUIRE(std::equal(s.begin(), s.end(), v.begin()));
    REQUIRE(s == Shape(v));
    REQUIRE(std::vector<std::int64_t>(s) == v);
  }
  CHECK((Shape{1, 2} < Shape{1, 3}));
  CHECK((Shape{} < Shape{0}));
  CHECK(Shape(3, 7) == Shape{7, 7, 7});
  CHECK_THROWS_WITH((Shape{1, 2}.at(2)), Catch::Matchers::Contains("index 2 out of range"));
}

TEST_CASE("PointerMap does what a std::unordered_map keyed by address does, through its growths", "[tensor]") {
  // Differential, as for Shape: keys are addresses within one array (neighbours, as a trace's objects often are).
  std::vector<std::int64_t> objects(3000);
  PointerMap<std::string> map;
  std::unordered_map<const void*, std::string> reference;
  std::uint64_t state = 11;
  const auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int step = 0; step < 20000; ++step) {
    const void* key = &objects[next(objects.size())];
    const std::string value = fmt::format("value {} past the short-string buffer", step);
    if (next(3) == 0) {  // a lookup
      const std::string* found = map.find(key);
      const auto expected = reference.find(key);
      REQUIRE((found != nullptr) == (expected != reference.end()));
      if (found) REQUIRE(*found == expected->second);
      continue;
    }
    const auto [at, inserted] = map.try_emplace(key, value);
    const auto [expected, expected_inserted] = reference.try_emplace(key, value);
    REQUIRE(inserted == expected_inserted);
    REQUIRE(*at == expected->second);  // the value there before, where the key was there
    REQUIRE(map.size() == reference.size());
  }
  for (const auto& [key, value] : reference) REQUIRE(map.at(key) == value);  // every value kept through the growths
  CHECK(map.size() > 2000);
  CHECK_FALSE(map.contains(&state));
  CHECK_THROWS_AS(map.at(&state), std::out_of_range);
  PointerSet set;
  CHECK(set.insert(&state));
  CHECK_FALSE(set.insert(&state));
  CHECK(set.contains(&state));
  PointerSet moved = std::move(set);  // CaptureScope::take_made_inside: the scope's set is asked again after
  CHECK(moved.contains(&state));
  CHECK(set.empty());  // NOLINT(bugprone-use-after-move): a map moved from is empty and usable
  CHECK_FALSE(set.contains(&state));
  CHECK(set.insert(&state));
}

TEST_CASE("tensors of more axes than a Shape holds inline: ops, gradients, vmap and jit", "[tensor]") {
  static_assert(Shape::inline_rank < 9);
  const Shape nine{1, 2, 1, 2, 1, 2, 1, 1, 3};  // 24 elements
  const Tensor x = arange(0, 24).astype(DType::f64).reshape(nine) * 0.1;
  CHECK(x.shape() == nine);
  // d/dx sum(x * x * 2 + x) = 4 x + 1, eagerly and per example under jit(vmap), the batch a tenth axis
  const auto f = [](const Tensor& t) { return sum(t * t * 2.0 + t); };
  const Tensor g = grad(f)(x);
  CHECK(g.shape() == nine);
  const auto xs = x.to_vector<double>();
  const auto gs = g.to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) CHECK(gs[i] == Approx(4 * xs[i] + 1));
  const Tensor batch = as_batch(stack({x, x * 2.0, x * -1.0}));
  const auto [values, grads] = jit(vmap(value_and_grad(f)))(batch);
  const Tensor expected = stack({g, grad(f)(x * 2.0), grad(f)(x * -1.0)});
  require_close(unbatch(grads), expected, 1e-14);
  CHECK(unbatch(values).to_vector<double>()[1] == Approx(f(x * 2.0).item<double>()));
  CHECK(sum(x, {0, 2, 4, 6, 7}).shape() == Shape{2, 2, 2, 3});
  CHECK(transpose(x).shape() == Shape{3, 1, 1, 2, 1, 2, 1, 2, 1});
}

TEST_CASE("reshape shares storage with its input", "[tensor]") {
  const Tensor a = arange(0, 12);
  const Tensor b = a.reshape({3, -1});
  CHECK(b.shape() == Shape{3, 4});
  CHECK(b.raw_data() == a.raw_data());
  CHECK(b.at({2, 1}) == 9);
}

TEST_CASE("Eigen interop: from_eigen copies any layout, as_eigen views without a copy", "[tensor]") {
  Eigen::MatrixXd m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  const Tensor t = Tensor::from_eigen(m);
  CHECK(t.shape() == Shape{2, 3});
  require_close(t, {1, 2, 3, 4, 5, 6});
  auto view = t.as_eigen<double>();
  CHECK(view.data() == t.data<double>());
  CHECK(view(1, 2) == 6);
  CHECK((view - m).norm() == 0);
  const Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(4, 0, 3);
  const Tensor tv = Tensor::from_eigen(v);
  CHECK(tv.shape() == Shape{4});
  CHECK(tv.dtype() == DType::f32);
  CHECK_THROWS_AS(t.as_eigen<float>(), vt::Error);
  CHECK_THROWS_AS(zeros({2, 2, 2}).as_eigen<double>(), vt::Error);
}

TEST_CASE("from_blob wraps memory without a copy and keeps its owner alive", "[tensor]") {
  auto owner = std::make_shared<std::vector<double>>(std::vector<double>{1, 2, 3, 4});
  const Tensor t = Tensor::from_blob(owner->data(), {2, 2}, DType::f64, owner);
  std::weak_ptr<std::vector<double>> watch = owner;
  owner.reset();
  CHECK_FALSE(watch.expired());
  CHECK(t.at({1, 1}) == 4);
}

TEST_CASE("fmt formats tensors like numpy", "[tensor]") {
  // numpy: repr(np.arange(4.).reshape(2, 2)), repr(np.float32(0.5)); more in test_print.cpp.
  CHECK(fmt::format("{}", arange(0, 4).reshape({2, 2})) == "Tensor([[0., 1.],\n        [2., 3.]], dtype=float64)");
  CHECK(fmt::format("{}", Tensor::scalar(0.5, DType::f32)) == "Tensor(0.5, dtype=float32)");
  CHECK(fmt::format("{}", Tensor()) == "Tensor(undefined)");
}

TEST_CASE("seeded random tensors are reproducible", "[tensor]") {
  require_close(randn({5}, 7), randn({5}, 7), 0.0);
  CHECK(randn({5}, 7).to_vector<double>() != randn({5}, 8).to_vector<double>());
  const std::vector<double> u = rand({100}, 3).to_vector<double>();
  for (double x : u) CHECK((x >= 0 && x < 1));
}
