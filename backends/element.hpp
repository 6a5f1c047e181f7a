#pragma once
// Element arithmetic shared by the CPU and CUDA kernels, so that both give the same integer
// results (core/dtype.hpp): integer add, sub, mul, neg and abs wrap modulo 2^bits (computed in the
// unsigned type, never signed overflow); float to integer conversion truncates toward zero, gives
// 0 for NaN and saturates out of range (as XLA), never undefined behaviour; to bool is != 0.
#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define VT_ELEMENT_FN __host__ __device__ __forceinline__
#else
#define VT_ELEMENT_FN inline
#endif

namespace vt::element {

template <class T>
VT_ELEMENT_FN constexpr T int_max() {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>((U(1) << (sizeof(T) * 8 - 1)) - 1);
}
template <class T>
VT_ELEMENT_FN constexpr T int_min() {
  return static_cast<T>(-int_max<T>() - 1);
}

template <class Out, class In>
VT_ELEMENT_FN Out convert(In v) {
  if constexpr (std::is_same_v<Out, bool>) {
    return v != In(0);  // NaN is true, as numpy
  } else if constexpr (std::is_same_v<In, bool>) {
    return v ? Out(1) : Out(0);
  } else if constexpr (std::is_floating_point_v<In> && std::is_integral_v<Out>) {
    // 2^(bits-1) is exact in float and double; the integer's maximum itself may not be (float).
    constexpr In bound = static_cast<In>(Out(1) << (sizeof(Out) * 8 - 2)) * In(2);
    if (v != v) return Out(0);
    if (v >= bound) return int_max<Out>();
    if (v < -bound) return int_min<Out>();
    return static_cast<Out>(v);
  } else if constexpr (std::is_integral_v<In> && std::is_integral_v<Out> && sizeof(Out) < sizeof(In)) {
    return static_cast<Out>(static_cast<std::make_unsigned_t<Out>>(v));  // int64 to int32 wraps, as numpy
  } else {
    return static_cast<Out>(v);
  }
}

template <class T>
using Unsigned = std::make_unsigned_t<T>;

template <class T>
VT_ELEMENT_FN T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
  else return a + b;
}
template <class T>
VT_ELEMENT_FN T sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
  else return a - b;
}
template <class T>
VT_ELEMENT_FN T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
  else return a * b;
}
template <class T>
VT_ELEMENT_FN T neg(T a) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(a));
  else return -a;
}
// abs of the most negative integer wraps to itself, as in numpy.
template <class T>
VT_ELEMENT_FN T abs_int(T a) {
  return a < 0 ? neg(a) : a;
}

}  // namespace vt::element
