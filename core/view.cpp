#include "view.hpp"

#include <algorithm>

namespace vt {

// contiguous_strides, with the batch axis written in the same pass (jit computes every step's views at each compile).
View batched_view(DType dtype, void* data, const Shape& shape, bool batched, std::int64_t batch, bool lead) {
  const std::size_t first = lead ? 1 : 0;
  View view{dtype, data, Shape(first + shape.size()), Shape(first + shape.size())};
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    view.shape[first + i] = shape[i];
    view.strides[first + i] = s;
    if (__builtin_mul_overflow(s, shape[i], &s)) s = 0;  // as contiguous_strides: only an empty shape's overflow
  }
  if (lead) {
    view.shape[0] = batch;
    view.strides[0] = batched ? s : 0;  // s is numel(shape): 0 for an empty one
  }
  return view;
}

View expand_view(const View& in, const View& out, bool batched) {
  const std::size_t lead = batched ? 1 : 0;
  const std::size_t rank = out.shape.size(), in_rank = in.shape.size();
  View v{in.dtype, in.data, out.shape, Shape(rank, 0)};
  if (batched) v.strides[0] = in.strides[0];
  for (std::size_t i = lead; i < in_rank; ++i) {
    const std::size_t d = rank - (in_rank - i);  // right-aligned
    v.strides[d] = in.shape[i] == out.shape[d] ? in.strides[i] : 0;
  }
  return v;
}

View reshaped_view(const View& v, const Shape& shape) {
  return View{v.dtype, v.data, shape, contiguous_strides(shape)};
}

View diagonal_view(View v) {
  const std::size_t r = v.shape.size();
  const std::int64_t len = std::min(v.shape[r - 2], v.shape[r - 1]);
  v.strides[r - 2] += v.strides[r - 1];
  v.strides.pop_back();
  v.shape.pop_back();
  v.shape.back() = len;
  return v;
}

}  // namespace vt
