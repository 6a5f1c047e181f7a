#pragma once
// Scalar special functions that the C library lacks, shared by the CPU kernels (maps.cpp), the
// CUDA kernels (kernels.cu) and the tests: one definition, so that every backend computes the same
// formula. Each is a template over float and double that computes in its argument's type.
#include <cmath>

#ifdef __CUDACC__
#define VTAPE_SCALAR_FN __host__ __device__ inline
#else
#define VTAPE_SCALAR_FN inline
#endif

namespace vt::special {

// 1 / (1 + exp(-x)) without overflow: exp is only taken of -|x|. NaN stays NaN.
template <class T>
VTAPE_SCALAR_FN T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);  // also for NaN: NaN
  return e / (T(1) + e);
}

// log(1 + exp(x)) without overflow: x + log1p(exp(-x)) for x > 0 (which is x once exp(-x) is below
// x's half ulp), log1p(exp(x)) otherwise (which is exp(x) to rounding for very negative x).
template <class T>
VTAPE_SCALAR_FN T softplus(T x) {
  if (x > T(0)) return x + std::log1p(std::exp(-x));
  return std::log1p(std::exp(x));  // also for NaN: NaN
}

namespace detail {

// x - round(x), in [-1/2, 1/2] and exact for every x (x + 1 or x - floor(x) are not, for small
// |x|). The reflection formulas evaluate their period-1 factors (cot, sin^2 of pi x) on it, which
// keeps them accurate for large |x|.
template <class T>
VTAPE_SCALAR_FN T reduced(T x) {
  return x - std::round(x);
}

template <class T>
VTAPE_SCALAR_FN T pi() {
  return T(3.14159265358979323846264338327950288);
}

// Below this the recurrences step x up by one; from it on the asymptotic series are exact to
// double rounding (their first omitted terms are under 1e-16 relative at x = 10).
template <class T>
VTAPE_SCALAR_FN T asymptotic_from() {
  return T(10);
}

}  // namespace detail

// The digamma function psi(x) = d/dx lgamma(x). As scipy's psi: psi(+0) = -inf and psi(-0) = +inf
// (the one-sided limits), the poles -1, -2, ... and -inf give NaN, psi(+inf) = +inf. For x < 0 the
// reflection psi(x) = psi(1 - x) - pi cot(pi x); for x > 0 the recurrence psi(x) = psi(x + 1) - 1/x
// up to x >= 10, then the asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k). Accuracy: a few
// ulps (1e-15 relative against mpmath over [-30, 1e8]), absolute near the root x = 1.4616...
template <class T>
VTAPE_SCALAR_FN T digamma(T x) {
  if (x != x) return x;
  T reflected = 0;
  if (x <= T(0)) {
    if (x == T(0)) return -T(1) / x;        // -inf at +0, +inf at -0: the limits from each side
    if (x == std::floor(x)) return T(NAN);  // a pole -1, -2, ..., or -inf
    reflected = detail::pi<T>() / std::tan(detail::pi<T>() * detail::reduced(x));  // pi cot(pi x)
    x = T(1) - x;
  }
  if (x == T(INFINITY)) return x;
  T shift = reflected;  // what is subtracted from the series: the reflection's term, 1/x per step
  while (x < detail::asymptotic_from<T>()) {
    shift += T(1) / x;
    x += T(1);
  }
  const T inv = T(1) / x, inv2 = inv * inv;
  // B_2k / (2k) for k = 1..7: 1/12, -1/120, 1/252, -1/240, 1/132, -691/32760, 1/12.
  const T tail = T(1) / 132 - inv2 * (T(691) / 32760 - inv2 * (T(1) / 12));
  const T series = inv2 * (T(1) / 12 - inv2 * (T(1) / 120 - inv2 * (T(1) / 252 - inv2 * (T(1) / 240 - inv2 * tail))));
  return std::log(x) - T(0.5) * inv - series - shift;
}

// The trigamma function psi'(x). Poles (x = 0, -1, -2, ...) give +inf, as scipy's polygamma(1, x)
// does; +inf gives 0 and -inf NaN (scipy: +inf, though psi' has no limit there). For x < 0 the
// reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x); for x > 0 the recurrence
// psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10, then the asymptotic series
// 1/x + 1/(2x^2) + sum B_2k / x^(2k+1).
template <class T>
VTAPE_SCALAR_FN T trigamma(T x) {
  if (x != x) return x;
  T reflected = 0, sign = 1;  // psi'(x) = reflected + sign psi'(1 - x) for x < 0
  if (x <= T(0)) {
    if (x == -T(INFINITY)) return T(NAN);
    if (x == std::floor(x)) return T(INFINITY);
    const T s = std::sin(detail::pi<T>() * detail::reduced(x));
    reflected = detail::pi<T>() * detail::pi<T>() / (s * s);
    sign = T(-1);
    x = T(1) - x;
  }
  if (x == T(INFINITY)) return T(0);
  T shift = 0;  // sum of 1/x^2 over the recurrence's steps
  while (x < detail::asymptotic_from<T>()) {
    shift += T(1) / (x * x);
    x += T(1);
  }
  const T inv = T(1) / x, inv2 = inv * inv;
  // B_2k for k = 1..8: 1/6, -1/30, 1/42, -1/30, 5/66, -691/2730, 7/6, -3617/510.
  const T series =
      inv2 *
      (T(1) / 6 -
       inv2 * (T(1) / 30 -
               inv2 * (T(1) / 42 -
                       inv2 * (T(1) / 30 - inv2 * (T(5) / 66 - inv2 * (T(691) / 2730 -
                                                                       inv2 * (T(7) / 6 - inv2 * (T(3617) / 510))))))));
  return reflected + sign * (inv + T(0.5) * inv2 + inv * series + shift);
}

}  // namespace vt::special
