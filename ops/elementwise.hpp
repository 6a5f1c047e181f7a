#pragma once
/// @file
/// Elementwise maps with numpy broadcasting. Tensor operands are promoted (core/dtype.hpp); C++
/// scalars are weak: an integer scalar takes the tensor's dtype, a floating one a floating tensor's
/// dtype, and makes an integer tensor float64.
///
/// Integer tensors: neg, abs, sign, add, sub, mul, maximum, minimum, the comparisons, where and
/// astype take them (integer arithmetic wraps); div is true division, in float64 when both operands
/// are integers or booleans (as `/` in numpy and JAX); the other maps take floats only.
/// Bool tensors: the comparisons, the logical ops, where and astype take them; with another dtype
/// they promote to it (`mask * x`); of two, add and maximum are logical or, mul and minimum logical
/// and (as numpy), and sub raises. An integer C++ scalar with a bool tensor gives int64 (`1 - mask`).
#include <concepts>
#include <cstdint>

#include "../core/tensor.hpp"

namespace vt {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor abs(const Tensor& x);   ///< gradient sign(x), 0 at 0
Tensor sign(const Tensor& x);  ///< not differentiable (gradient 0)
/// Special functions per element: the C library's, except digamma, trigamma, sigmoid and softplus,
/// which are vtape's own (backends/special_math.hpp, the same on every backend). Gradients are the
/// derivatives' closed forms; at a domain edge they are what the formula gives (log10' at 0 is inf,
/// lgamma' at a pole is digamma's NaN or inf).
Tensor log10(const Tensor& x);   ///< gradient 1 / (x ln 10)
Tensor log2(const Tensor& x);    ///< gradient 1 / (x ln 2)
Tensor exp2(const Tensor& x);    ///< gradient 2^x ln 2
Tensor exp10(const Tensor& x);   ///< 10^x (glibc's exp10); gradient 10^x ln 10
Tensor expm1(const Tensor& x);   ///< exp(x) - 1, exact near 0; gradient expm1(x) + 1
Tensor erf(const Tensor& x);     ///< gradient 2/sqrt(pi) exp(-x^2)
Tensor erfc(const Tensor& x);    ///< 1 - erf(x), exact in the tail; gradient -2/sqrt(pi) exp(-x^2)
Tensor lgamma(const Tensor& x);  ///< log |gamma(x)|; +inf at the poles 0, -1, ...; gradient digamma(x)
/// psi(x) = lgamma'(x). As scipy: -inf at +0, +inf at -0, NaN at the poles -1, -2, ... and at -inf.
/// Gradient trigamma(x).
Tensor digamma(const Tensor& x);
/// psi'(x); +inf at the poles 0, -1, ..., 0 at +inf, NaN at -inf. Not differentiable: its gradient
/// raises vt::Error (polygamma of order 2 is not implemented).
Tensor trigamma(const Tensor& x);
/// 1 / (1 + exp(-x)), without overflow for any x; gradient sigmoid(x) sigmoid(-x) (= y (1 - y), exact
/// also where y rounds to 1).
Tensor sigmoid(const Tensor& x);
/// log(1 + exp(x)), without overflow: x for large x, exp(x) for very negative x; gradient sigmoid(x).
Tensor softplus(const Tensor& x);
/// Trigonometric and hyperbolic functions and their inverses (numpy's names; the C library's tan,
/// asin, ...). Gradients are the closed forms: 1 + tan^2, +-1 / sqrt((1 - x)(1 + x)), 1 / (1 + x^2),
/// cosh, sinh, 1 / sqrt(x^2 + 1), 1 / sqrt((x - 1)(x + 1)), 1 / ((1 - x)(1 + x)): infinite at the
/// domain's edges, NaN outside it.
Tensor tan(const Tensor& x);
Tensor arcsin(const Tensor& x);
Tensor arccos(const Tensor& x);
Tensor arctan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor arcsinh(const Tensor& x);
Tensor arccosh(const Tensor& x);
Tensor arctanh(const Tensor& x);
/// The largest integer not above x, and the smallest not below it (as floats; NaN and +-inf stay):
/// not differentiable (gradient 0), as sign.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// The angle of the point (x, y), in [-pi, pi] (the C library's atan2, signed zeros included); gradient
/// (x, -y) / (x^2 + y^2) in (y, x): NaN at the origin.
Tensor arctan2(const Tensor& y, const Tensor& x);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);      ///< d/db uses log(a): defined for a > 0 (0 where a == 0)
Tensor maximum(const Tensor& a, const Tensor& b);  ///< ties split the gradient evenly
Tensor minimum(const Tensor& a, const Tensor& b);  ///< ties split the gradient evenly; NaN propagates
/// x limited to [lo, hi] (NaN stays NaN). Gradient 1 for lo <= x <= hi, bounds included (JAX's
/// minimum(maximum(x, lo), hi) gives 1/2 at a bound), 0 outside. Raises vt::Error when lo > hi or
/// a bound is NaN; infinite bounds are allowed. The bounds are weak float scalars, so an integer x
/// gives a float64 result; to keep x's integer dtype, use minimum(maximum(x, lo), hi) with bounds
/// that are tensors of that dtype.
Tensor clip(const Tensor& x, double lo, double hi);
/// Comparisons give bool tensors (of the broadcast shape; the operands are promoted first) and stop
/// gradients. NaN compares unequal to everything, itself included: only not_equal is true for it.
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
/// Logical ops, giving bool tensors: their operands are read as booleans (any dtype: nonzero is true).
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// cond ? a : b, all three broadcast together; cond is read as a boolean (any dtype: nonzero, NaN
/// included, is true) and takes no gradient.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor astype(const Tensor& x, DType dtype);

Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double b);
Tensor pow(double a, const Tensor& b);  ///< gradient a^b log(a); 0 where a == 0, as pow's exponent gradient

namespace detail {
// A C++ scalar as the tensor it stands for in a binary op with `like` (weak scalars, above).
Tensor weak_scalar(const Tensor& like, double value);
Tensor weak_scalar(const Tensor& like, std::int64_t value);
}  // namespace detail

/// Integer C++ scalars (`x + 1`, `i * 2`): exact for every int64 value on an integer tensor.
template <std::integral I>
Tensor add(const Tensor& a, I b) {
  return add(a, detail::weak_scalar(a, std::int64_t(b)));
}
template <std::integral I>
Tensor sub(const Tensor& a, I b) {
  return sub(a, detail::weak_scalar(a, std::int64_t(b)));
}
template <std::integral I>
Tensor mul(const Tensor& a, I b) {
  return mul(a, detail::weak_scalar(a, std::int64_t(b)));
}
template <std::integral I>
Tensor div(const Tensor& a, I b) {
  return div(a, detail::weak_scalar(a, std::int64_t(b)));
}

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
template <std::integral I>
Tensor operator+(const Tensor& a, I b) {
  return add(a, b);
}
template <std::integral I>
Tensor operator-(const Tensor& a, I b) {
  return sub(a, b);
}
template <std::integral I>
Tensor operator*(const Tensor& a, I b) {
  return mul(a, b);
}
template <std::integral I>
Tensor operator/(const Tensor& a, I b) {
  return div(a, b);
}
template <std::integral I>
Tensor operator+(I a, const Tensor& b) {
  return add(detail::weak_scalar(b, std::int64_t(a)), b);
}
template <std::integral I>
Tensor operator-(I a, const Tensor& b) {
  return sub(detail::weak_scalar(b, std::int64_t(a)), b);
}
template <std::integral I>
Tensor operator*(I a, const Tensor& b) {
  return mul(detail::weak_scalar(b, std::int64_t(a)), b);
}
template <std::integral I>
Tensor operator/(I a, const Tensor& b) {
  return div(detail::weak_scalar(b, std::int64_t(a)), b);
}

struct OpDef;
/// Ops that jit's passes recognise by identity, and mul, which they also write.
extern const OpDef add_op, mul_op, div_op, neg_op;

}  // namespace vt
