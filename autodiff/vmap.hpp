#pragma once
/// @file
/// vmap: maps a function over a batch axis by making it the tensors' batch dimension.
///
/// vmap(f)(X) runs f once, on batched tensors whose shape() is the per-example shape; every op is
/// one kernel call over the whole batch, and unbatched tensors f captures are broadcast across the
/// batch without copies. Results are batched tensors (the batch first-class, [B, ...] in storage),
/// which reduce, differentiate and jit like any tensor; `out_axes` >= 0 returns plain tensors with
/// the batch at that axis instead.
///
/// Under jit, the JAX habit jit(vmap(f))(X) with a plain [B, ...] X works: X's leading axis is the
/// batch, and B, part of X's shape, is in jit's cache key, so each new B traces again (out_axes >= 0
/// works there too). jit(vmap(f))(as_batch(X)) never retraces for a new B: the batch size does not
/// enter the trace (but out_axes >= 0, whose result's shape holds B, is refused there).
///
/// in_axes: one entry per argument, the axis to map over, or vt::not_mapped; empty maps axis 0 of
/// every argument. An argument that is already batched is mapped over its batch (in_axes 0).
/// Nested vmap (vmap inside a vmap body, or mapping a batched tensor over another axis) is refused
/// with an error.
#include <optional>
#include <vector>

#include "../core/graph.hpp"
#include "../ops/batch.hpp"
#include "../ops/layout.hpp"
#include "structure.hpp"

namespace vt {

inline constexpr std::optional<std::int64_t> not_mapped = std::nullopt;
using InAxes = std::vector<std::optional<std::int64_t>>;
/// out_axes default: keep results batched.
inline constexpr std::int64_t batched_out = -1;

namespace detail {
// Marks a vmap body running on this thread; vmap refuses to start inside one (no nested vmap).
struct VmapBody {
  VmapBody();
  ~VmapBody();
  VmapBody(const VmapBody&) = delete;
  VmapBody& operator=(const VmapBody&) = delete;
  PerExampleScope per_example;
};
// x with `axis` made its batch (a no-op for axis 0 of a batched tensor).
Tensor map_axis(const Tensor& x, std::int64_t axis, std::size_t arg);
// A result of the mapped function, made batched (copies for results that ignore the batch) and
// placed at out_axis.
Tensor map_result(const Tensor& r, const Tensor& like, std::int64_t out_axis);
}  // namespace detail

template <class F>
auto vmap(F f, InAxes in_axes = {}, std::int64_t out_axes = batched_out) {
  return [f = std::move(f), in_axes = std::move(in_axes), out_axes](const auto&... args) {
    std::array<Tensor, sizeof...(args)> in{Tensor(args)...};
    if (!in_axes.empty() && in_axes.size() != in.size())
      fail("vmap: {} in_axes for a function of {} arguments", in_axes.size(), in.size());
    Tensor like;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto axis = in_axes.empty() ? std::optional<std::int64_t>(0) : in_axes[i];
      if (!axis) continue;
      in[i] = detail::map_axis(in[i], *axis, i);
      const auto size = detail::known_batch_size(in[i]),
                 earlier = like.defined() ? detail::known_batch_size(like) : size;
      if (size && earlier && *size != *earlier)
        fail("vmap: mapped axes have different sizes ({} for an earlier argument, {} for argument {})", *earlier, *size,
             i);
      if (!like.defined()) like = in[i];
    }
    if (!like.defined()) fail("vmap: no argument is mapped");
    auto result = [&] {
      detail::VmapBody body;
      return std::apply(f, in);
    }();
    std::vector<Tensor> flat = detail::flatten(result);
    for (Tensor& r : flat) r = detail::map_result(r, like, out_axes);
    return detail::rebuild(flat, result);
  };
}

}  // namespace vt
