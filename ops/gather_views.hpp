#pragma once
// Internal to the gather family (ops/gather.cpp, ops/segment.cpp): the kernel views of a gather or
// scatter along one axis, and the error an out-of-range index raises.
#include <string>

#include "../core/graph.hpp"

namespace vt::detail {

// A gather or scatter walks its iteration space [lead, P..., J..., Q...]: the batch axis (when
// there is one), the axes of x before the indexed one (P), the index tensor's axes (J) and x's
// axes after it (Q). `x` is the view of the indexed tensor, [lead, P..., L, Q...] (the source of a
// gather, the destination of a scatter), `indices` that of the indices, [lead, J...].
struct IndexedViews {
  View x;        // over the iteration space, stride 0 along J (the indexed axis is `axis`)
  View indices;  // over the iteration space, stride 0 along P and Q
  IndexedAxis axis;
};

inline IndexedViews indexed_views(const View& x, const View& indices, std::size_t lead, std::size_t axis,
                                  bool negative_from_end) {
  const std::size_t p = lead + axis, j = indices.shape.size() - lead;  // x's indexed axis, |J|
  IndexedViews v{
      {x.dtype, x.data, {}, {}}, {indices.dtype, indices.data, {}, {}}, {x.shape[p], x.strides[p], negative_from_end}};
  auto push = [](View& view, std::int64_t size, std::int64_t stride) {
    view.shape.push_back(size);
    view.strides.push_back(stride);
  };
  for (std::size_t d = 0; d < lead; ++d) {  // the batch
    push(v.x, x.shape[d], x.strides[d]);
    push(v.indices, x.shape[d], indices.strides[d]);
  }
  for (std::size_t d = lead; d < p; ++d) {
    push(v.x, x.shape[d], x.strides[d]);
    push(v.indices, x.shape[d], 0);
  }
  for (std::size_t d = lead; d < lead + j; ++d) {
    push(v.x, indices.shape[d], 0);
    push(v.indices, indices.shape[d], indices.strides[d]);
  }
  for (std::size_t d = p + 1; d < x.shape.size(); ++d) {
    push(v.x, x.shape[d], x.strides[d]);
    push(v.indices, x.shape[d], 0);
  }
  return v;
}

// The IndexFailure of an op whose index operand, called `operand`, is `k.in[input]`: its report
// raises vt::Error naming the op, the index value, its position in the index tensor (and its
// example when the indices are batched) and `range` ("for axis 0 of length 5").
inline IndexFailure index_failure(const KernelArgs& k, std::size_t input, std::string what, std::string operand,
                                  std::string range) {
  const View& v = k.in[input];
  const Shape shape(v.shape.begin() + static_cast<std::ptrdiff_t>(k.lead()), v.shape.end());
  const bool batched = k.batched && v.strides[0] != 0;
  return {[op = std::string(k.op), what = std::move(what), operand = std::move(operand), range = std::move(range),
           shape, batched, batch = k.whole_batch, first = k.first_example](std::int64_t offset, std::int64_t value) {
    const std::int64_t per_example = numel(shape);
    std::int64_t rest = offset % per_example;
    Shape position(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
      position[d] = rest % shape[d];
      rest /= shape[d];
    }
    const std::string example =
        batched ? fmt::format(" (example {} of the batch of {})", first + offset / per_example, batch) : std::string();
    fail("{}: {} {} at position {} of {}{} is out of range {}", op, what, value, to_string(position), operand, example,
         range);
  }};
}

}  // namespace vt::detail
