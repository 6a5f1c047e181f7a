// exp and log over blocks of doubles, written so that the compiler vectorises
// them, within an ulp of the C library's for every input, special values
// included.
//
// Why not the C library's: called per element, glibc's exp and log cost a call,
// a wrapper and, for underflowing exps, its errno path (~5-10 ns an element);
// the covariance passes of a Gaussian process are mostly exps. Why not Eigen's
// packet exp and log: several ulps, flushed subnormals, and scalar tails that
// differ from the packets.
//
// Why table-free: a table (2^(j/N), 1/c and log c) needs gathers, which the
// compiler may or may not emit depending on the target's tuning; a longer
// polynomial is plain multiply-adds on every target. The error budget is loose
// enough for that: glibc's exp and log are within ~0.51 ulp of the true value,
// ours within ~0.6 ulp (below), so the two results, an integer number of ulps
// apart, differ by at most one.
//
// Every element of every row goes through exp_block or log_block, one compiled
// loop of `block` elements (callers copy short, strided or broadcast rows into
// a padded buffer first), so a value's result has the same bits whatever the
// row's length, layout or position, or the threads. Only maps.cpp includes this
// header: one translation unit, one compiled copy of each loop, so even the
// compiler's choice of which a * b + c to fuse cannot differ between paths.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace vt::cpu::vmath {

constexpr int block = 64; // elements per call: a multiple of every vector width

namespace detail {

inline double from_bits(std::uint64_t u) { return std::bit_cast<double>(u); }
inline std::uint64_t to_bits(double d) {
  return std::bit_cast<std::uint64_t>(d);
}

// ln 2 = ln2_hi + ln2_lo to ~2^-85; ln2_hi has 32 significant bits, so k ln2_hi
// is exact for |k| < 2^21.
constexpr double ln2_hi = 0x1.62e42fee00000p-1;
constexpr double ln2_lo = 0x1.a39ef35793c76p-33;
constexpr double inv_ln2 = 0x1.71547652b82fep+0;
constexpr double shift =
    0x1.8p52; // adding it rounds |v| < 2^51 to an integer held in the low bits

// 1/n!, n = 2..13: the Taylor series of exp(r) = 1 + r + r^2 (1/2 + r/6 + ...).
// For |r| <= ln2/2 the first term left out, r^14/14!, is below 2^-57 relative.
constexpr double inv_fact(int n) { return n <= 1 ? 1.0 : inv_fact(n - 1) / n; }

inline double exp_one(double x) {
  // exp(x) overflows above 709.79 and rounds to zero below -745.14: clamping
  // keeps k within the range where 2^(k/2) is a normal double, and the clamped
  // ends still overflow and underflow.
  const double xc = std::min(std::max(x, -746.0), 710.0); // NaN stays NaN
  // x = k ln2 + t - c, k the nearest integer to x / ln2: t is exact (Sterbenz),
  // |t| <= ~0.35, and c = k ln2_lo < 2^-22.
  const double z = std::fma(xc, inv_ln2, shift);
  const double kd = z - shift;
  const std::int64_t k = static_cast<std::int64_t>(to_bits(z) - to_bits(shift));
  const double t = std::fma(-kd, ln2_hi, xc);
  const double c = kd * ln2_lo;
  const double r = t - c;
  // Estrin's scheme: a short dependency chain, so that the loop is not
  // latency-bound.
  const double r2 = r * r, r4 = r2 * r2;
  const double a0 = std::fma(inv_fact(3), r, inv_fact(2)),
               a1 = std::fma(inv_fact(5), r, inv_fact(4));
  const double a2 = std::fma(inv_fact(7), r, inv_fact(6)),
               a3 = std::fma(inv_fact(9), r, inv_fact(8));
  const double a4 = std::fma(inv_fact(11), r, inv_fact(10)),
               a5 = std::fma(inv_fact(13), r, inv_fact(12));
  const double b0 = std::fma(a1, r2, a0), b1 = std::fma(a3, r2, a2),
               b2 = std::fma(a5, r2, a4);
  const double p = std::fma(std::fma(b2, r4, b1), r4, b0);
  const double q = r2 * p;
  // exp(r) = 1 + t - c + q. 1 + t is split exactly into hi + lo (Fast2Sum, |t|
  // < 1), and the small terms are added to lo first: the only rounding the size
  // of the result's ulp is the last one.
  const double hi = 1.0 + t;
  const double lo = (1.0 - hi) + t;
  const double y = hi + ((lo - c) + q);
  // y 2^k as (y 2^k1) 2^k2, k1 = floor(k / 2): both factors are normal doubles
  // for every clamped k, the first product is exact, and the second rounds
  // once, into the subnormals, to zero or to infinity as the true result does.
  const std::int64_t k1 = k >> 1, k2 = k - k1;
  const double s1 = from_bits(static_cast<std::uint64_t>(k1 + 1023) << 52);
  const double s2 = from_bits(static_cast<std::uint64_t>(k2 + 1023) << 52);
  const double result = (y * s1) * s2;
  return x != x ? x + x : result;
}

// 2 / (2n + 1), n = 1..10: log(1 + f) = 2 atanh(s) = 2s + s R(s^2), s = f / (2
// + f), R(z) = 2z/3 + 2z^2/5 + ... For |s| <= 0.172 the first term left out is
// below 2^-60 relative.
constexpr double odd(int n) { return 2.0 / (2 * n + 1); }

inline double log_one(double x) {
  // Subnormals scaled into the normals by 2^52 (and 52 taken off the exponent).
  const bool tiny = x < 0x1p-1022;
  const double xs = tiny ? x * 0x1p52 : x;
  // x = 2^e m, m in [sqrt(1/2), sqrt(2)): e from the bits of x less those of
  // sqrt(1/2), kept non-negative by a bias of 1024 so that only logical shifts
  // are needed.
  const std::uint64_t ix = to_bits(xs);
  const std::uint64_t biased =
      (ix - 0x3fe6a09e667f3bcdULL + (1024ULL << 52)) >> 52; // e + 1024
  const double m = from_bits(ix - (biased << 52) + (1024ULL << 52));
  const double e =
      (from_bits(biased | to_bits(0x1p52)) - 0x1p52) - (tiny ? 1076.0 : 1024.0);
  const double f = m - 1.0; // exact: m within a factor 2 of 1
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double z2 = z * z, z4 = z2 * z2;
  const double a0 = std::fma(odd(2), z, odd(1)),
               a1 = std::fma(odd(4), z, odd(3));
  const double a2 = std::fma(odd(6), z, odd(5)),
               a3 = std::fma(odd(8), z, odd(7));
  const double a4 = std::fma(odd(10), z, odd(9));
  const double b0 = std::fma(a1, z2, a0), b1 = std::fma(a3, z2, a2);
  const double R = z * std::fma(std::fma(a4, z4, b1), z4, b0);
  // log(1 + f) = f - f^2/2 + s (f^2/2 + R), since 2s = f - s f. f^2/2 = hf +
  // hf_lo exactly.
  const double hf = 0.5 * f * f;
  const double hf_lo = std::fma(0.5 * f, f, -hf);
  // log x = e ln2_hi + f + small: e ln2_hi + f split exactly into hi + lo
  // (Fast2Sum: e = 0, or |e ln2_hi| >= ln 2 > |f|), the small terms added to lo
  // first, one rounding the size of the ulp.
  const double a = e * ln2_hi;
  const double hi = a + f;
  const double lo = f - (hi - a);
  const double small = ((e * ln2_lo - hf) - hf_lo) + s * (hf + R);
  const double result = hi + (lo + small);
  // Special values by selects, not branches, so that the loop vectorises.
  constexpr double inf = std::numeric_limits<double>::infinity();
  double out = x == inf ? inf : result;
  out = x == 0 ? -inf : out;
  out = x < 0 ? std::numeric_limits<double>::quiet_NaN() : out;
  return x != x ? x + x : out;
}

} // namespace detail

// GCC's tuning for AVX-512 CPUs prefers 256-bit vectors (to spare the clock on
// older Xeons); these loops are pure arithmetic, which 512-bit vectors do at
// nearly twice the rate.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define VT_VMATH_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define VT_VMATH_WIDE
#endif

// v[i] = exp(v[i]) and v[i] = log(v[i]) for i < block, in place. Not inlined:
// one compiled copy.
[[gnu::noinline]] VT_VMATH_WIDE inline void exp_block(double *__restrict v) {
  for (int i = 0; i < block; ++i)
    v[i] = detail::exp_one(v[i]);
}
[[gnu::noinline]] VT_VMATH_WIDE inline void log_block(double *__restrict v) {
  for (int i = 0; i < block; ++i)
    v[i] = detail::log_one(v[i]);
}

#undef VT_VMATH_WIDE

} // namespace vt::cpu::vmath
