#pragma once
// Test helpers: central finite differences against reverse-mode gradients, in float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>
#include <vtape/vtape.hpp>

namespace vt::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A fixed random weighting turns any output into a scalar, so that non-scalar ops are checked
// through a generic cotangent rather than a sum of ones.
inline Tensor weighted(const Tensor& out, std::uint64_t seed = 99) {
  return sum(out * randn(out.shape(), seed, out.dtype()));
}

inline Tensor with_value(const Tensor& x, std::size_t j, double value) {
  std::vector<double> v = x.to_vector<double>();
  v[j] = value;
  return Tensor::from_vector(v, x.shape(), x.dtype());
}

// d loss / d args[i], element by element, by central differences.
inline std::vector<double> numeric_gradient(const Fn& loss, const std::vector<Tensor>& args, std::size_t i) {
  std::vector<double> g;
  const std::vector<double> x = args[i].to_vector<double>();
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double h = 1e-6 * std::max(1.0, std::abs(x[j]));
    std::vector<Tensor> plus = args, minus = args;
    plus[i] = with_value(args[i], j, x[j] + h);
    minus[i] = with_value(args[i], j, x[j] - h);
    g.push_back((loss(plus).item() - loss(minus).item()) / (2 * h));
  }
  return g;
}

inline std::vector<Tensor> reverse_gradients(const Fn& loss, const std::vector<Tensor>& args) {
  std::vector<int> nums;
  for (std::size_t i = 0; i < args.size(); ++i) nums.push_back(static_cast<int>(i));
  switch (args.size()) {
    case 1: return grad([&](const Tensor& a) { return loss({a}); }, nums)(args[0]);
    case 2: return grad([&](const Tensor& a, const Tensor& b) { return loss({a, b}); }, nums)(args[0], args[1]);
    case 3:
      return grad(
          [&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return loss({a, b, c});
          },
          nums)(args[0], args[1], args[2]);
    default: FAIL("gradcheck supports 1 to 3 arguments");
  }
  return {};
}

// Checks the gradient of weighted(f(args)) with respect to every argument whose index is in
// `which` (all when empty), with |ad - fd| <= atol + rtol * |fd| elementwise.
inline void check_gradients(const Fn& f, const std::vector<Tensor>& args, double rtol = 1e-6, double atol = 1e-7,
                            std::vector<std::size_t> which = {}) {
  const Fn loss = [&](const std::vector<Tensor>& a) { return weighted(f(a)); };
  const std::vector<Tensor> ad = reverse_gradients(loss, args);
  if (which.empty())
    for (std::size_t i = 0; i < args.size(); ++i) which.push_back(i);
  for (std::size_t i : which) {
    REQUIRE(ad[i].shape() == args[i].shape());
    const std::vector<double> fd = numeric_gradient(loss, args, i);
    const std::vector<double> got = ad[i].to_vector<double>();
    for (std::size_t j = 0; j < fd.size(); ++j) {
      INFO("argument " << i << ", element " << j << ": reverse " << got[j] << ", finite differences " << fd[j]);
      CHECK(std::abs(got[j] - fd[j]) <= atol + rtol * std::abs(fd[j]));
    }
  }
}

// For large inputs: checks <grad, V> against (loss(x + hV) - loss(x - hV)) / 2h for a few random
// directions V of argument i (symmetric when `symmetric`, for functions of SPD matrices), within
// rtol * |grad| |V| (the scale of the directional derivative).
inline void check_directional(const Fn& f, const std::vector<Tensor>& args, std::size_t i, double rtol = 1e-6,
                              bool symmetric = false, int directions = 3, double h = 1e-6) {
  const Fn loss = [&](const std::vector<Tensor>& a) { return weighted(f(a)); };
  const Tensor g = reverse_gradients(loss, args)[i];
  REQUIRE(g.shape() == args[i].shape());
  for (int d = 0; d < directions; ++d) {
    Tensor v = randn(args[i].shape(), 1000 + static_cast<std::uint64_t>(d), args[i].dtype());
    if (symmetric) v = (v + swapaxes(v, -1, -2)) * 0.5;
    std::vector<Tensor> plus = args, minus = args;
    plus[i] = args[i] + v * h;
    minus[i] = args[i] - v * h;
    const double fd = (loss(plus).item() - loss(minus).item()) / (2 * h);
    const double ad = sum(g * v).item();
    const double scale = std::sqrt(sum(g * g).item() * sum(v * v).item());
    INFO("direction " << d << ": reverse " << ad << ", finite differences " << fd << ", scale " << scale);
    CHECK(std::abs(ad - fd) <= rtol * scale + 1e-12);
  }
}

inline void require_close(const Tensor& a, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> got = a.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    INFO("element " << j << ": " << got[j] << " vs " << expected[j]);
    CHECK(std::abs(got[j] - expected[j]) <= tol * std::max(1.0, std::abs(expected[j])));
  }
}

// The message of the vt::Error that f raises, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const vt::Error& e) {
    return e.what();
  }
  return "no error";
}

inline void require_close(const Tensor& a, const Tensor& b, double tol = 1e-12) {
  REQUIRE(a.shape() == b.shape());
  require_close(a, b.to_vector<double>(), tol);
}

}  // namespace vt::testing
