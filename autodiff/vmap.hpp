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
/// every argument. An argument that is already batched is mapped over its batch (in_axes 0);
/// mapping it over another axis raises.
///
/// Nested vmap: a vmap called inside a vmap body (vmap(vmap(f)), or vmap(g) where g maps)
/// maps over per-example axes, whose sizes are static, by a loop: f runs once per index of the
/// mapped axis, each call batched over the outer vmap's whole batch, and the results are stacked
/// at out_axes (0 by default) of the per-example result. So vmap(vmap(f))(X) with X [B1, B2, ...]
/// equals loops of f over both axes, its batch B1 one kernel call per op, its B2 a loop (traced B2
/// times under jit): put the larger batch outside.
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
// Marks a vmap body running on this thread: a vmap called inside one maps by a loop.
bool in_vmap_body();
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
// Nested vmap's pieces: the size of argument `arg`'s mapped per-example axis (checked against
// `size`, -1 before the first), index i of that axis, and the results of each index stacked at
// out_axis.
std::int64_t nested_axis_size(const Tensor& x, std::int64_t axis, std::size_t arg, std::int64_t size);
Tensor nested_index(const Tensor& x, std::int64_t axis, std::int64_t i);
Tensor nested_stack(const std::vector<Tensor>& results, std::int64_t out_axis);

// vmap inside a vmap body: a loop over the mapped per-example axis (see vmap).
template <class F, std::size_t N>
auto vmap_by_loop(const F& f, const std::array<Tensor, N>& in, const InAxes& in_axes, std::int64_t out_axes) {
  std::int64_t size = -1;
  for (std::size_t i = 0; i < N; ++i) {
    const auto axis = in_axes.empty() ? std::optional<std::int64_t>(0) : in_axes[i];
    if (axis) size = nested_axis_size(in[i], *axis, i, size);
  }
  if (size < 0) fail("vmap: no argument is mapped");
  if (size == 0) fail("vmap: a vmap inside a vmap body maps an axis of size 0, which gives no result to stack");
  using R = decltype(std::apply(f, in));
  std::vector<std::vector<Tensor>> results;
  std::optional<R> first;
  for (std::int64_t k = 0; k < size; ++k) {
    std::array<Tensor, N> args = in;
    for (std::size_t i = 0; i < N; ++i) {
      const auto axis = in_axes.empty() ? std::optional<std::int64_t>(0) : in_axes[i];
      if (axis) args[i] = nested_index(in[i], *axis, k);
    }
    R r = std::apply(f, args);
    results.push_back(flatten(r));
    if (!first) first.emplace(std::move(r));
  }
  std::vector<Tensor> stacked;
  for (std::size_t j = 0; j < results[0].size(); ++j) {
    std::vector<Tensor> column;
    for (const auto& r : results) column.push_back(r.at(j));
    stacked.push_back(nested_stack(column, out_axes == batched_out ? 0 : out_axes));
  }
  return rebuild(stacked, *first);
}
}  // namespace detail

template <class F>
auto vmap(F f, InAxes in_axes = {}, std::int64_t out_axes = batched_out) {
  return [f = std::move(f), in_axes = std::move(in_axes), out_axes](const auto&... args) {
    std::array<Tensor, sizeof...(args)> in{Tensor(args)...};
    if (!in_axes.empty() && in_axes.size() != in.size())
      fail("vmap: {} in_axes for a function of {} arguments", in_axes.size(), in.size());
    if (detail::in_vmap_body()) return detail::vmap_by_loop(f, in, in_axes, out_axes);
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
