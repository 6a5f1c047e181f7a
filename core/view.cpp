#include "view.hpp"

#include <algorithm>

namespace vt {

View batched_view(DType dtype, void* data, const Shape& shape, bool batched, std::int64_t batch, bool lead) {
  View view{dtype, data, shape, contiguous_strides(shape)};
  if (lead) {
    view.shape.insert(view.shape.begin(), batch);
    view.strides.insert(view.strides.begin(), batched ? numel(shape) : 0);
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
