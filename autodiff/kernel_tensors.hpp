#pragma once
// Tensors <-> a kernel's views, for ops whose forward runs other ops or plans on the host (the loops, a jitted
// function as an op): the inputs copied out as tensors of their own, the results written back into the output view.
#include <cstdint>

#include "../core/backend.hpp"
#include "../core/graph.hpp"
#include "../ops/batch.hpp"

namespace vt::detail {

// A batched input's view has a batch axis of one example's stride; an unbatched one's, stride 0.
inline bool batched_input(const KernelArgs& k, const View& v) { return k.batched && v.strides[0] != 0; }

// The input view as a tensor of its own (a copy), batched when the view is.
inline Tensor tensor_of(const KernelArgs& k, View v) {
  const bool batched = batched_input(k, v);
  if (k.batched && !batched) {
    v.shape.erase(v.shape.begin());
    v.strides.erase(v.strides.begin());
  }
  Tensor t = allocate(v.shape, v.dtype, k.backend.device(), k.op);
  k.backend.copy(v, View{v.dtype, const_cast<void*>(t.raw_data()), v.shape, contiguous_strides(v.shape)});
  return batched ? as_batch(t) : t;
}

// Index `i` of per-example axis `axis` of a kernel's view: that axis dropped.
inline View at(const KernelArgs& k, View v, std::size_t axis, std::int64_t i) {
  axis += k.lead();
  v.data = static_cast<char*>(v.data) + i * v.strides[axis] * static_cast<std::int64_t>(size_of(v.dtype));
  v.shape.erase(v.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  v.strides.erase(v.strides.begin() + static_cast<std::ptrdiff_t>(axis));
  return v;
}

// Elements [from, from + count) of a view's last axis.
inline View columns(View v, std::int64_t from, std::int64_t count) {
  v.data = static_cast<char*>(v.data) + from * v.strides.back() * static_cast<std::int64_t>(size_of(v.dtype));
  v.shape.back() = count;
  return v;
}

// Writes t's elements (batched or not; an unbatched t goes to every example) into `out`, a per-example vector view.
inline void write(const KernelArgs& k, const Tensor& t, const View& out) {
  if (out.shape.back() == 0) return;
  const View from =
      batched_view(t.dtype(), const_cast<void*>(t.raw_data()), {t.numel()}, t.is_batched(), k.batch, k.batched);
  k.backend.copy(from, out);
}

}  // namespace vt::detail
