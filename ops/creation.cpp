// Creation family: zeros, ones, full, eye, arange, linspace, randn, rand.
#include "creation.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "../backends/element.hpp"

namespace vt {

namespace {

// A new tensor whose element i (row-major) is value(i), computed on the host in double and rounded
// once to dtype, then uploaded to `device`. The tensor is allocated (and its size checked) first.
template <class ValueAt>
Tensor from_host_values(const Shape& shape, DType dtype, Device device, std::string_view op, ValueAt value) {
  Tensor host = detail::allocate(shape, dtype, Device{}, op);
  visit_any_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(const_cast<void*>(host.raw_data()));
    for (std::int64_t i = 0, n = host.numel(); i < n; ++i) p[i] = element::convert<T>(value(i));
  });
  return detail::uploaded(host, device);
}

}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return detail::filled(shape, value, dtype, device, "full");
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return detail::filled(shape, 0.0, dtype, device, "zeros");
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return detail::filled(shape, 1.0, dtype, device, "ones");
}

Tensor eye(std::int64_t n, DType dtype, Device device) {
  if (n < 0) fail("eye: negative size {}", n);
  Tensor out = detail::filled({n, n}, 0.0, dtype, device, "eye");
  backend_for(device).fill(diagonal_view(view_of(out)), 1.0);
  return out;
}

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail("arange: start, stop and step must be finite, got {}, {}, {}", start, stop, step);
  if (step == 0) fail("arange: step must be nonzero");
  const double count = std::max(0.0, std::ceil((stop - start) / step));  // inf when the quotient overflows
  if (!(count <= static_cast<double>(max_size / 16)))
    fail("arange: {} to {} in steps of {} gives {:g} elements, too many to hold", start, stop, step, count);
  const auto n = static_cast<std::int64_t>(count);
  return from_host_values({n}, dtype, device, "arange",
                          [&](std::int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor linspace(double start, double stop, std::int64_t num, DType dtype, Device device) {
  if (num < 0) fail("linspace: negative number of samples {}", num);
  return from_host_values({num}, dtype, device, "linspace", [&](std::int64_t i) {
    return num == 1 ? start : start + (stop - start) * static_cast<double>(i) / static_cast<double>(num - 1);
  });
}

Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype, Device device) {
  if (!is_floating(dtype)) fail("randn: draws floating-point samples, not {}", name_of(dtype));
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  return from_host_values(shape, dtype, device, "randn", [&](std::int64_t) { return dist(gen); });
}

Tensor rand(const Shape& shape, std::uint64_t seed, DType dtype, Device device) {
  if (!is_floating(dtype)) fail("rand: draws floating-point samples, not {}", name_of(dtype));
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist;
  return from_host_values(shape, dtype, device, "rand", [&](std::int64_t) { return dist(gen); });
}

}  // namespace vt
