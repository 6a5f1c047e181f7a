// Elementwise maps, copies and reductions over strided views.
#include <cmath>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../core/eigen.hpp"

#include "../../core/error.hpp"
#include "../element.hpp"
#include "../special_math.hpp"
#include "../view_checks.hpp"
#include "cpu_backend.hpp"
#include "strided.hpp"
#include "sum_order.hpp"
#include "vector_math.hpp"

namespace vt::cpu {

namespace {

template <class T>
T* ptr(const View& v) {
  return static_cast<T*>(v.data);
}

// Rows as Eigen arrays, so that contiguous rows use Eigen's vectorised math (exp, log, ...);
// strided rows fall back to strided maps of the same expressions.
template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using StridedRow = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
template <class T>
using ConstStridedRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;

// y = fn(x) elementwise, fn one scalar function for every element: a value's result never depends
// on the tensor's length, its layout or the path taken. (Eigen's vectorised exp, log, sqrt, tanh
// and sin differ from their scalar tails and from the C library by several ulps, and flush
// subnormal results; the C library's functions are within an ulp and handle every special value.)
// Contiguous rows are plain loops, which the compiler vectorises where that is exact (neg, abs,
// square and, with -fno-math-errno, sqrt). exp, log, log1p, sigmoid and softplus are not maps of the C
// library's functions (or special_math.hpp's) but map_block's of vector_math.hpp's kernels (where the
// target has FMA): exp, log and log1p within an ulp of the C library's, sigmoid and softplus within 2 ulps
// of special_math.hpp's formulas.
template <class T, class Fn>
void map1(const View& in, const View& out, Fn fn) {
  const T* x = ptr<T>(in);
  T* y = ptr<T>(out);
  for_each_row<2>(out.shape, {&in.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    const T* xr = x + off[0];
    T* yr = y + off[1];
    if (inner[0] == 1 && inner[1] == 1) {
      for (std::int64_t i = 0; i < len; ++i) yr[i] = fn(xr[i]);
    } else {
      for (std::int64_t i = 0; i < len; ++i) yr[i * inner[1]] = fn(xr[i * inner[0]]);
    }
  });
}

// y = kernel(x) elementwise, kernel one of vector_math.hpp's, which maps a block of doubles in
// place. Every element, whatever the row's length, stride or dtype, goes through that one compiled
// loop, in a block of the output or in a padded copy: the same bits on every path. float32 is
// computed in double and rounded once: within an ulp of expf and logf, since the double result is
// within 0.8 ulp of float64's, 2^-29 of float32's.
template <class T>
void map_block(const View& in, const View& out, void (*kernel)(double*)) {
  constexpr std::int64_t block = vmath::block;
  const T* x = ptr<T>(in);
  T* y = ptr<T>(out);
  for_each_row<2>(out.shape, {&in.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    alignas(64) double buf[block];
    for (std::int64_t start = 0; start < len; start += block) {
      const std::int64_t count = std::min(block, len - start);
      const T* xc = x + off[0] + start * inner[0];
      T* yc = y + off[1] + start * inner[1];
      if constexpr (std::is_same_v<T, double>) {
        if (count == block && inner[0] == 1 && inner[1] == 1) {  // the kernel in the output itself: one copy fewer
          if (yc != xc) std::copy(xc, xc + block, yc);
          kernel(yc);
          continue;
        }
      }
      if (inner[0] == 1) {
        for (std::int64_t i = 0; i < count; ++i) buf[i] = static_cast<double>(xc[i]);
      } else {
        for (std::int64_t i = 0; i < count; ++i) buf[i] = static_cast<double>(xc[i * inner[0]]);
      }
      for (std::int64_t i = count; i < block; ++i) buf[i] = 1.0;  // padding, never read back
      kernel(buf);
      if (inner[1] == 1) {
        for (std::int64_t i = 0; i < count; ++i) yc[i] = static_cast<T>(buf[i]);
      } else {
        for (std::int64_t i = 0; i < count; ++i) yc[i * inner[1]] = static_cast<T>(buf[i]);
      }
    }
  });
}

// y = fn(a, b) elementwise; an operand constant along the row is passed as a scalar.
template <class T, class Fn>
void map2(const View& a, const View& b, const View& out, Fn fn) {
  const T* x = ptr<T>(a);
  const T* z = ptr<T>(b);
  T* y = ptr<T>(out);
  for_each_row<3>(out.shape, {&a.strides, &b.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    if (inner[2] == 1 && inner[0] == 1 && inner[1] == 1) {
      Row<T>(y + off[2], len) = fn(ConstRow<T>(x + off[0], len), ConstRow<T>(z + off[1], len));
    } else if (inner[2] == 1 && inner[0] == 1 && inner[1] == 0) {
      Row<T>(y + off[2], len) =
          fn(ConstRow<T>(x + off[0], len), Eigen::Array<T, Eigen::Dynamic, 1>::Constant(len, z[off[1]]));
    } else if (inner[2] == 1 && inner[0] == 0 && inner[1] == 1) {
      Row<T>(y + off[2], len) =
          fn(Eigen::Array<T, Eigen::Dynamic, 1>::Constant(len, x[off[0]]), ConstRow<T>(z + off[1], len));
    } else {
      auto stride = [](std::int64_t s) { return Eigen::InnerStride<>(s); };
      StridedRow<T>(y + off[2], len, stride(inner[2])) = fn(ConstStridedRow<T>(x + off[0], len, stride(inner[0])),
                                                            ConstStridedRow<T>(z + off[1], len, stride(inner[1])));
    }
  });
}

// glibc's exp10 (a GNU extension, so not in std::).
inline double exp10_of(double v) { return ::exp10(v); }
inline float exp10_of(float v) { return ::exp10f(v); }

// lgamma_r: std::lgamma writes the sign of gamma to the global signgam, a data race when maps run
// on several threads.
inline double lgamma_of(double v) {
  int sign;
  return ::lgamma_r(v, &sign);
}
inline float lgamma_of(float v) {
  int sign;
  return ::lgammaf_r(v, &sign);
}

// ---------------------------------------------------------------- pow
// pow by the exponent's value v (the usual case is one v over a row: x^2, a scalar hyperparameter, a
// per-example exponent broadcast over a matrix): glibc's pow is a call per element with the general
// case's work (docs/performance.md, "Elementwise math"). Each computes every element the same way wherever it sits, so
// a result never depends on the length, the layout or the thread count, and falls back to std::pow for any element
// outside the plain case (an input or a result that is zero, subnormal, infinite or NaN, or a negative base outside the
// integer path), so pow's special values are exactly the C library's. Accuracy: x^k for |k| <= 8 by repeated squaring
// (at most 4 roundings, ~2 ulps); v = 0.5 is sqrt (correctly rounded), v = -0.5 is 1 / sqrt (~1 ulp); any other v is
// exp(v log x) with vector_math.hpp's log and exp in double, whose error grows with |v log x|: about |v log x| + 2 ulps
// in float64 (float32 rows are computed in double: within an ulp of float32). Rows whose exponent varies take the same
// path element by element, so a value never depends on how it was laid out.
namespace powrow {

enum class Path { one, copy, integer, sqrt, rsqrt, exp_log };

struct Plan {
  Path path;
  int k = 0;  // Path::integer: the exponent
};

inline Plan plan_for(double v) {
  if (v == 0) return {Path::one};
  if (v == 1) return {Path::copy};
  if (v == 0.5) return {Path::sqrt};
  if (v == -0.5) return {Path::rsqrt};
  if (std::fabs(v) <= 8 && v == std::trunc(v)) return {Path::integer, static_cast<int>(v)};
  return {Path::exp_log};
}

// A value that every fast path computes like pow: finite, normal, nonzero.
template <class T>
bool plain(T r) {
  const T m = std::fabs(r);
  return m >= std::numeric_limits<T>::min() && m <= std::numeric_limits<T>::max();
}

inline double ipow(double x, int k) {  // |k| >= 1
  unsigned n = static_cast<unsigned>(k < 0 ? -k : k);
  double r = 1, p = x;
  for (; n; n >>= 1, p *= p)
    if (n & 1u) r *= p;
  return r;
}

constexpr int chunk = 64;  // a multiple of every packet size: all elements take Eigen's packet path

// pow(u, v) by v's path; e is exp(v log u) from Eigen's packets, used by Path::exp_log only. The one
// formula for every element, whether its row's exponent is one value or varies, so that an
// element's result depends on (u, v) alone: never on the layout, the batch or a jit plan's tiling.
template <class T>
inline T value(T u, double v, const Plan& plan, double e) {
  auto fallback = [&] { return std::pow(u, static_cast<T>(v)); };
  switch (plan.path) {
    case Path::one: return T(1);  // pow(x, 0) is 1 for every x, NaN included
    case Path::copy: return u;
    case Path::integer: {
      const double p = ipow(static_cast<double>(u), plan.k);
      const T r = static_cast<T>(plan.k < 0 ? 1 / p : p);
      // p itself must be plain: 1 / p of a subnormal or infinite p would lose what pow keeps.
      return plain(p) && plain(r) ? r : fallback();
    }
    case Path::sqrt: {
      const T r = std::sqrt(u);
      return plain(r) ? r : fallback();  // pow(-0, .5) is +0 and pow(-inf, .5) +inf, unlike sqrt
    }
    case Path::rsqrt: {
      const T s = std::sqrt(u);
      return plain(s) ? T(1) / s : fallback();
    }
    case Path::exp_log: {
      const T r = static_cast<T>(e);
      return u > 0 && plain(u) && plain(r) ? r : fallback();
    }
  }
  return fallback();
}

static_assert(chunk == vmath::block);

// buf[i] = exp(v(i) log buf[i]) over a chunk: vector_math.hpp's loops (exp and log within an ulp), or Eigen's packets
// where the target does not vectorise those.
template <class Exponent>
inline void exp_times_log(double* buf, Exponent v) {
  if constexpr (vmath::vectorised) {
    vmath::log_block(buf);
    for (int i = 0; i < chunk; ++i) buf[i] *= v(i);
    vmath::exp_block(buf);
  } else {
    Eigen::Map<Eigen::Array<double, chunk, 1>, Eigen::Aligned64> a(buf);
    Eigen::Array<double, chunk, 1> b;
    for (int i = 0; i < chunk; ++i) b[i] = v(i);
    a = (a.log() * b).exp();
  }
}

// A row whose exponent is one value v: the path is chosen once, exp and log run only where needed.
template <class T>
void run(const T* x, std::int64_t xs, double v, T* y, std::int64_t ys, std::int64_t len) {
  const Plan plan = plan_for(v);
  if (plan.path != Path::exp_log) {
    for (std::int64_t i = 0; i < len; ++i) y[i * ys] = value(x[i * xs], v, plan, 0.0);
    return;
  }
  alignas(64) double buf[chunk];
  for (std::int64_t start = 0; start < len; start += chunk) {
    const std::int64_t count = std::min<std::int64_t>(chunk, len - start);
    const T* xc = x + start * xs;
    T* yc = y + start * ys;
    for (std::int64_t i = 0; i < count; ++i) buf[i] = static_cast<double>(xc[i * xs]);
    for (std::int64_t i = count; i < chunk; ++i) buf[i] = 1.0;
    exp_times_log(buf, [v](int) { return v; });
    for (std::int64_t i = 0; i < count; ++i) yc[i * ys] = value(xc[i * xs], v, plan, buf[i]);
  }
}

// A row whose exponent varies: each element's path from its own exponent, exactly as above.
template <class T>
void run_varying(const T* x, std::int64_t xs, const T* z, std::int64_t zs, T* y, std::int64_t ys, std::int64_t len) {
  alignas(64) double bx[chunk], bz[chunk];
  for (std::int64_t start = 0; start < len; start += chunk) {
    const std::int64_t count = std::min<std::int64_t>(chunk, len - start);
    const T* xc = x + start * xs;
    const T* zc = z + start * zs;
    T* yc = y + start * ys;
    for (std::int64_t i = 0; i < count; ++i) {
      bx[i] = static_cast<double>(xc[i * xs]);
      bz[i] = static_cast<double>(zc[i * zs]);
    }
    for (std::int64_t i = count; i < chunk; ++i) bx[i] = bz[i] = 1.0;
    exp_times_log(bx, [&bz](int i) { return bz[i]; });
    for (std::int64_t i = 0; i < count; ++i) {
      const double v = static_cast<double>(zc[i * zs]);
      yc[i * ys] = value(xc[i * xs], v, plan_for(v), bx[i]);
    }
  }
}

}  // namespace powrow

template <class T>
void pow_map(const View& a, const View& b, const View& out) {
  const T* x = ptr<T>(a);
  const T* z = ptr<T>(b);
  T* y = ptr<T>(out);
  for_each_row<3>(out.shape, {&a.strides, &b.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    if (inner[1] == 0)
      return powrow::run<T>(x + off[0], inner[0], static_cast<double>(z[off[1]]), y + off[2], inner[2], len);
    powrow::run_varying<T>(x + off[0], inner[0], z + off[1], inner[1], y + off[2], inner[2], len);
  });
}

// b a^(b-1), 0 where b = 0: pow's paths (above) for a^(b-1), so an element's value depends on (a, b)
// alone, as pow's. b - 1 is rounded in T on every path.
template <class T>
void pow_base_grad_map(const View& a, const View& b, const View& out) {
  const T* x = ptr<T>(a);
  const T* z = ptr<T>(b);
  T* y = ptr<T>(out);
  for_each_row<3>(out.shape, {&a.strides, &b.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    const T* xr = x + off[0];
    T* yr = y + off[2];
    const std::int64_t xs = inner[0], ys = inner[2];
    if (inner[1] == 0) {
      const T v = z[off[1]];
      if (v == T(0)) {
        for (std::int64_t i = 0; i < len; ++i) yr[i * ys] = T(0);
        return;
      }
      powrow::run<T>(xr, xs, static_cast<double>(v - T(1)), yr, ys, len);
      for (std::int64_t i = 0; i < len; ++i) yr[i * ys] = v * yr[i * ys];
      return;
    }
    // The exponents are copied first: the output may be b's buffer (binary ops run in place).
    T exponent[powrow::chunk], less_one[powrow::chunk];
    for (std::int64_t start = 0; start < len; start += powrow::chunk) {
      const std::int64_t count = std::min<std::int64_t>(powrow::chunk, len - start);
      for (std::int64_t i = 0; i < count; ++i) {
        exponent[i] = z[off[1] + (start + i) * inner[1]];
        less_one[i] = exponent[i] - T(1);
      }
      powrow::run_varying<T>(xr + start * xs, xs, less_one, 1, yr + start * ys, ys, count);
      for (std::int64_t i = 0; i < count; ++i) {
        T& r = yr[(start + i) * ys];
        r = exponent[i] == T(0) ? T(0) : exponent[i] * r;
      }
    }
  });
}

// out = a <kind> b, bools from operands of one dtype; an operand constant along the row is read once.
template <class T, class Cmp>
void compare_map(const View& a, const View& b, const View& out, Cmp cmp) {
  const T* x = ptr<T>(a);
  const T* z = ptr<T>(b);
  bool* y = ptr<bool>(out);
  for_each_row<3>(out.shape, {&a.strides, &b.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
    const T *xr = x + off[0], *zr = z + off[1];
    bool* yr = y + off[2];
    if (inner[0] == 1 && inner[1] == 1 && inner[2] == 1) {
      for (std::int64_t i = 0; i < len; ++i) yr[i] = cmp(xr[i], zr[i]);
    } else if (inner[0] == 1 && inner[1] == 0 && inner[2] == 1) {
      const T v = *zr;
      for (std::int64_t i = 0; i < len; ++i) yr[i] = cmp(xr[i], v);
    } else {
      for (std::int64_t i = 0; i < len; ++i) yr[i * inner[2]] = cmp(xr[i * inner[0]], zr[i * inner[1]]);
    }
  });
}

void compare(BinaryKind kind, const View& a, const View& b, const View& out) {
  if (a.dtype != b.dtype || out.dtype != DType::boolean)
    fail("cpu compare: {} and {} into {} (internal error: the ops promote first)", name_of(a.dtype), name_of(b.dtype),
         name_of(out.dtype));
  visit_any_dtype(a.dtype, [&](auto zero) {
    using T = decltype(zero);
    switch (kind) {
      case BinaryKind::less: return compare_map<T>(a, b, out, [](T u, T v) { return u < v; });
      case BinaryKind::less_equal: return compare_map<T>(a, b, out, [](T u, T v) { return u <= v; });
      case BinaryKind::greater: return compare_map<T>(a, b, out, [](T u, T v) { return u > v; });
      case BinaryKind::greater_equal: return compare_map<T>(a, b, out, [](T u, T v) { return u >= v; });
      case BinaryKind::equal: return compare_map<T>(a, b, out, [](T u, T v) { return u == v; });
      case BinaryKind::not_equal: return compare_map<T>(a, b, out, [](T u, T v) { return u != v; });
      default: fail("cpu compare: map {} (internal error)", static_cast<int>(kind));
    }
  });
}

}  // namespace

void CpuBackend::fill(const View& out, double value) {
  if (recording()) return keep_fill(out, value);
  visit_any_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* y = ptr<T>(out);
    const T v = element::convert<T>(value);
    for_each_row<1>(out.shape, {&out.strides}, [&](auto off, std::int64_t len, auto inner) {
      for (std::int64_t i = 0; i < len; ++i) y[off[0] + i * inner[0]] = v;
    });
  });
}

void CpuBackend::copy(const View& in, const View& out) {
  if (recording()) return keep_copy(in, out);
  if (in.dtype == out.dtype && in.shape.size() == 1 && out.shape.size() == 1 && in.strides[0] == 1 &&
      out.strides[0] == 1) {  // one contiguous run: a small copy costs no more than its bytes
    if (in.data != out.data && out.shape[0] > 0)
      std::memmove(out.data, in.data, static_cast<std::size_t>(out.shape[0]) * size_of(out.dtype));
    return;
  }
  check_same_rank(in, out, "cpu", "copy");
  visit_any_dtype(in.dtype, [&](auto zin) {
    using In = decltype(zin);
    visit_any_dtype(out.dtype, [&](auto zout) {
      using Out = decltype(zout);
      const In* x = ptr<In>(in);
      Out* y = ptr<Out>(out);
      for_each_row<2>(out.shape, {&in.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
        for (std::int64_t i = 0; i < len; ++i)
          y[off[1] + i * inner[1]] = element::convert<Out>(x[off[0] + i * inner[0]]);
      });
    });
  });
}

void CpuBackend::unary(UnaryKind kind, const View& in, const View& out) {
  if (recording()) return keep([=, this] { unary(kind, in, out); });
  check_same_rank(in, out, "cpu", "unary");
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      switch (kind) {
        case UnaryKind::neg: return map1<T>(in, out, [](T v) { return element::neg(v); });
        case UnaryKind::abs: return map1<T>(in, out, [](T v) { return element::abs_int(v); });
        case UnaryKind::sign: return map1<T>(in, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
        default:
          fail("cpu unary: map {} on {} (internal error: apply admits only neg, abs and sign)", static_cast<int>(kind),
               name_of(out.dtype));
      }
    } else {
      switch (kind) {
        case UnaryKind::neg: return map1<T>(in, out, [](T v) { return -v; });
        case UnaryKind::exp:
          if constexpr (vmath::vectorised) return map_block<T>(in, out, vmath::exp_block);
          return map1<T>(in, out, [](T v) { return std::exp(v); });
        case UnaryKind::log:
          if constexpr (vmath::vectorised) return map_block<T>(in, out, vmath::log_block);
          return map1<T>(in, out, [](T v) { return std::log(v); });
        case UnaryKind::log1p:
          if constexpr (vmath::vectorised) return map_block<T>(in, out, vmath::log1p_block);
          return map1<T>(in, out, [](T v) { return std::log1p(v); });
        case UnaryKind::sqrt: return map1<T>(in, out, [](T v) { return std::sqrt(v); });
        case UnaryKind::square: return map1<T>(in, out, [](T v) { return v * v; });
        case UnaryKind::sin: return map1<T>(in, out, [](T v) { return std::sin(v); });
        case UnaryKind::cos: return map1<T>(in, out, [](T v) { return std::cos(v); });
        case UnaryKind::tanh: return map1<T>(in, out, [](T v) { return std::tanh(v); });
        case UnaryKind::abs: return map1<T>(in, out, [](T v) { return std::fabs(v); });
        case UnaryKind::sign:  // NaN stays NaN, as in numpy: a sign must not hide one
          return map1<T>(in, out, [](T v) { return v != v ? v : static_cast<T>((v > 0) - (v < 0)); });
        case UnaryKind::log10: return map1<T>(in, out, [](T v) { return std::log10(v); });
        case UnaryKind::log2: return map1<T>(in, out, [](T v) { return std::log2(v); });
        case UnaryKind::exp2: return map1<T>(in, out, [](T v) { return std::exp2(v); });
        case UnaryKind::exp10: return map1<T>(in, out, [](T v) { return exp10_of(v); });
        case UnaryKind::expm1: return map1<T>(in, out, [](T v) { return std::expm1(v); });
        case UnaryKind::erf: return map1<T>(in, out, [](T v) { return std::erf(v); });
        case UnaryKind::erfc: return map1<T>(in, out, [](T v) { return std::erfc(v); });
        case UnaryKind::lgamma: return map1<T>(in, out, [](T v) { return lgamma_of(v); });
        case UnaryKind::digamma: return map1<T>(in, out, [](T v) { return special::digamma(v); });
        case UnaryKind::trigamma: return map1<T>(in, out, [](T v) { return special::trigamma(v); });
        case UnaryKind::sigmoid:
          if constexpr (vmath::vectorised) return map_block<T>(in, out, vmath::sigmoid_block);
          return map1<T>(in, out, [](T v) { return special::sigmoid(v); });
        case UnaryKind::softplus:
          if constexpr (vmath::vectorised) return map_block<T>(in, out, vmath::softplus_block);
          return map1<T>(in, out, [](T v) { return special::softplus(v); });
        case UnaryKind::tan: return map1<T>(in, out, [](T v) { return std::tan(v); });
        case UnaryKind::arcsin: return map1<T>(in, out, [](T v) { return std::asin(v); });
        case UnaryKind::arccos: return map1<T>(in, out, [](T v) { return std::acos(v); });
        case UnaryKind::arctan: return map1<T>(in, out, [](T v) { return std::atan(v); });
        case UnaryKind::sinh: return map1<T>(in, out, [](T v) { return std::sinh(v); });
        case UnaryKind::cosh: return map1<T>(in, out, [](T v) { return std::cosh(v); });
        case UnaryKind::arcsinh: return map1<T>(in, out, [](T v) { return std::asinh(v); });
        case UnaryKind::arccosh: return map1<T>(in, out, [](T v) { return std::acosh(v); });
        case UnaryKind::arctanh: return map1<T>(in, out, [](T v) { return std::atanh(v); });
        case UnaryKind::floor: return map1<T>(in, out, [](T v) { return std::floor(v); });
        case UnaryKind::ceil: return map1<T>(in, out, [](T v) { return std::ceil(v); });
        default: fail("cpu unary: map {} on {} (internal error)", static_cast<int>(kind), name_of(out.dtype));
      }
    }
  });
}

void CpuBackend::binary(BinaryKind kind, const View& a, const View& b, const View& out) {
  if (recording()) return keep_binary(kind, a, b, out);
  check_same_rank(a, out, "cpu", "binary");
  check_same_rank(b, out, "cpu", "binary");
  if (is_comparison(kind)) return compare(kind, a, b, out);
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      // Wrapping arithmetic (element.hpp), element by element.
      auto each = [&](auto fn) {
        map2<T>(a, b, out, [&](const auto& x, const auto& y) { return x.binaryExpr(y, fn); });
      };
      switch (kind) {
        case BinaryKind::add: return each([](T u, T v) { return element::add(u, v); });
        case BinaryKind::sub: return each([](T u, T v) { return element::sub(u, v); });
        case BinaryKind::mul: return each([](T u, T v) { return element::mul(u, v); });
        case BinaryKind::maximum: return each([](T u, T v) { return u > v ? u : v; });
        case BinaryKind::minimum: return each([](T u, T v) { return u < v ? u : v; });
        default:
          fail("cpu binary: map {} on {} (internal error: apply refuses it)", static_cast<int>(kind),
               name_of(out.dtype));
      }
    } else {
      switch (kind) {
        case BinaryKind::add: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x + y; });
        case BinaryKind::sub: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x - y; });
        case BinaryKind::mul: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x * y; });
        case BinaryKind::div: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x / y; });
        // Paths by the exponent's value (pow_map, above), the C library's pow for special values.
        case BinaryKind::pow: return pow_map<T>(a, b, out);
        case BinaryKind::pow_base_grad: return pow_base_grad_map<T>(a, b, out);
        case BinaryKind::arctan2:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return std::atan2(u, v); });
          });
        case BinaryKind::maximum:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return u > v || std::isnan(u) ? u : v; });
          });
        case BinaryKind::minimum:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return u < v || std::isnan(u) ? u : v; });
          });

        default: fail("cpu binary: map {} on {} (internal error)", static_cast<int>(kind), name_of(out.dtype));
      }
    }
  });
}

void CpuBackend::select(const View& cond, const View& a, const View& b, const View& out) {
  if (recording()) return keep([=, this] { select(cond, a, b, out); });
  if (cond.dtype != DType::boolean)
    fail("cpu select: a {} condition (internal error: where converts it)", name_of(cond.dtype));
  visit_any_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    const bool* c = ptr<bool>(cond);
    const T* x = ptr<T>(a);
    const T* z = ptr<T>(b);
    T* y = ptr<T>(out);
    // Rows whose operands are contiguous or one broadcast element take a loop with those strides
    // known to the compiler, which vectorises it (a blend); the values are the same either way.
    auto known = [&](auto sc, auto sa, auto sb, const auto& off, std::int64_t len) {
      const bool* cr = c + off[0];
      const T *xr = x + off[1], *zr = z + off[2];
      T* yr = y + off[3];
      for (std::int64_t i = 0; i < len; ++i) yr[i] = cr[i * sc] ? xr[i * sa] : zr[i * sb];
    };
    using One = std::integral_constant<std::int64_t, 1>;
    using Zero = std::integral_constant<std::int64_t, 0>;
    for_each_row<4>(
        out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
          if (inner[3] == 1 && inner[0] == 1 && (inner[1] | 1) == 1 && (inner[2] | 1) == 1) {
            if (inner[1] == 1 && inner[2] == 1) return known(One{}, One{}, One{}, off, len);
            if (inner[1] == 0 && inner[2] == 1) return known(One{}, Zero{}, One{}, off, len);
            if (inner[1] == 1 && inner[2] == 0) return known(One{}, One{}, Zero{}, off, len);
            return known(One{}, Zero{}, Zero{}, off, len);
          }
          for (std::int64_t i = 0; i < len; ++i)
            y[off[3] + i * inner[3]] = c[off[0] + i * inner[0]] ? x[off[1] + i * inner[1]] : z[off[2] + i * inner[2]];
        });
  });
}

void CpuBackend::cumsum(const View& in, const View& out, int axis, bool reverse) {
  if (recording()) return keep([=, this] { cumsum(in, out, axis, reverse); });
  check_same_rank(in, out, "cpu", "cumsum");
  const auto a = static_cast<std::size_t>(axis);
  const std::int64_t n = out.shape[a], step_in = in.strides[a], step_out = out.strides[a];
  // One line per element of the other axes; each is summed in order on one thread.
  Shape lines = out.shape;
  lines[a] = 1;
  if (n == 0) return;
  visit_float_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* x = ptr<T>(in);
    T* y = ptr<T>(out);
    for_each_row<2>(lines, {&in.strides, &out.strides}, [&](auto off, std::int64_t len, auto inner) {
      if (len == 1 || std::abs(step_in) <= std::abs(inner[0])) {  // line by line, along the axis
        for (std::int64_t i = 0; i < len; ++i) {
          const T* xl = x + off[0] + i * inner[0];
          T* yl = y + off[1] + i * inner[1];
          double acc = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            const std::int64_t k = reverse ? n - 1 - j : j;
            acc += static_cast<double>(xl[k * step_in]);
            yl[k * step_out] = static_cast<T>(acc);
          }
        }
        return;
      }
      // The axis is not the innermost: a row of lines at a time, each carrying its own sum (the
      // same additions in the same order), so that memory is read along rows, not a strided column
      // at a time.
      std::vector<double> acc(static_cast<std::size_t>(len), 0.0);
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t k = reverse ? n - 1 - j : j;
        const T* xr = x + off[0] + k * step_in;
        T* yr = y + off[1] + k * step_out;
        for (std::int64_t i = 0; i < len; ++i) {
          acc[static_cast<std::size_t>(i)] += static_cast<double>(xr[i * inner[0]]);
          yr[i * inner[1]] = static_cast<T>(acc[static_cast<std::size_t>(i)]);
        }
      }
    });
  });
}

namespace {

// Combines v into m: a sum's addition, or a maximum's comparison (a NaN wins).
template <class T>
void combine_in_order(ReduceKind kind, T& m, T v) {
  if (kind == ReduceKind::sum) m = element::add(m, v);
  else if (v > m || v != v) m = v;
}

// The row kernel: len elements of x (x_step apart) into y (y_step apart): a sum's row into one value (y_step 0) in
// sum_order.hpp's order, anything else element by element in order.
template <class T>
void reduce_row(ReduceKind kind, const T* x, std::int64_t len, std::int64_t x_step, T* y, std::int64_t y_step) {
  if (kind == ReduceKind::sum && y_step == 0) {
    LaneSum<T> s;
    s.add(x, len, x_step);
    *y = element::add(*y, s.total());
    return;
  }
  for (std::int64_t i = 0; i < len; ++i) combine_in_order(kind, y[i * y_step], x[i * x_step]);
}

// A reduction whose innermost axis (after merging) is shorter than short_row: the row kernel would make a row of a few
// elements for every output or for every step along the reduced axes ([5000, 3] summed over either axis: 5000 rows of
// 3), each paying a row's call and index arithmetic. Each output still takes its elements in the row kernel's order,
// so the bits are the same. False where neither rule applies.
template <class T>
bool reduce_short_rows(ReduceKind kind, const View& in, const View& acc) {
  MergedAxes<2> rows = merge_axes<2>(in.shape, {&in.strides, &acc.strides});
  const std::size_t rank = rows.shape.size();
  if (rows.empty || rank < 2 || rows.shape[rank - 1] >= short_row) return false;
  const T* x = ptr<T>(in);
  T* y = ptr<T>(acc);
  if (rows.strides[1][rank - 1] != 0) {
    // The short axis is kept: the last reduced axis, if it is long, goes innermost, and each output adds its elements
    // along it one after the other, as the rows of the short axis did (an output's elements come in the order of the
    // reduced axes' indices, unchanged while the last reduced axis stays the last).
    std::size_t last = rank - 1;
    for (std::size_t d = 0; d + 1 < rank; ++d)
      if (rows.strides[1][d] == 0) last = d;
    if (last == rank - 1 || rows.shape[last] < short_row) return false;
    std::swap(rows.shape[last], rows.shape[rank - 1]);
    for (Shape& s : rows.strides) std::swap(s[last], s[rank - 1]);
    auto along = [&](auto off, std::int64_t count, auto inner) {
      T m = y[off[1]];
      for (std::int64_t i = 0; i < count; ++i) combine_in_order(kind, m, x[off[0] + i * inner[0]]);
      y[off[1]] = m;
    };
    for_each_merged_row<2>(rows, {}, along, false);
    return true;
  }
  // The short axis is reduced: every output's row in one loop, each by the row kernel.
  const std::int64_t len = rows.shape[rank - 1], step = rows.strides[0][rank - 1];
  rows.shape.pop_back();  // now one entry per row
  rows.strides[0].pop_back();
  rows.strides[1].pop_back();
  auto each = [&](auto off, std::int64_t count, auto inner) {
    for (std::int64_t i = 0; i < count; ++i)
      reduce_row(kind, x + off[0] + i * inner[0], len, step, y + off[1] + i * inner[1], std::int64_t{0});
  };
  for_each_merged_row<2>(rows, {}, each, false);
  return true;
}

}  // namespace

void CpuBackend::reduce(ReduceKind kind, const View& in, const View& out) {
  if (recording()) return keep([=, this] { reduce(kind, in, out); });
  check_same_rank(in, out, "cpu", "reduce");
  // Walk the input with the output broadcast over the reduced axes (stride 0) and accumulate.
  View acc = out;
  for (std::size_t d = 0; d < out.shape.size(); ++d)
    if (out.shape[d] != in.shape[d]) acc.strides[d] = 0;
  acc.shape = in.shape;
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    double lowest = -std::numeric_limits<double>::infinity();
    if constexpr (std::is_integral_v<T>) lowest = static_cast<double>(element::int_min<T>());  // exact
    fill(out, kind == ReduceKind::sum ? 0.0 : lowest);
    if (reduce_short_rows<T>(kind, in, acc)) return;
    const T* x = ptr<T>(in);
    T* y = ptr<T>(acc);
    // Serial: several rows may accumulate into the same output element.
    for_each_row<2>(
        in.shape, {&in.strides, &acc.strides},
        [&](auto off, std::int64_t len, auto inner) {
          reduce_row(kind, x + off[0], len, inner[0], y + off[1], inner[1]);
        },
        /*parallel=*/false);
  });
}

}  // namespace vt::cpu
