// take, scatter_add, at(...).set/add and the segment reductions: values against plain loops,
// gradients against finite differences, every batching combination, jit, errors.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gradcheck.hpp"
#include "device_suite.hpp"
#include "opaque_device.hpp"

using namespace vt;
using vt::testing::check_gradients;
using vt::testing::error_of;
using vt::testing::require_close;

namespace {

using Ints = std::vector<std::int64_t>;

Tensor ints(const Ints& v, const Shape& shape, DType dtype = DType::i64) { return Tensor::from_ints(v, shape, dtype); }

// numpy.take by loops: out[p, j, q] = x[p, wrap(idx[j]), q].
std::vector<double> take_loop(const std::vector<double>& x, const Shape& xs, const Ints& idx, std::size_t axis) {
  std::int64_t before = 1, after = 1;
  for (std::size_t d = 0; d < axis; ++d) before *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) after *= xs[d];
  const std::int64_t len = xs[axis];
  std::vector<double> out;
  for (std::int64_t p = 0; p < before; ++p)
    for (std::int64_t i : idx) {
      const std::int64_t j = i < 0 ? i + len : i;
      for (std::int64_t q = 0; q < after; ++q) out.push_back(x[static_cast<std::size_t>((p * len + j) * after + q)]);
    }
  return out;
}

// scatter by loops, in order (the last assignment wins, sums in order).
std::vector<double> scatter_loop(std::vector<double> x, const Shape& xs, const Ints& idx, const std::vector<double>& u,
                                 std::size_t axis, bool assign) {
  std::int64_t before = 1, after = 1;
  for (std::size_t d = 0; d < axis; ++d) before *= xs[d];
  for (std::size_t d = axis + 1; d < xs.size(); ++d) after *= xs[d];
  const std::int64_t len = xs[axis], n = static_cast<std::int64_t>(idx.size());
  for (std::int64_t p = 0; p < before; ++p)
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t j = idx[static_cast<std::size_t>(k)] < 0 ? idx[static_cast<std::size_t>(k)] + len
                                                                  : idx[static_cast<std::size_t>(k)];
      for (std::int64_t q = 0; q < after; ++q) {
        double& dst = x[static_cast<std::size_t>((p * len + j) * after + q)];
        const double v = u[static_cast<std::size_t>((p * n + k) * after + q)];
        dst = assign ? v : dst + v;
      }
    }
  return x;
}

enum class Seg { sum, mean, max };
std::vector<double> segment_loop(const std::vector<double>& data, std::int64_t rows, const Ints& ids,
                                 std::int64_t segments, Seg kind) {
  const std::int64_t width = rows == 0 ? 0 : static_cast<std::int64_t>(data.size()) / rows;
  std::vector<double> out(static_cast<std::size_t>(segments * width),
                          kind == Seg::max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<double> count(static_cast<std::size_t>(segments), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t s = ids[static_cast<std::size_t>(r)];
    count[static_cast<std::size_t>(s)] += 1;
    for (std::int64_t c = 0; c < width; ++c) {
      double& o = out[static_cast<std::size_t>(s * width + c)];
      const double v = data[static_cast<std::size_t>(r * width + c)];
      o = kind == Seg::max ? std::max(o, v) : o + v;
    }
  }
  if (kind == Seg::mean)
    for (std::int64_t s = 0; s < segments; ++s) {
      const double n = count[static_cast<std::size_t>(s)];
      for (std::int64_t c = 0; c < width && n > 0; ++c) out[static_cast<std::size_t>(s * width + c)] /= n;
    }
  return out;
}

// The i-th example of a batched tensor, or the tensor itself when it is not batched.
Tensor example(const Tensor& x, std::int64_t i) {
  if (!x.is_batched()) return x;
  const Tensor plain = unbatch(x);
  Shape s(plain.shape().begin() + 1, plain.shape().end());
  return reshape(slice(plain, 0, i, i + 1), s);
}

}  // namespace

TEST_CASE("take: values against a loop along every axis, negative and repeated indices, int32 and int64", "[gather]") {
  const Shape xs{3, 4, 5};
  const Tensor x = randn(xs, 1);
  const Ints idx{2, -1, 0, 2, -3, 1};
  for (DType index_dtype : {DType::i64, DType::i32})
    for (std::size_t axis = 0; axis < 3; ++axis) {
      INFO("axis " << axis << ", " << name_of(index_dtype));
      const Ints in_range = [&] {
        Ints v = idx;
        for (auto& i : v) i = i % xs[axis];  // keeps the sign: -3 % 3 == 0, -1 stays -1
        return v;
      }();
      const Tensor got = take(x, ints(in_range, {2, 3}, index_dtype), static_cast<std::int64_t>(axis));
      Shape want_shape(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(axis));
      want_shape.insert(want_shape.end(), {2, 3});
      want_shape.insert(want_shape.end(), xs.begin() + static_cast<std::ptrdiff_t>(axis) + 1, xs.end());
      CHECK(got.shape() == want_shape);
      require_close(got, take_loop(x.to_vector<double>(), xs, in_range, axis), 0.0);
    }
  // Axis -1, a scalar index (the axis disappears), float32 data, and an integer tensor taken from.
  require_close(take(x, ints({-2}, {}), -1), take_loop(x.to_vector<double>(), xs, {3}, 2), 0.0);
  CHECK(take(x, ints({-2}, {}), -1).shape() == Shape{3, 4});
  const Tensor xf = x.astype(DType::f32);
  CHECK(take(xf, ints({1, 1}, {2}), 1).dtype() == DType::f32);
  require_close(take(xf, ints({1, 1}, {2}), 1), take_loop(xf.to_vector<double>(), xs, {1, 1}, 1), 0.0);
  const Tensor labels = ints({7, 8, 9}, {3});
  const Tensor picked = take(labels, ints({2, 0, 2, 1}, {4}));
  CHECK(picked.dtype() == DType::i64);
  CHECK(picked.to_vector<std::int64_t>() == Ints{9, 7, 9, 8});
  // No index at all: an empty result.
  CHECK(take(x, ints({}, {0}), 1).shape() == Shape{3, 0, 5});
}

TEST_CASE("scatter_add and at(): repeated indices accumulate, set keeps the last occurrence", "[gather]") {
  const Shape xs{4, 3};
  const Tensor x = randn(xs, 2);
  const Ints idx{1, 3, 1, -4, 1};  // 1 three times, 0 (as -4) once
  for (std::size_t axis : {0u, 1u}) {
    INFO("axis " << axis);
    const Ints in_range = axis == 0 ? idx : Ints{1, 2, 1, -3, 1};
    const Shape us = axis == 0 ? Shape{5, 3} : Shape{4, 5};
    const Tensor u = randn(us, 3);
    const Tensor i = ints(in_range, {5});
    const auto ax = static_cast<std::int64_t>(axis);
    require_close(scatter_add(x, i, u, ax),
                  scatter_loop(x.to_vector<double>(), xs, in_range, u.to_vector<double>(), axis, false), 1e-15);
    require_close(at(x, i, ax).add(u), scatter_add(x, i, u, ax), 0.0);
    require_close(at(x, i, ax).set(u),
                  scatter_loop(x.to_vector<double>(), xs, in_range, u.to_vector<double>(), axis, true), 0.0);
    require_close(at(x, i, ax).get(), take(x, i, ax), 0.0);
  }
  // Values broadcast to the indexed elements: a scalar zeroes rows 0 and 2.
  const Tensor zeroed = at(x, ints({0, 2}, {2})).set(0.0);
  std::vector<double> want = x.to_vector<double>();
  for (int c = 0; c < 3; ++c) want[static_cast<std::size_t>(c)] = want[static_cast<std::size_t>(6 + c)] = 0.0;
  require_close(zeroed, want, 0.0);
  // One row broadcast to every indexed row, converted to x's dtype.
  const Tensor row = Tensor::from_vector({1, 2, 3}, {3}, DType::f32);
  const Tensor added = at(x, ints({3, 3}, {2})).add(row);
  CHECK(added.dtype() == DType::f64);
  want = x.to_vector<double>();
  for (int c = 0; c < 3; ++c) want[static_cast<std::size_t>(9 + c)] += 2.0 * (c + 1);
  require_close(added, want, 1e-15);
  // The input is untouched (functional updates).
  require_close(x, randn(xs, 2), 0.0);
}

TEST_CASE("scatter: runs of one index (sorted segment ids) combine exactly as one update at a time", "[gather]") {
  // The CPU combines a run of updates to one element in a register (backends/cpu/indexed.cpp): the same
  // operations in the same order, so bitwise equal to the loop, for a run broken and resumed, a run at either end,
  // and along an axis with elements after it.
  const Ints idx{0, 0, 0, 2, 2, 1, 2, 2, 2, 3, 3, 0, 3};
  const auto n = static_cast<std::int64_t>(idx.size());
  for (std::size_t axis : {0u, 1u}) {
    INFO("axis " << axis);
    const Shape xs = axis == 0 ? Shape{4, 3} : Shape{3, 4};
    const Shape us = axis == 0 ? Shape{n, 3} : Shape{3, n};
    const Tensor x = randn(xs, 5) * 1e3, u = randn(us, 6);
    const Tensor i = ints(idx, {n});
    const auto ax = static_cast<std::int64_t>(axis);
    require_close(scatter_add(x, i, u, ax),
                  scatter_loop(x.to_vector<double>(), xs, idx, u.to_vector<double>(), axis, false), 0.0);
    require_close(at(x, i, ax).set(u), scatter_loop(x.to_vector<double>(), xs, idx, u.to_vector<double>(), axis, true),
                  0.0);
  }
  // segment_max over runs, a NaN inside a run winning it, and a batch of examples sharing the ids.
  const Tensor data = Tensor::from_vector({1, 5, 2, std::nan(""), 3, -1, 4}, {7});
  const std::vector<double> mx = segment_max(data, ints({0, 0, 0, 1, 1, 2, 2}, {7}), 3).to_vector<double>();
  CHECK(mx[0] == 5);
  CHECK(std::isnan(mx[1]));
  CHECK(mx[2] == 4);
  const Tensor batch = randn({5, n}, 7);
  const Tensor summed = vmap([&](const Tensor& row) { return segment_sum(row, ints(idx, {n}), 4); })(as_batch(batch));
  const std::vector<double> b = batch.to_vector<double>(), got = unbatch(summed).to_vector<double>();
  for (std::int64_t e = 0; e < 5; ++e) {
    const std::vector<double> row(b.begin() + e * n, b.begin() + (e + 1) * n);
    const std::vector<double> want = segment_loop(row, n, idx, 4, Seg::sum);
    for (std::size_t k = 0; k < want.size(); ++k) CHECK(got[static_cast<std::size_t>(e * 4) + k] == want[k]);
  }
}

TEST_CASE("segment_sum and segment_max under nested grads: the data's cotangent is computed once", "[gather][grad]") {
  // The inner grad (w.r.t. w) does not want the data's cotangent, though the data is tracked by the
  // outer grad: only the outer pass computes it (take is the data's adjoint's first op). (The
  // adjoints also honour ctx.needs, but with integer ids it is never false when they run.)
  const Tensor ids = ints({2, 0, 2, 1}, {4}), x = randn({4}, 90), w = randn({3}, 91);
  for (bool use_max : {false, true}) {
    INFO("segment_max: " << use_max);
    auto seg = [&](const Tensor& d) { return use_max ? segment_max(d, ids, 3) : segment_sum(d, ids, 3); };
    OpCounter ops;
    const Tensor g =
        grad([&](const Tensor& xx) { return sum(grad([&](const Tensor& ww) { return sum(seg(xx) * ww); })(w)); })(x);
    CHECK(ops.forward("take") == (use_max ? 3 : 1));  // one adjoint of the data: 3 takes for max, 1 for sum
    // d/dx sum(seg(x)) is 1 for every element (sum), or for each segment's maximal element (max).
    const std::vector<double> xv = x.to_vector<double>(), got = g.to_vector<double>();
    for (std::size_t k = 0; k < xv.size(); ++k) {
      const bool is_max = k == 1 || k == 3 || xv[k] == std::max(xv[0], xv[2]);
      CHECK(got[k] == (use_max && !is_max ? 0.0 : 1.0));
    }
  }
}

TEST_CASE("scatter on the CPU's parallel path (64k updates or more): repeated indices, in order", "[gather]") {
  // 3 x 40000 updates: the columns are split across threads; each column sees its updates in order.
  const Shape xs{4, 40000};
  const Ints idx{1, 1, 1};
  const Tensor u = randn({3, 40000}, 80);
  const std::vector<double> x0(4 * 40000, 0.0), uv = u.to_vector<double>();
  require_close(at(zeros(xs), ints(idx, {3})).set(u), scatter_loop(x0, xs, idx, uv, 0, true), 0.0);
  require_close(at(zeros(xs), ints(idx, {3})).add(u), scatter_loop(x0, xs, idx, uv, 0, false), 0.0);
  // Batched: the batch (4 examples of [4, 20000], 3 updates each) is the axis split across threads.
  const Tensor ub = randn({4, 3, 20000}, 81), xb = randn({4, 4, 20000}, 82);
  const Ints idb{2, 0, 2};
  const Shape plain{4, 4, 20000};
  const Tensor set_b = at(as_batch(xb), ints(idb, {3})).set(as_batch(ub));
  const Tensor add_b = at(as_batch(xb), ints(idb, {3})).add(as_batch(ub));
  CHECK(set_b.batch_size() == 4);
  require_close(unbatch(set_b), scatter_loop(xb.to_vector<double>(), plain, idb, ub.to_vector<double>(), 1, true), 0.0);
  require_close(unbatch(add_b), scatter_loop(xb.to_vector<double>(), plain, idb, ub.to_vector<double>(), 1, false),
                0.0);
}

TEST_CASE("segment_sum, segment_mean, segment_max: values against loops, unsorted ids, empty segments", "[gather]") {
  const Ints ids{3, 0, 3, 1, 0, 3, 5, 1};  // segments 2 and 4 are empty
  const Tensor data = randn({8, 2, 3}, 4);
  const Tensor i = ints(ids, {8});
  const std::vector<double> d = data.to_vector<double>();
  const Tensor s = segment_sum(data, i, 6), m = segment_mean(data, i, 6), mx = segment_max(data, i, 6);
  CHECK(s.shape() == Shape{6, 2, 3});
  require_close(s, segment_loop(d, 8, ids, 6, Seg::sum), 1e-15);
  require_close(m, segment_loop(d, 8, ids, 6, Seg::mean), 1e-15);
  const std::vector<double> got_max = mx.to_vector<double>(), want_max = segment_loop(d, 8, ids, 6, Seg::max);
  for (std::size_t k = 0; k < got_max.size(); ++k) {
    INFO("element " << k);
    CHECK(got_max[k] == want_max[k]);  // -inf for the empty segments
  }
  CHECK(std::isinf(got_max[2 * 6]));
  CHECK(m.to_vector<double>()[2 * 6] == 0.0);
  // More segments than ids, int32 ids, no rows at all, and integer data.
  require_close(segment_sum(data, i.astype(DType::i32), 9), segment_loop(d, 8, ids, 9, Seg::sum), 1e-15);
  require_close(segment_sum(zeros({0, 3}), ints({}, {0}), 2), std::vector<double>(6, 0.0), 0.0);
  const Tensor counts = segment_sum(ints({1, 1, 1, 1, 1, 1, 1, 1}, {8}), i, 6);
  CHECK(counts.dtype() == DType::i64);
  CHECK(counts.to_vector<std::int64_t>() == Ints{2, 2, 0, 3, 0, 1});
  CHECK(segment_max(ints({4, -2, 9}, {3}), ints({1, 1, 0}, {3}), 3).to_vector<std::int64_t>() ==
        Ints{9, 4, std::numeric_limits<std::int64_t>::min()});
  // A NaN wins the maximum, as in vt::max.
  const Tensor with_nan = Tensor::from_vector({1.0, std::nan(""), 2.0}, {3});
  const std::vector<double> nan_max = segment_max(with_nan, ints({0, 0, 1}, {3}), 2).to_vector<double>();
  CHECK(std::isnan(nan_max[0]));
  CHECK(nan_max[1] == 2.0);
}

TEST_CASE("the gather family's gradients match finite differences", "[gather][grad]") {
  const Tensor x = randn({4, 3}, 5);
  const Tensor i = ints({2, -1, 2, 0, 2}, {5});
  using V = const std::vector<Tensor>&;
  SECTION("take, along both axes") {
    check_gradients([&](V a) { return take(a[0], i, 0); }, {x});
    check_gradients([&](V a) { return take(a[0], ints({1, 1, -1}, {3}), 1) * a[0]; }, {x});
  }
  SECTION("scatter_add, with respect to x and the updates") {
    check_gradients([&](V a) { return square(scatter_add(a[0], i, a[1])); }, {x, randn({5, 3}, 6)});
  }
  SECTION("at().set with repeated indices: losers get no gradient") {
    check_gradients([&](V a) { return square(at(a[0], i, 0).set(a[1])); }, {x, randn({5, 3}, 7)});
    const Tensor g = grad([&](const Tensor& v) { return sum(at(x, i, 0).set(v)); })(randn({5, 3}, 7));
    // Index 2 occurs at positions 0, 2 and 4: only the last is kept; 3 (as -1) and 0 once each.
    require_close(g, std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1}, 0.0);
    const Tensor gx = grad([&](const Tensor& y) { return sum(at(y, i, 0).set(zeros({5, 3}))); })(x);
    require_close(gx, std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}, 0.0);
  }
  SECTION("segment reductions") {
    const Tensor ids = ints({2, 0, 2, 1, 0, 2}, {6});
    const Tensor data = randn({6, 2}, 8);
    check_gradients([&](V a) { return segment_sum(square(a[0]), ids, 4); }, {data});
    check_gradients([&](V a) { return segment_mean(a[0] * a[0] * a[0], ids, 4); }, {data});
    check_gradients([&](V a) { return segment_max(a[0], ids, 3); }, {data});  // no empty segment: -inf
  }
  SECTION("segment_max: ties share the gradient evenly, as vt::max") {
    const Tensor data = Tensor::from_vector({1, 3, 3, 2, 5}, {5});
    const Tensor g = grad([](const Tensor& d) {
      return sum(segment_max(d, ints({0, 0, 0, 1, 2}, {5}), 3) * Tensor::from_vector({10, 100, 0}, {3}));
    })(data);
    require_close(g, std::vector<double>{0, 5, 5, 100, 0}, 0.0);
  }
  SECTION("second derivatives through take and scatter_add") {
    const Tensor v = randn({4, 3}, 9);
    auto cube = [&](const Tensor& y) { return sum(take(y, i, 0) * take(y, i, 0) * take(y, i, 0)); };
    check_gradients([&](V a) { return grad(cube)(a[0]) * v; }, {x});
  }
}

TEST_CASE("batched: x, indices and updates each batched or shared, against a per-example loop", "[gather][vmap]") {
  constexpr std::int64_t B = 3;
  const Tensor X = as_batch(randn({B, 4, 3}, 10)), x = randn({4, 3}, 11);
  // In range for both axes of x (lengths 4 and 3); segment ids in [0, 4).
  const Tensor I = as_batch(ints({0, 2, 2, -1, 2, 1, 1, -3, 0}, {B, 3})), i = ints({2, -3, 2}, {3});
  const Tensor S = as_batch(ints({0, 3, 3, 2, 1, 1, 1, 1, 0}, {B, 3})), s = ints({2, 0, 2}, {3});
  const Tensor U = as_batch(randn({B, 3, 3}, 12)), u = randn({3, 3}, 13);
  const Tensor D = as_batch(randn({B, 3, 2}, 14)), d = randn({3, 2}, 15);
  // The three combinations: the indexed tensor batched with shared indices, shared with batched
  // indices, and both batched (updates batched, then shared).
  const std::vector<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>> cases{
      {X, i, U, D, s}, {x, I, u, d, S}, {X, I, U, D, S}};
  for (const auto& [xx, ii, uu, dd, ss] : cases) {
    INFO("x batched " << xx.is_batched() << ", indices batched " << ii.is_batched());
    const Tensor taken = take(xx, ii, 0), along1 = take(xx, ii, 1);
    const Tensor added = scatter_add(xx, ii, uu), set = at(xx, ii).set(uu), set_shared = at(xx, ii).set(u);
    const Tensor seg = segment_sum(dd, ss, 4), seg_mean = segment_mean(dd, ss, 4), seg_max = segment_max(dd, ss, 4);
    for (const Tensor& t : {taken, along1, added, set, set_shared, seg, seg_mean, seg_max}) CHECK(t.is_batched());
    for (std::int64_t b = 0; b < B; ++b) {
      INFO("example " << b);
      const Tensor xb = example(xx, b), ib = example(ii, b), db = example(dd, b), sb = example(ss, b);
      require_close(example(taken, b), take(xb, ib, 0), 0.0);
      require_close(example(along1, b), take(xb, ib, 1), 0.0);
      require_close(example(added, b), scatter_add(xb, ib, example(uu, b)), 0.0);
      require_close(example(set, b), at(xb, ib).set(example(uu, b)), 0.0);
      require_close(example(set_shared, b), at(xb, ib).set(u), 0.0);
      require_close(example(seg, b), segment_sum(db, sb, 4), 0.0);
      require_close(example(seg_mean, b), segment_mean(db, sb, 4), 0.0);
      CHECK(example(seg_max, b).to_vector<double>() == segment_max(db, sb, 4).to_vector<double>());  // -inf too
    }
  }
  // vmap: per-example indices as a mapped argument, shared ones captured.
  auto f = [&](const Tensor& p, const Tensor& idx) {
    return sum(take(p, idx) * take(x, idx)) + sum(at(p, i).add(take(p, idx)));
  };
  const Tensor P = randn({B, 4, 3}, 16);
  const Tensor J = ints({0, 1, 2, 3, 3, 3, 1, 0, 1}, {B, 3});
  const Tensor out = vmap(f)(P, J);
  for (std::int64_t b = 0; b < B; ++b)
    CHECK(out.to_vector<double>()[static_cast<std::size_t>(b)] ==
          Approx(f(example(as_batch(P), b), example(as_batch(J), b)).item()).epsilon(1e-14));
  // Per-example gradients through vmap(grad) equal the loop's.
  const Tensor g = vmap(grad([&](const Tensor& p, const Tensor& idx) { return f(p, idx); }))(P, J);
  for (std::int64_t b = 0; b < B; ++b)
    require_close(example(g, b),
                  grad([&](const Tensor& p) { return f(p, example(as_batch(J), b)); })(example(as_batch(P), b)), 1e-14);
}

TEST_CASE("segment ids batched with shared data, and gradients of a batch loss", "[gather][vmap][grad]") {
  // Each example groups the same shared rows differently; the gradient of a loss over the batch
  // with respect to the shared data sums the examples'.
  const Tensor data = randn({5, 2}, 20);
  const Tensor ids = as_batch(ints({0, 1, 0, 2, 1, 2, 2, 0, 1, 1}, {2, 5}));
  auto loss = [&](const Tensor& d) { return sum(square(segment_mean(d, ids, 3))) + sum(segment_max(d, ids, 3)); };
  auto one = [&](const Tensor& d, std::int64_t b) {
    const Tensor id = example(ids, b);
    return sum(square(segment_mean(d, id, 3))) + sum(segment_max(d, id, 3));
  };
  CHECK(loss(data).item() == Approx(one(data, 0).item() + one(data, 1).item()).epsilon(1e-14));
  const Tensor g = grad(loss)(data);
  CHECK_FALSE(g.is_batched());
  const Tensor g0 = grad([&](const Tensor& d) { return one(d, 0); })(data);
  const Tensor g1 = grad([&](const Tensor& d) { return one(d, 1); })(data);
  require_close(g, g0 + g1, 1e-14);
  check_gradients([&](const std::vector<Tensor>& a) { return loss(a[0]); }, {data});
}

TEST_CASE("jit: one trace for every batch size, indices as arguments or captured constants", "[gather][jit]") {
  // The pulsar-timing pattern: per-backend parameters gathered to every point, per-epoch sums.
  const Tensor backend_of_point = ints({0, 2, 1, 1, 0, 2, 2, 1, 0, 0}, {10});
  const Tensor epoch_of_point = ints({0, 0, 1, 1, 1, 2, 3, 3, 3, 3}, {10});
  const Tensor y = randn({10}, 21);
  auto per_example = [&](const Tensor& p) {  // p: [3] per-backend scales
    const Tensor r = y * take(exp(p), backend_of_point);
    return sum(square(segment_sum(r, epoch_of_point, 4))) + sum(segment_max(r, epoch_of_point, 4));
  };
  auto loss = [&](const Tensor& P) { return mean(vmap(per_example)(P)); };
  auto step = jit(value_and_grad(loss));
  for (std::int64_t b : {2, 5, 1, 7}) {
    INFO("batch " << b);
    const Tensor P = as_batch(randn({b, 3}, 30 + static_cast<std::uint64_t>(b)));
    const auto [v, g] = step(P);
    const auto [ve, ge] = value_and_grad(loss)(P);
    CHECK(v.item() == Approx(ve.item()).epsilon(1e-14));
    require_close(g, ge, 1e-14);
  }
  CHECK(step.counters().traces == 1);
  // Indices as a (batched) argument: per-example indices, one trace as well.
  auto gathered = jit([](const Tensor& x, const Tensor& idx) { return at(x, idx).add(take(x, idx) * 2.0); });
  const Tensor x = randn({6}, 22);
  for (std::int64_t b : {3, 4}) {
    const Tensor idx = as_batch(ints(std::vector<std::int64_t>(static_cast<std::size_t>(b * 2), 1), {b, 2}));
    const Tensor got = gathered(x, idx);
    CHECK(got.batch_size() == b);
    std::vector<double> want = x.to_vector<double>();
    want[1] += 4.0 * want[1];
    for (std::int64_t k = 0; k < b; ++k) require_close(example(got, k), want, 1e-15);
  }
  CHECK(gathered.counters().traces == 1);
  // A scatter whose updates are x itself, in a plan (where x is an intermediate whose buffer dies
  // at the scatter): swapping two rows reads every update before it is overwritten.
  auto swap = jit([](const Tensor& a) {
    const Tensor y = a * 2.0;
    return at(y, ints({1, 0}, {2})).set(y);
  });
  auto swap_add = jit([](const Tensor& a) {
    const Tensor y = a * 2.0;
    return at(y, ints({1, 0}, {2})).add(y);
  });
  const Tensor m = randn({2, 3}, 25);
  const std::vector<double> v = m.to_vector<double>();
  require_close(swap(m), std::vector<double>{2 * v[3], 2 * v[4], 2 * v[5], 2 * v[0], 2 * v[1], 2 * v[2]}, 0.0);
  const std::vector<double> sums{2 * (v[0] + v[3]), 2 * (v[1] + v[4]), 2 * (v[2] + v[5])};
  require_close(swap_add(m), std::vector<double>{sums[0], sums[1], sums[2], sums[0], sums[1], sums[2]}, 1e-15);
}

TEST_CASE("gather family errors name the op, the index, its position and the axis length", "[gather][errors]") {
  const Tensor x = randn({5, 3}, 23);
  // Float indices are refused, with a hint.
  const std::string floats = error_of([&] { (void)take(x, Tensor::from_vector({1, 2}, {2})); });
  CHECK_THAT(floats, Catch::Contains("take") && Catch::Contains("int32 or int64") && Catch::Contains("float64") &&
                         Catch::Contains("astype"));
  CHECK_THAT(error_of([&] {
               (void)segment_sum(x, Tensor::from_vector({0, 1, 0, 1, 0}, {5}), 2);
             }),
             Catch::Contains("segment_sum") && Catch::Contains("astype"));
  // Out of range, positive and negative, with the position in the index tensor.
  const std::string high = error_of([&] { (void)take(x, ints({0, 4, 2, 7, 9, 1}, {2, 3})); });
  CHECK_THAT(high, Catch::Contains("take") && Catch::Contains("index 7") && Catch::Contains("position [1, 0]") &&
                       Catch::Contains("axis 0 of length 5"));
  CHECK_THAT(error_of([&] { (void)take(x, ints({-4}, {1}), 1); }),
             Catch::Contains("index -4") && Catch::Contains("position [0]") && Catch::Contains("axis 1 of length 3"));
  CHECK_THAT(error_of([&] { (void)take(x, ints({-3}, {1}), 1); }), Catch::Contains("no error"));
  // Batched indices: the example too.
  const Tensor I = as_batch(ints({0, 1, 2, 3, 5, 4}, {3, 2}));
  CHECK_THAT(error_of([&] { (void)take(x, I); }), Catch::Contains("index 5") && Catch::Contains("position [0]") &&
                                                      Catch::Contains("example 2 of the batch of 3"));
  CHECK_THAT(error_of([&] {
               (void)scatter_add(x, ints({5}, {1}), ones({1, 3}));
             }),
             Catch::Contains("scatter_add") && Catch::Contains("index 5"));
  CHECK_THAT(error_of([&] { (void)at(x, ints({-6}, {1})).set(0.0); }),
             Catch::Contains("scatter_set") && Catch::Contains("index -6"));
  // Shapes.
  CHECK_THAT(error_of([&] {
               (void)scatter_add(x, ints({1, 2}, {2}), ones({3, 3}));
             }),
             Catch::Contains("scatter_add") && Catch::Contains("[3, 3]") && Catch::Contains("[2, 3]"));
  CHECK_THAT(error_of([&] { (void)take(x, ints({0}, {1}), 2); }), Catch::Contains("take") && Catch::Contains("axis 2"));
  CHECK_THAT(error_of([&] { (void)take(Tensor::scalar(1.0), ints({0}, {1})); }), Catch::Contains("take"));
  // Segments: ids out of [0, num_segments) (negative ones too: they do not wrap), shapes, counts.
  CHECK_THAT(error_of([&] {
               (void)segment_sum(x, ints({0, 1, 3, 1, 0}, {5}), 3);
             }),
             Catch::Contains("segment_sum") && Catch::Contains("segment id 3") && Catch::Contains("position [2]") &&
                 Catch::Contains("[0, 3)"));
  CHECK_THAT(error_of([&] {
               (void)segment_max(x, ints({0, -1, 0, 1, 0}, {5}), 3);
             }),
             Catch::Contains("segment_max") && Catch::Contains("segment id -1") && Catch::Contains("position [1]"));
  CHECK_THAT(error_of([&] {
               (void)segment_mean(x, ints({0, 1}, {2}), 3);
             }),
             Catch::Contains("segment_sum") && Catch::Contains("shape [5]") && Catch::Contains("[2]"));
  CHECK_THAT(error_of([&] {
               (void)segment_sum(x, ints({0, 1, 0, 1, 0}, {5}), -1);
             }),
             Catch::Contains("num_segments must be >= 0") && Catch::Contains("-1"));
  CHECK_THAT(error_of([&] { (void)segment_sum(Tensor::scalar(1.0), ints({0}, {1}), 1); }),
             Catch::Contains("segment_sum") && Catch::Contains("scalar"));
  // Under jit the check runs with the plan, and the same plan serves valid indices afterwards.
  auto f = jit([](const Tensor& a, const Tensor& idx) { return take(a, idx) * 2.0; });
  CHECK_THAT(error_of([&] {
               (void)f(x, ints({0, 8}, {2}));
             }),
             Catch::Contains("index 8") && Catch::Contains("position [1]"));
  require_close(f(x, ints({4, 0}, {2})), take(x, ints({4, 0}, {2})) * 2.0, 0.0);
  CHECK(f.counters().traces == 1);
}

TEST_CASE("an out-of-range index on the asynchronous device is raised when the op or plan ends", "[gather][device]") {
  const Device dev = Device::cuda(6);
  vt::testing::OpaqueDevice device(dev);
  vt::testing::check_index_errors(dev);
  device.raise_deferred();  // nothing left over
}
