#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace vt {

/// Element types. Floating tensors are what vtape differentiates; integer tensors hold indices,
/// group labels and counts; boolean tensors hold masks (comparisons return them, `where` reads them).
///
/// Integers:
/// - Only some ops accept them (creation, astype, layout and indexing ops, to_device, where, add,
///   sub, mul, neg, abs, sign, maximum, minimum, comparisons, sum, max and the batch ops that move
///   data); every other op raises a vt::Error naming the op and the dtype (OpDef::integers, checked
///   once by apply).
/// - div on two integer tensors is true division in float64, as in JAX and numpy (`/`).
/// - Integer arithmetic wraps modulo 2^bits (two's complement), on every backend: no undefined
///   behaviour on overflow. Sums accumulate in the tensor's own width, so they are exact whenever the
///   result fits.
/// - No gradient flows through integer tensors: they are never tracked, and asking for the gradient
///   with respect to one raises.
/// - Float to integer conversion (astype, `to_vector<int>`, item, at) truncates toward zero as in C++
///   and numpy; NaN gives 0 and values out of range saturate to the integer type's limits (as XLA),
///   so no conversion is undefined behaviour.
///
/// Booleans (`DType::boolean`, numpy's and JAX's `bool`, one byte per element):
/// - Comparisons (less, less_equal, greater, greater_equal, equal, not_equal) and the logical ops
///   return them; where's condition is read as one (any other dtype converts: nonzero is true).
/// - Only the ops that move data (creation, astype, layout and indexing ops, take, to_device, the
///   batch ops that move data), where, comparisons and the logical ops take them; arithmetic takes
///   them only through promotion (a boolean with any other dtype gives the other: `mask * x`). Two
///   booleans: `a + b` is logical or and `a * b` logical and, as numpy; sum counts the trues in
///   int64, mean gives float64, max and min are any and all. Every other op raises a vt::Error
///   naming the op (OpDef::booleans, checked once by apply).
/// - Conversion to a boolean is `!= 0` (NaN is true, as numpy); from a boolean gives 1 or 0.
/// - No gradient flows through them, as through integers.
enum class DType { f32, f64, i32, i64, boolean };

constexpr std::size_t size_of(DType d) { return d == DType::boolean ? 1 : d == DType::f32 || d == DType::i32 ? 4 : 8; }
constexpr std::string_view name_of(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "unknown";
}
constexpr bool is_integer(DType d) { return d == DType::i32 || d == DType::i64; }
constexpr bool is_floating(DType d) { return d == DType::f32 || d == DType::f64; }
constexpr bool is_boolean(DType d) { return d == DType::boolean; }

/// Promotion between tensors: a boolean with any other dtype gives the other; a float with an
/// integer gives the float; otherwise the wider type wins (float32 with float64 gives float64,
/// int32 with int64 gives int64).
/// C++ scalars are weak, as in JAX: `x * 2.0` and `x + 1` keep a floating x's dtype, and an integer
/// C++ scalar keeps an integer tensor's dtype (`i + 1`); a floating C++ scalar with an integer or
/// boolean tensor gives float64 (`i * 0.5`), vtape's default float, and an integer one with a
/// boolean tensor gives int64 (`1 - mask`), as numpy.
constexpr DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_boolean(a) || is_boolean(b)) return is_boolean(a) ? b : a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  return size_of(a) >= size_of(b) ? a : b;
}

/// The C++ types of tensor elements: float, double, std::int32_t, std::int64_t, bool.
template <class T>
inline constexpr bool is_element_type =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;

template <class T>
constexpr DType dtype_of() {
  static_assert(is_element_type<T>,
                "vtape: tensor elements are float, double, std::int32_t, std::int64_t or bool; read other types by "
                "converting one of those");
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else return DType::i64;
}

/// Calls fn with a value of the C++ type of d, a number type: `visit_dtype(d, [](auto zero) { using T =
/// decltype(zero); ... })`. For the kernels of arithmetic: apply refuses booleans to those ops first, so
/// a boolean here is an internal error.
template <class Fn>
decltype(auto) visit_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::f32: return fn(float{});
    case DType::i32: return fn(std::int32_t{});
    case DType::i64: return fn(std::int64_t{});
    case DType::f64: break;
    case DType::boolean: throw std::logic_error("vtape: an arithmetic kernel reached with bool (internal error)");
  }
  return fn(double{});
}

/// Calls fn with an unsigned integer as wide as d's elements (std::uint8_t, std::uint32_t or std::uint64_t), for
/// code that moves or compares elements as bits, whatever their type.
template <class Fn>
decltype(auto) visit_element_word(DType d, Fn&& fn) {
  if (size_of(d) == 1) return fn(std::uint8_t{});
  if (size_of(d) == 4) return fn(std::uint32_t{});
  return fn(std::uint64_t{});
}

/// visit_dtype for the kernels that move or compare elements, which every dtype has (fill, copy,
/// select, gather, comparisons): booleans too, as bool.
template <class Fn>
decltype(auto) visit_any_dtype(DType d, Fn&& fn) {
  if (d == DType::boolean) return fn(bool{});
  return visit_dtype(d, std::forward<Fn>(fn));
}

/// visit_dtype for kernels that exist only for floats (exp, solves, factorizations). apply refuses
/// integer inputs to those ops first, so an integer dtype here is an internal error.
template <class Fn>
decltype(auto) visit_float_dtype(DType d, Fn&& fn) {
  if (d == DType::f32) return fn(float{});
  // A logic error, not vt::Error: no input can cause it, and this header compiles under nvcc.
  if (d != DType::f64)
    throw std::logic_error("vtape: a floating-point kernel reached with " + std::string(name_of(d)) +
                           " (internal error)");
  return fn(double{});
}

}  // namespace vt
