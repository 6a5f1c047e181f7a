// exp and log over blocks of doubles, written so that the compiler vectorises them, within an ulp of the C library's
// for every input, special values and subnormals included; and log1p, sigmoid and softplus built on them.
//
// Why not the C library's: called per element, glibc's exp and log cost a call, a wrapper and, for underflowing exps,
// its errno path (docs/performance.md, "Elementwise math"); the covariance passes of a Gaussian process are
// mostly exps. Why not Eigen's packet exp and log: several ulps, flushed subnormals, and scalar tails that differ from
// the packets.
//
// Why table-free: a table (2^(j/N), 1/c and log c) needs gathers, which the compiler emits or not by the target's
// tuning, and which microcode mitigations (GDS) made slow on many Intel CPUs; a longer polynomial is plain
// multiply-adds on every target. The error budget allows it: glibc's exp and log are within ~0.51 ulp of the true
// value, ours within 0.65 (exp) and 0.77 ulp (log) at worst on 120k values measured against mpmath (the argument is in
// the comments below; tests/test_hostile.cpp sweeps both against the C library), so the two results, a whole number
// of ulps apart, differ by at most one.
//
// Every element of every row goes through one of the *_block functions, one compiled loop over `block` elements
// (callers copy short, strided or broadcast rows into a padded buffer first), so a value's result has the same bits
// whatever the row's length, layout, position or thread. Only backends/cpu/maps.cpp includes this header: one
// translation unit, one compiled copy of each loop, so even the compiler's choice of which a * b + c to fuse cannot
// differ by path.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace vt::cpu::vmath {

constexpr int block = 64;  // elements per call: a multiple of every vector width

namespace detail {

inline double from_bits(std::uint64_t u) { return std::bit_cast<double>(u); }
inline std::uint64_t to_bits(double d) { return std::bit_cast<std::uint64_t>(d); }

// c ? a : b by bits, a and b both computed: a conditional expression whose arm holds arithmetic is control flow to
// the compiler, which under -ftrapping-math vectorises it only with AVX-512's masks; this vectorises on any target.
inline double select(bool c, double a, double b) {
  const std::uint64_t m = -static_cast<std::uint64_t>(c);
  return from_bits((to_bits(a) & m) | (to_bits(b) & ~m));
}

// ln 2 = ln2_hi + ln2_lo to ~2^-85; ln2_hi has 32 significant bits, so k ln2_hi is exact for |k| < 2^21.
constexpr double ln2_hi = 0x1.62e42fee00000p-1;
constexpr double ln2_lo = 0x1.a39ef35793c76p-33;
constexpr double inv_ln2 = 0x1.71547652b82fep+0;
constexpr double shift = 0x1.8p52;  // v + shift rounds |v| < 2^51 to an integer, held in the low bits

// (e^r - 1 - r) / r^2 on |r| <= 1.002 ln2 / 2: the degree-10 Chebyshev interpolant (mpmath.chebyfit), within 1.5e-18;
// times r^2 <= 0.12, that is below 0.002 ulp of e^r.
constexpr double exp_c[11] = {0x1.0000000000000p-1,  0x1.5555555555557p-3,  0x1.5555555555556p-5,
                              0x1.111111111009cp-7,  0x1.6c16c16c162b0p-10, 0x1.a01a01ac0a9eep-13,
                              0x1.a01a01a6ec522p-16, 0x1.71de01c3fc936p-19, 0x1.27e4db25ce3adp-22,
                              0x1.af4ecd2129492p-26, 0x1.1f7385560be05p-29};

inline double exp_one(double x) {
  // exp(x) is finite for x <= max_arg (glibc's threshold too) and rounds to zero below -746. Beyond those (and for a
  // NaN) the steps below run on 0 instead and the last select gives the answer: on x86 a lane that underflows, or a
  // subnormal operand, costs a microcode assist (~100 cycles), and garbage exponents would underflow (in a covariance
  // most pairs are far apart). A subnormal x also runs on 0: exp rounds to 1 below 2^-54.
  constexpr double max_arg = 0x1.62e42fefa39efp+9;  // 709.78
  const bool within = (x >= -746.0) & (x <= max_arg);
  const double xc = select(within & (std::fabs(x) >= 0x1p-1022), x, 0.0);
  // x = k ln2 + t - c, k the integer nearest x / ln2: t is exact (x and k ln2_hi are within a factor 2 of each other,
  // or k = 0), |t| <= ~0.35, and |c| = |k ln2_lo| < 2^-22.
  const double z = std::fma(xc, inv_ln2, shift);
  const double kd = z - shift;
  const std::int64_t k = static_cast<std::int64_t>(to_bits(z) - to_bits(shift));
  const double t = std::fma(-kd, ln2_hi, xc);
  const double c = kd * ln2_lo;
  const double r = t - c;
  // q = r^2 P(r) ~ e^r - 1 - r by Estrin's scheme, a short dependency chain.
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double a0 = std::fma(exp_c[1], r, exp_c[0]), a1 = std::fma(exp_c[3], r, exp_c[2]);
  const double a2 = std::fma(exp_c[5], r, exp_c[4]), a3 = std::fma(exp_c[7], r, exp_c[6]);
  const double a4 = std::fma(exp_c[9], r, exp_c[8]);
  const double b0 = std::fma(a1, r2, a0), b1 = std::fma(a3, r2, a2), b2 = std::fma(exp_c[10], r2, a4);
  const double q = r2 * std::fma(b2, r8, std::fma(b1, r4, b0));
  // e^r = 1 + t - c + q. 1 + t is split exactly into hi + lo (Fast2Sum: |t| < 1), and the small terms join lo first,
  // so that the one rounding of the size of the result's ulp is the last. Each of the others costs up to 1/16 ulp (q
  // up to 0.07 against y >= 0.7): 0.65 ulp at worst measured against mpmath.
  const double hi = 1.0 + t;
  const double lo = (1.0 - hi) + t;
  const double y = hi + ((lo - c) + q);
  // y 2^k, y in [0.7, 1.42). A normal result: k added to y's exponent, exact (for k = 1024, x <= max_arg keeps y < 1).
  const double normal = from_bits(to_bits(y) + (static_cast<std::uint64_t>(k) << 52));
  // A result below 2^-1022, where a multiplication would underflow: w = y 2^(k + 1074) is exact and normal, and w
  // rounded to an integer (by adding 2^52) is the bit pattern of the subnormal y 2^k, rounded once, as glibc rounds it;
  // 2^52 is that of the least normal, 0 that of +0. k is capped so that lanes with normal results do not underflow
  // here.
  const std::int64_t kw = k < -1000 ? k : -1000;
  const double w = y * from_bits(static_cast<std::uint64_t>(kw + 2097) << 52);
  const double sub = from_bits(to_bits(w + 0x1p52) - to_bits(0x1p52));
  const double result = select(w < 0x1p52, sub, normal);  // only for k <= -1022: else w >= 0.7 2^53
  // Beyond: +0 below -746, +inf above max_arg, NaN for NaN.
  const double beyond = select(x < 0, 0.0, select(x > 0, std::numeric_limits<double>::infinity(), x));
  return select(within, result, beyond);
}

// log(1 + f) = 2 atanh(s) = 2s + s R(s^2), s = f / (2 + f): R(z) / z on 0 <= z <= (1.002 (sqrt2 - 1) / (sqrt2 + 1))^2,
// the degree-6 Chebyshev interpolant (mpmath.chebyfit), within 3.2e-16; times s^3 against 2s, below 0.05 ulp.
constexpr double log_c[7] = {0x1.5555555555558p-1, 0x1.9999999995124p-2, 0x1.2492492e229afp-2, 0x1.c71c62a6b9f35p-3,
                             0x1.7462c67faaddap-3, 0x1.39fc10e987a9dp-3, 0x1.2b74cb13a0436p-3};

inline double log_one(double x) {
  // A subnormal x is n 2^-1074, n its bit pattern: n made a double (exactly, by the shift trick) and 1074 taken off the
  // exponent. Not x 2^52: on x86 a subnormal operand costs a microcode assist.
  const bool tiny = x < 0x1p-1022;
  const double xs = select(tiny, from_bits(to_bits(x) | to_bits(0x1p52)) - 0x1p52, x);
  // x = 2^e m, m in [sqrt(1/2), sqrt(2)): e from the bits of x less those of sqrt(1/2), biased by 1024 so that only
  // logical shifts are needed, and made a double by the shift trick.
  const std::uint64_t ix = to_bits(xs);
  const std::uint64_t biased = (ix - 0x3fe6a09e667f3bcdULL + (1024ULL << 52)) >> 52;  // e + 1024
  const double m = from_bits(ix - (biased << 52) + (1024ULL << 52));
  const double e = (from_bits(biased | to_bits(0x1p52)) - 0x1p52) - select(tiny, 2098.0, 1024.0);
  const double f = m - 1.0;  // exact: m is within a factor 2 of 1
  const double s = f / (2.0 + f);
  const double z = s * s, z2 = z * z, z4 = z2 * z2;
  const double a0 = std::fma(log_c[1], z, log_c[0]), a1 = std::fma(log_c[3], z, log_c[2]);
  const double a2 = std::fma(log_c[5], z, log_c[4]);
  const double R = z * std::fma(std::fma(log_c[6], z2, a2), z4, std::fma(a1, z2, a0));
  // log(1 + f) = f - f^2/2 + s (f^2/2 + R), since 2s = f - s f; f^2/2 = hf + hf_lo exactly.
  const double hf = 0.5 * f * f;
  const double hf_lo = std::fma(0.5 * f, f, -hf);
  // log x = e ln2_hi + f + (s (hf + R) - hf) + (e ln2_lo - hf_lo): e ln2_hi + f split exactly into hi + lo (Fast2Sum:
  // e = 0, or |e ln2_hi| >= ln2 > |f|), the tiny terms joining lo, then the small one (|.| <= 0.07 against a result
  // >= 0.34 when e != 0, or against f when e = 0), so that the one rounding of the size of the result's ulp is the
  // last. With the roundings of s and of the small terms, 0.77 ulp at worst measured against mpmath (at x just below
  // sqrt(1/2), where e = -1 and f ~ 0.41), so that log, like exp, differs from glibc's by one ulp at most.
  const double a = e * ln2_hi;
  const double hi = a + f;
  const double lo = f - (hi - a);
  const double small = std::fma(s, hf + R, -hf);
  const double result = hi + (small + ((lo - hf_lo) + e * ln2_lo));
  // Special values by selects, not branches, so that the loop vectorises: log(+inf) = +inf, log(NaN) = NaN,
  // log(+-0) = -inf, log(x < 0) = NaN.
  constexpr double inf = std::numeric_limits<double>::infinity();
  const double special = select(x == 0, -inf, select(x < 0, std::numeric_limits<double>::quiet_NaN(), x));
  return select((x > 0) & (x < inf), result, special);
}

// log(1 + u) from log of w = 1 + u rounded: log1p(u) = log(w) + (u - (w - 1)) / w to first order in w's rounding
// error (w - 1 is exact for w < 2^53), so the result is log's within about an ulp. Special values by selects: u = 0
// keeps its sign, u = -1 gives -inf, u < -1 NaN, +inf +inf (where the correction would be inf - inf).
inline double log1p_one(double u) {
  const double w = 1.0 + u;
  const double lw = log_one(w);
  const double corrected = lw + (u - (w - 1.0)) / w;
  constexpr double inf = std::numeric_limits<double>::infinity();
  return select(u == 0, u, select((w > 0) & (w < inf), corrected, lw));
}

// The logistic function and log(1 + e^x), as backends/special_math.hpp's sigmoid and softplus (exp taken of -|x|
// only, so nothing overflows), on e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below; max(x, 0) + log1p(e).
// A NaN stays NaN through e.
inline double sigmoid_one(double x) {
  const double e = exp_one(-std::fabs(x));
  return select(x >= 0, 1.0, e) / (1.0 + e);
}
inline double softplus_one(double x) { return select(x > 0, x, 0.0) + log1p_one(exp_one(-std::fabs(x))); }

}  // namespace detail

// GCC's tuning for AVX-512 CPUs prefers 256-bit vectors (to spare the clock of older Xeons); these loops are pure
// arithmetic, which 512-bit vectors do at nearly twice the rate.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define VT_VMATH_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define VT_VMATH_WIDE
#endif

// Whether the target has fused multiply-adds: without them each std::fma is a call to the C library
// and these loops, no longer vectorised, cost several times glibc's exp and log (a build with
// VTAPE_NATIVE=OFF on x86-64): maps.cpp then calls the C library instead.
#if defined(__FMA__) || defined(__aarch64__)
constexpr bool vectorised = true;
#else
constexpr bool vectorised = false;
#endif

// v[i] = exp(v[i]), log(v[i]), log1p, sigmoid or softplus of v[i] for i < block, in place. Not inlined, and static: one
// compiled copy of each loop, which no other translation unit's copy (built with other flags) can replace. Which a * b
// + c the compiler fuses depends on the flags (-ffp-contract), so bits are the same on every path of one build, and
// within the ulp bound on every build.
[[gnu::noinline, maybe_unused]] VT_VMATH_WIDE static void exp_block(double* __restrict v) {
  for (int i = 0; i < block; ++i) v[i] = detail::exp_one(v[i]);
}
[[gnu::noinline, maybe_unused]] VT_VMATH_WIDE static void log_block(double* __restrict v) {
  for (int i = 0; i < block; ++i) v[i] = detail::log_one(v[i]);
}
[[gnu::noinline, maybe_unused]] VT_VMATH_WIDE static void log1p_block(double* __restrict v) {
  for (int i = 0; i < block; ++i) v[i] = detail::log1p_one(v[i]);
}
[[gnu::noinline, maybe_unused]] VT_VMATH_WIDE static void sigmoid_block(double* __restrict v) {
  for (int i = 0; i < block; ++i) v[i] = detail::sigmoid_one(v[i]);
}
[[gnu::noinline, maybe_unused]] VT_VMATH_WIDE static void softplus_block(double* __restrict v) {
  for (int i = 0; i < block; ++i) v[i] = detail::softplus_one(v[i]);
}

#undef VT_VMATH_WIDE

}  // namespace vt::cpu::vmath
