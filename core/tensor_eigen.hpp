#pragma once
/// @file
/// Tensors to and from Eigen: Tensor::from_eigen (a copy) and Tensor::as_eigen (a view). Apart from
/// core/tensor.hpp so that only code using Eigen pays for parsing it; vtape.hpp includes it.
#include "eigen.hpp"
#include "tensor.hpp"

namespace vt {

template <class Derived>
Tensor Tensor::from_eigen(const Eigen::MatrixBase<Derived>& m) {
  using T = typename Derived::Scalar;
  static_assert(is_element_type<T>, "vtape tensors hold float, double, std::int32_t, std::int64_t or bool");
  const bool vector = Derived::ColsAtCompileTime == 1;
  Shape shape = vector ? Shape{m.rows()} : Shape{m.rows(), m.cols()};
  Tensor out = empty(shape, dtype_of<T>());
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      static_cast<T*>(const_cast<void*>(out.raw_data())), m.rows(), m.cols()) = m;
  return out;
}

template <class T>
auto Tensor::as_eigen() const {
  using Map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  if (device().kind != DeviceKind::cpu) fail("as_eigen: tensor is on {}, not the CPU", to_string(device()));
  if (is_batched())
    fail(
        "as_eigen: needs an unbatched tensor, but the tensor is {}; view the plain [B, ...] tensor, unbatch(x), "
        "or one example of it",
        detail::batch_description(*this));
  if (ndim() > 2) fail("as_eigen: needs a tensor of rank <= 2, got shape {}", to_string(shape()));
  const std::int64_t rows = ndim() == 0 ? 1 : shape()[0];
  const std::int64_t cols = ndim() == 2 ? shape()[1] : 1;
  return Map(data<T>(), rows, cols);
}

}  // namespace vt
