#include "gradcheck.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::require_close;

TEST_CASE("sum, mean and max over all axes and given axes", "[reduce]") {
  const Tensor a = arange(0, 6).reshape({2, 3});
  CHECK(sum(a).item() == 15);
  CHECK(mean(a).item() == 2.5);
  CHECK(max(a).item() == 5);
  require_close(sum(a, {0}), {3, 5, 7});
  require_close(sum(a, {-1}), {3, 12});
  require_close(mean(a, {1}), {1, 4});
  require_close(max(a, {0}), {3, 4, 5});
  CHECK(sum(a, {1}, true).shape() == Shape{2, 1});
  CHECK(sum(a, {0, 1}, true).shape() == Shape{1, 1});
  CHECK(mean(a, {}, true).shape() == Shape{1, 1});
  CHECK(sum(Tensor::scalar(3.0)).item() == 3.0);
}

TEST_CASE("reduction gradients match finite differences", "[reduce][grad]") {
  const Tensor x = randn({3, 4, 2}, 11);
  for (const Axes& axes : std::vector<Axes>{{}, {0}, {1}, {2}, {0, 2}, {-1, -2}})
    for (bool keep : {false, true}) {
      INFO("axes " << axes.size() << " keepdims " << keep);
      check_gradients([&](auto& a) { return sum(a[0], axes, keep); }, {x});
      check_gradients([&](auto& a) { return mean(a[0], axes, keep); }, {x});
      check_gradients([&](auto& a) { return max(a[0], axes, keep); }, {x});
    }
}

TEST_CASE("max splits the gradient evenly between ties", "[reduce][grad]") {
  const Tensor x = Tensor::from_vector({1.0, 3.0, 3.0, 2.0}, {4});
  require_close(grad([](const Tensor& a) { return max(a); })(x), {0, 0.5, 0.5, 0});
}

TEST_CASE("reshape, transpose, swapaxes and broadcast_to move elements", "[layout]") {
  const Tensor a = arange(0, 6).reshape({2, 3});
  require_close(transpose(a), {0, 3, 1, 4, 2, 5});
  CHECK(transpose(a).shape() == Shape{3, 2});
  require_close(a.t(), transpose(a));
  const Tensor b = arange(0, 24).reshape({2, 3, 4});
  const Tensor p = transpose(b, {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.at({3, 1, 2}) == b.at({1, 2, 3}));
  CHECK(swapaxes(b, 0, 2).at({3, 2, 1}) == b.at({1, 2, 3}));
  require_close(broadcast_to(Tensor::from_vector({1, 2}, {2, 1}), {2, 3}), {1, 1, 1, 2, 2, 2});
}

TEST_CASE("layout gradients match finite differences", "[layout][grad]") {
  const Tensor x = randn({2, 3, 4}, 5);
  check_gradients([](auto& a) { return reshape(a[0], {4, -1}); }, {x});
  check_gradients([](auto& a) { return transpose(a[0]); }, {x});
  check_gradients([](auto& a) { return transpose(a[0], {1, 2, 0}); }, {x});
  check_gradients([](auto& a) { return swapaxes(a[0], -1, 0); }, {x});
  check_gradients([](auto& a) { return broadcast_to(a[0], {5, 3, 4}); }, {randn({3, 1}, 6)});
}

TEST_CASE("slice, concatenate, stack and diag", "[indexing]") {
  const Tensor a = arange(0, 10);
  require_close(slice(a, 0, 2, 5), {2, 3, 4});
  require_close(slice(a, 0, 1, 10, 3), {1, 4, 7});
  require_close(slice(a, 0, -3, 100), {7, 8, 9});
  CHECK(slice(a, 0, 5, 2).numel() == 0);
  const Tensor m = arange(0, 6).reshape({2, 3});
  require_close(slice(m, 1, 1, 3), {1, 2, 4, 5});
  require_close(concatenate({m, m * 10.0}, 0), {0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50});
  require_close(concatenate({m, ones({2, 1})}, 1), {0, 1, 2, 1, 3, 4, 5, 1});
  const Tensor s = stack({ones({2}), zeros({2})}, 1);
  CHECK(s.shape() == Shape{2, 2});
  require_close(s, {1, 0, 1, 0});
  require_close(diag(Tensor::from_vector({1, 2}, {2})), {1, 0, 0, 2});
  require_close(diag(arange(0, 9).reshape({3, 3})), {0, 4, 8});
  require_close(diag(m), {0, 4});
}

TEST_CASE("indexing gradients match finite differences", "[indexing][grad]") {
  const Tensor x = randn({4, 5}, 8);
  check_gradients([](auto& a) { return slice(a[0], 1, 1, 5, 2); }, {x});
  check_gradients([](auto& a) { return slice(a[0], 0, -2, 4); }, {x});
  check_gradients([](auto& a) { return concatenate({a[0], a[1], a[0]}, 1); }, {x, randn({4, 2}, 9)});
  check_gradients([](auto& a) { return stack({a[0], a[1]}, 0); }, {x, randn({4, 5}, 10)});
  check_gradients([](auto& a) { return stack({a[0], a[1]}, -1); }, {x, randn({4, 5}, 10)});
  check_gradients([](auto& a) { return diag(a[0]); }, {x});
  check_gradients([](auto& a) { return diag(a[0]); }, {randn({3}, 12)});
}
