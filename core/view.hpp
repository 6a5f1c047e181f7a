#pragma once
// View: what a backend kernel sees of an operand -- a strided window over device memory, in
// elements, with the batch axis (when there is one) as an ordinary leading axis. A stride of 0
// broadcasts. The helpers below only compute strides; none touches the data.
#include "dtype.hpp"
#include "shape.hpp"

namespace vt {

struct View {
  DType dtype = DType::f64;
  void* data = nullptr;
  Shape shape;
  Shape strides;
};

// The view of contiguous data of per-example shape `shape`. With `lead`, it has a leading batch
// axis of size `batch` whose stride is one example when `batched`, else 0 (one example broadcast
// across the batch, never copied).
View batched_view(DType dtype, void* data, const Shape& shape, bool batched, std::int64_t batch, bool lead);

// `in` broadcast (stride 0) to the physical shape of `out`, numpy-style on the per-example axes;
// the leading batch axis, present in both when `batched`, is matched as it is.
View expand_view(const View& in, const View& out, bool batched);

// `v` with its shape replaced by `shape` (same element count, contiguous).
View reshaped_view(const View& v, const Shape& shape);

// The main diagonal of every trailing [rows, cols] matrix of `v`: one axis of min(rows, cols)
// elements instead of the two matrix axes.
View diagonal_view(View v);

}  // namespace vt
