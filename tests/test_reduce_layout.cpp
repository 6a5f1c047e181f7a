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

TEST_CASE("sums and maxima over either axis of a [N, 3] array add in the row kernel's order", "[reduce]") {
  // A short innermost axis runs by reduce_short_rows (backends/cpu/maps.cpp): each output must take its elements in
  // the order the row kernel takes them (sum_order.hpp), so the bits are the layout's rule, not the path's.
  const std::int64_t n = 5000;
  std::vector<double> x = randn({n, 3}, 21).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); i += 7) x[i] *= 1e8;  // magnitudes that make the order show in the sum
  x[3 * 1234 + 1] = std::nan("");                             // a NaN a maximum must keep
  const Tensor a = Tensor::from_vector(x, {n, 3});
  // Over the short axis: each row of 3 in sum_order's lanes (x0, x1, x2 each in a lane of its own), then the lanes'
  // tree: (x0 + x1) + x2.
  const std::vector<double> rows = sum(a, {1}).to_vector<double>(), row_max = max(a, {1}).to_vector<double>();
  for (std::int64_t i = 0; i < n; ++i) {
    const double* r = x.data() + 3 * i;
    INFO("row " << i);
    if (i == 1234) continue;
    CHECK(rows[static_cast<std::size_t>(i)] == (r[0] + r[1]) + r[2]);
    CHECK(row_max[static_cast<std::size_t>(i)] == std::max({r[0], r[1], r[2]}));
  }
  CHECK(std::isnan(rows[1234]));
  CHECK(std::isnan(row_max[1234]));
  // Over the long axis: each column's elements one after the other, as the rows of 3 added them.
  const std::vector<double> columns = sum(a, {0}).to_vector<double>(), column_max = max(a, {0}).to_vector<double>();
  for (std::int64_t j = 0; j < 3; ++j) {
    double s = 0, m = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) {
      s += x[static_cast<std::size_t>(3 * i + j)];
      const double v = x[static_cast<std::size_t>(3 * i + j)];
      if (v > m || v != v) m = v;
    }
    if (j == 1) {
      CHECK(std::isnan(columns[1]));
      CHECK(std::isnan(column_max[1]));
    } else {
      CHECK(columns[static_cast<std::size_t>(j)] == s);
      CHECK(column_max[static_cast<std::size_t>(j)] == m);
    }
  }
}
