#pragma once
/// @file
/// Creation ops: new constant tensors, made on the host or filled by the device's backend. Nothing
/// is recorded: a created tensor is a constant for every transform (and, under jit, of the plan).
#include "../core/tensor.hpp"

namespace vt {

/// Creation ops; every one takes an optional dtype (float64 by default) and device (the CPU). For
/// integer dtypes the (double) values convert as astype does (truncation toward zero); exact int64
/// values beyond 2^53 come from Tensor::from_ints. randn and rand take floating dtypes only.
Tensor zeros(const Shape& shape, DType dtype = DType::f64, Device device = {});
Tensor ones(const Shape& shape, DType dtype = DType::f64, Device device = {});
Tensor full(const Shape& shape, double value, DType dtype = DType::f64, Device device = {});
Tensor eye(std::int64_t n, DType dtype = DType::f64, Device device = {});
Tensor arange(double start, double stop, double step = 1.0, DType dtype = DType::f64, Device device = {});
Tensor linspace(double start, double stop, std::int64_t num, DType dtype = DType::f64, Device device = {});
/// Standard normal / uniform [0, 1) samples from a seeded generator (reproducible across runs and
/// devices: they are drawn on the host).
Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype = DType::f64, Device device = {});
Tensor rand(const Shape& shape, std::uint64_t seed, DType dtype = DType::f64, Device device = {});

}  // namespace vt
