#pragma once
/// @file
/// Reading and writing numpy .npy files (format 1.0-3.0; float32, float64, int32 and int64, that is
/// '<f4', '<f8', '<i4', '<i8': little-endian, C order): how parameters, indices and reference values
/// travel between vtape and Python.
#include <string>

#include "tensor.hpp"

namespace vt {

Tensor load_npy(const std::string& path);
/// A batched tensor is written with its batch as the leading axis.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace vt
