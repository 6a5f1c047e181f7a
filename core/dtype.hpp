#pragma once
#include <cstddef>
#include <string_view>

namespace vt {

// Floating-point types only: vtape is a differentiable engine, and masks (comparisons, `where`
// conditions) are 0/1 tensors of the operands' dtype rather than a separate bool type.
enum class DType { f32, f64 };

constexpr std::size_t size_of(DType d) { return d == DType::f32 ? 4 : 8; }
constexpr std::string_view name_of(DType d) { return d == DType::f32 ? "float32" : "float64"; }

// Promotion between tensors: the wider type wins (float32 with float64 gives float64).
// A C++ scalar never promotes: `x * 2.0` keeps x's dtype, as in JAX and numpy's weak scalars.
constexpr DType promote(DType a, DType b) { return (a == DType::f64 || b == DType::f64) ? DType::f64 : DType::f32; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }

// Calls fn with a value of the C++ type of d: visit_dtype(d, [](auto zero) { using T = decltype(zero); ... }).
template <class Fn>
decltype(auto) visit_dtype(DType d, Fn&& fn) {
  if (d == DType::f32) return fn(float{});
  return fn(double{});
}

}  // namespace vt
