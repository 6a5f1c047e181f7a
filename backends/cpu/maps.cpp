// Elementwise maps, copies and reductions over strided views.
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "../../core/error.hpp"
#include "../element.hpp"
#include "../special_math.hpp"
#include "../view_checks.hpp"
#include "cpu_backend.hpp"
#include "strided.hpp"

namespace vt::cpu {

namespace {

template <class T>
T* ptr(const View& v) { return static_cast<T*>(v.data); }

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
// square and, with -fno-math-errno, sqrt).
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
      Row<T>(y + off[2], len) = fn(ConstRow<T>(x + off[0], len), Eigen::Array<T, Eigen::Dynamic, 1>::Constant(len, z[off[1]]));
    } else if (inner[2] == 1 && inner[0] == 0 && inner[1] == 1) {
      Row<T>(y + off[2], len) = fn(Eigen::Array<T, Eigen::Dynamic, 1>::Constant(len, x[off[0]]), ConstRow<T>(z + off[1], len));
    } else {
      auto stride = [](std::int64_t s) { return Eigen::InnerStride<>(s); };
      StridedRow<T>(y + off[2], len, stride(inner[2])) =
          fn(ConstStridedRow<T>(x + off[0], len, stride(inner[0])), ConstStridedRow<T>(z + off[1], len, stride(inner[1])));
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

}  // namespace

void CpuBackend::fill(const View& out, double value) {
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* y = ptr<T>(out);
    const T v = element::convert<T>(value);
    for_each_row<1>(out.shape, {&out.strides}, [&](auto off, std::int64_t len, auto inner) {
      for (std::int64_t i = 0; i < len; ++i) y[off[0] + i * inner[0]] = v;
    });
  });
}

void CpuBackend::copy(const View& in, const View& out) {
  check_same_rank(in, out, "cpu", "copy");
  visit_dtype(in.dtype, [&](auto zin) {
    using In = decltype(zin);
    visit_dtype(out.dtype, [&](auto zout) {
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
  check_same_rank(in, out, "cpu", "unary");
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      switch (kind) {
        case UnaryKind::neg: return map1<T>(in, out, [](T v) { return element::neg(v); });
        case UnaryKind::abs: return map1<T>(in, out, [](T v) { return element::abs_int(v); });
        case UnaryKind::sign: return map1<T>(in, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
        default: fail("cpu unary: map {} on {} (internal error: apply admits only neg, abs and sign)",
                      static_cast<int>(kind), name_of(out.dtype));
      }
    } else {
      switch (kind) {
        case UnaryKind::neg: return map1<T>(in, out, [](T v) { return -v; });
        case UnaryKind::exp: return map1<T>(in, out, [](T v) { return std::exp(v); });
        case UnaryKind::log: return map1<T>(in, out, [](T v) { return std::log(v); });
        case UnaryKind::log1p: return map1<T>(in, out, [](T v) { return std::log1p(v); });
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
        case UnaryKind::sigmoid: return map1<T>(in, out, [](T v) { return special::sigmoid(v); });
        case UnaryKind::softplus: return map1<T>(in, out, [](T v) { return special::softplus(v); });
        default: fail("cpu unary: map {} on {} (internal error)", static_cast<int>(kind), name_of(out.dtype));
      }
    }
  });
}

void CpuBackend::binary(BinaryKind kind, const View& a, const View& b, const View& out) {
  check_same_rank(a, out, "cpu", "binary");
  check_same_rank(b, out, "cpu", "binary");
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    // Comparisons are the same for every type.
    switch (kind) {
      case BinaryKind::less:
        return map2<T>(a, b, out, [](const auto& x, const auto& y) { return (x < y).template cast<T>(); });
      case BinaryKind::greater:
        return map2<T>(a, b, out, [](const auto& x, const auto& y) { return (x > y).template cast<T>(); });
      case BinaryKind::equal:
        return map2<T>(a, b, out, [](const auto& x, const auto& y) { return (x == y).template cast<T>(); });
      default: break;
    }
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
        default: fail("cpu binary: map {} on {} (internal error: apply refuses it)", static_cast<int>(kind),
                      name_of(out.dtype));
      }
    } else {
      switch (kind) {
        case BinaryKind::add: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x + y; });
        case BinaryKind::sub: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x - y; });
        case BinaryKind::mul: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x * y; });
        case BinaryKind::div: return map2<T>(a, b, out, [](const auto& x, const auto& y) { return x / y; });
        // The C library's pow, element by element: within an ulp and the same at every length, and
        // faster than Eigen's vectorised pow (8 ns against 15 per element on a Xeon).
        case BinaryKind::pow:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return std::pow(u, v); });
          });
        case BinaryKind::maximum:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return u > v || std::isnan(u) ? u : v; });
          });
        case BinaryKind::minimum:
          return map2<T>(a, b, out, [](const auto& x, const auto& y) {
            return x.binaryExpr(y, [](T u, T v) { return u < v || std::isnan(u) ? u : v; });
          });

        default: return;  // comparisons, above
      }
    }
  });
}

void CpuBackend::select(const View& cond, const View& a, const View& b, const View& out) {
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* c = ptr<T>(cond);
    const T* x = ptr<T>(a);
    const T* z = ptr<T>(b);
    T* y = ptr<T>(out);
    for_each_row<4>(out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides},
                    [&](auto off, std::int64_t len, auto inner) {
                      for (std::int64_t i = 0; i < len; ++i)
                        y[off[3] + i * inner[3]] =
                            c[off[0] + i * inner[0]] != T(0) ? x[off[1] + i * inner[1]] : z[off[2] + i * inner[2]];
                    });
  });
}

void CpuBackend::cumsum(const View& in, const View& out, int axis, bool reverse) {
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
      // same additions in the same order), so that memory is read along rows (3x faster for a
      // 2048 x 2048 cumsum over axis 0).
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

void CpuBackend::reduce(ReduceKind kind, const View& in, const View& out) {
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
    const T* x = ptr<T>(in);
    T* y = ptr<T>(acc);
    // Serial: several rows may accumulate into the same output element.
    for_each_row<2>(in.shape, {&in.strides, &acc.strides}, [&](auto off, std::int64_t len, auto inner) {
      const T* xr = x + off[0];
      T* yr = y + off[1];
      if (kind == ReduceKind::sum) {
        if (inner[1] == 0) {
          T s = 0;
          for (std::int64_t i = 0; i < len; ++i) s = element::add(s, xr[i * inner[0]]);
          *yr = element::add(*yr, s);
        } else {
          for (std::int64_t i = 0; i < len; ++i) yr[i * inner[1]] = element::add(yr[i * inner[1]], xr[i * inner[0]]);
        }
      } else {
        for (std::int64_t i = 0; i < len; ++i) {
          T& m = yr[i * inner[1]];
          const T v = xr[i * inner[0]];
          if (v > m || v != v) m = v;
        }
      }
    }, /*parallel=*/false);
  });
}

}  // namespace vt::cpu
