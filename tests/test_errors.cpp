// Bad input raises vt::Error naming the op and the offending shapes or dtypes; never a crash.
#include <algorithm>
#include <new>
#include <string>
#include <vtape/backends/cpu/first_failure.hpp>

#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;

TEST_CASE("shape mismatches name the op and both shapes", "[errors]") {
  const std::string add_error = error_of([] { add(ones({2, 3}), ones({4})); });
  CHECK_THAT(add_error, Catch::Contains("add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THAT(error_of([] {
               matmul(ones({2, 3}), ones({2, 3}));
             }),
             Catch::Contains("matmul") && Catch::Contains("[2, 3]"));
  CHECK_THAT(error_of([] { matmul(Tensor::scalar(1.0), ones({2})); }), Catch::Contains("matmul"));
  CHECK_THAT(error_of([] { reshape(ones({2, 3}), {4, 2}); }), Catch::Contains("reshape") && Catch::Contains("[4, 2]"));
  CHECK_THAT(error_of([] { reshape(ones({2, 3}), {-1, -1}); }), Catch::Contains("reshape"));
  CHECK_THAT(error_of([] { broadcast_to(ones({3}), {2, 4}); }), Catch::Contains("broadcast_to"));
  CHECK_THAT(error_of([] { concatenate({ones({2, 3}), ones({3, 2})}, 0); }), Catch::Contains("concatenate"));
  CHECK_THAT(error_of([] { stack({ones({2}), ones({3})}); }), Catch::Contains("stack"));
  CHECK_THAT(error_of([] { diag(ones({2, 2, 2})); }), Catch::Contains("diag") && Catch::Contains("[2, 2, 2]"));
  CHECK_THAT(error_of([] { Tensor::from_vector({1, 2, 3}, {2, 2}); }), Catch::Contains("from_vector"));
  CHECK_THAT(error_of([] { where(ones({2}), ones({3}), ones({2})); }), Catch::Contains("where"));
}

TEST_CASE("out-of-range axes are errors", "[errors]") {
  CHECK_THAT(error_of([] { sum(ones({2, 3}), {2}); }), Catch::Contains("sum") && Catch::Contains("axis 2"));
  CHECK_THAT(error_of([] { mean(ones({2, 3}), {-3}); }), Catch::Contains("axis -3"));
  CHECK_THAT(error_of([] { max(ones({2, 3}), {0, 0}); }), Catch::Contains("repeated axis"));
  CHECK_THAT(error_of([] { slice(ones({2}), 1, 0, 1); }), Catch::Contains("slice"));
  CHECK_THAT(error_of([] { transpose(ones({2, 3}), {0, 0}); }), Catch::Contains("permutation"));
  CHECK_THAT(error_of([] { swapaxes(ones({2, 3}), 0, 5); }), Catch::Contains("swapaxes"));
  CHECK_THAT(error_of([] { stack({ones({2})}, 3); }), Catch::Contains("stack"));
  CHECK_THAT(error_of([] { ones({2}).t(); }), Catch::Contains("t:"));
}

TEST_CASE("dtype mismatches are errors where no promotion applies", "[errors]") {
  const Tensor f = ones({2}, DType::f32);
  CHECK_THAT(error_of([&] { f.data<double>(); }), Catch::Contains("float32") && Catch::Contains("float64"));
  CHECK_THAT(error_of([&] { f.as_eigen<double>(); }), Catch::Contains("float32"));
  auto [out, pullback] = vjp([](const Tensor& x) { return x * 2.0; }, ones({2}));
  CHECK_THAT(error_of([&, pb = pullback] { pb(ones({2}, DType::f32)); }),
             Catch::Contains("vjp") && Catch::Contains("float32") && Catch::Contains("float64"));
}

TEST_CASE("grad of a non-scalar function without a cotangent is an error", "[errors]") {
  CHECK_THAT(error_of([] { grad([](const Tensor& x) { return x * 2.0; })(ones({3})); }),
             Catch::Contains("grad") && Catch::Contains("scalar") && Catch::Contains("[3]"));
  CHECK_THAT(error_of([] { grad([](const Tensor& x) { return sum(x); }, {1})(ones({3})); }),
             Catch::Contains("argnum 1"));
  auto [out, pullback] = vjp([](const Tensor& x) { return x * 2.0; }, ones({3}));
  CHECK_THAT(error_of([pb = pullback] { pb(ones({2})); }), Catch::Contains("cotangent") && Catch::Contains("[2]"));
}

TEST_CASE("misuse of tensors is an error, not a crash", "[errors]") {
  CHECK_THAT(error_of([] { Tensor().shape(); }), Catch::Contains("undefined"));
  CHECK_THAT(error_of([] { add(Tensor(), ones({1})); }), Catch::Contains("add"));
  CHECK_THAT(error_of([] { zeros({-1}); }), Catch::Contains("negative"));
  CHECK_THAT(error_of([] { arange(0, 1, 0); }), Catch::Contains("arange"));
  CHECK_THAT(error_of([] { ones({2}).batch_size(); }), Catch::Contains("not batched"));
  CHECK_THAT(error_of([] { mean(ones({0})); }), Catch::Contains("mean"));
  CHECK_THAT(error_of([] { max(ones({0})); }), Catch::Contains("max"));
}

TEST_CASE("sum_to names itself and both shapes when they do not broadcast", "[errors]") {
  CHECK_THAT(error_of([] { sum_to(ones({3}), {2, 3}); }), Catch::Contains("sum_to") && Catch::Contains("[2, 3]"));
  CHECK_THAT(error_of([] { sum_to(ones({2, 3}), {4}); }), Catch::Contains("sum_to"));
}

// The batched CPU kernels run their loops through FirstFailure: an exception thrown inside an
// OpenMP region would terminate the process. Every iteration still runs, and the lowest failing
// index's exception is raised after the region, whatever the thread count.
TEST_CASE("an exception inside a parallel CPU loop is raised after it, the lowest index's", "[errors]") {
  for (int threads : {1, 2, 4}) {
    vt::cpu::FirstFailure failure;
    std::vector<int> ran(64, 0);
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (std::int64_t i = 0; i < 64; ++i)
      failure.run(i, [&] {
        ran[static_cast<std::size_t>(i)] = 1;
        if (i == 41) throw std::bad_alloc();
        if (i == 17 || i == 60) throw vt::Error("iteration " + std::to_string(i));
      });
    INFO(threads << " threads");
    CHECK(std::count(ran.begin(), ran.end(), 1) == 64);
    CHECK_THROWS_WITH(failure.rethrow(), "iteration 17");
  }
  // Not the first caught: iterations in descending order throw 60 first, and 17 is still raised.
  vt::cpu::FirstFailure descending;
  for (std::int64_t i = 63; i >= 0; --i)
    descending.run(i, [&] {
      if (i == 17 || i == 60) throw vt::Error("iteration " + std::to_string(i));
    });
  CHECK_THROWS_WITH(descending.rethrow(), "iteration 17");
  vt::cpu::FirstFailure none;
  CHECK_NOTHROW(none.rethrow());
}
