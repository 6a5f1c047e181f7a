#pragma once
/// @file
/// vmap: maps a function over a batch axis by making it the tensors' batch dimension.
///
/// vmap(f)(X) runs f once, on batched tensors whose shape() is the per-example shape; every op is
/// one kernel call over the whole batch, and unbatched tensors f captures are broadcast across the
/// batch without copies. Results are batched tensors (the batch first-class, [B, ...] in storage),
/// which reduce, differentiate and jit like any tensor; an `out_axes` axis returns plain tensors with
/// the batch at that axis instead (negative axes count from the end of the plain result).
///
/// Under jit, the JAX habit jit(vmap(f))(X) with a plain [B, ...] X works: X's leading axis is the
/// batch, and B, part of X's shape, is in jit's cache key, so each new B traces again (an out_axes
/// axis works there too). jit(vmap(f))(as_batch(X)) never retraces for a new B: the batch size does not
/// enter the trace (but an out_axes axis, whose result's shape holds B, is refused there).
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
/// times under jit): put the larger batch outside. An axis of size 0 gives results of size 0 along
/// out_axes (f traced once on symbolic arguments for their shapes; nothing computed).
#include <limits>
#include <optional>
#include <vector>

#include "../core/graph.hpp"
#include "../ops/batch.hpp"
#include "../ops/layout.hpp"
#include "grad.hpp"
#include "structure.hpp"

namespace vt {

inline constexpr std::optional<std::int64_t> not_mapped = std::nullopt;
using InAxes = std::vector<std::optional<std::int64_t>>;
/// out_axes default: keep results batched. (Any other value is an axis of the plain result, a
/// negative one counting from the end, as in JAX: -1 puts the batch last.)
inline constexpr std::int64_t batched_out = std::numeric_limits<std::int64_t>::min();

namespace detail {
// Marks a vmap body running on this thread: a vmap called inside one maps by a loop.
bool in_vmap_body();
// Sets whether a vmap body runs on this thread while it lives: a function run again as it ran where it was called
// (a jitted function's derivatives, autodiff/jit/call.cpp).
class InVmapBody {
 public:
  explicit InVmapBody(bool on);
  ~InVmapBody();
  InVmapBody(const InVmapBody&) = delete;
  InVmapBody& operator=(const InVmapBody&) = delete;

 private:
  int previous_;
};
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
// vmap over a flat list of arguments (grad.hpp's FlatFunction): f's results, batched or placed at out_axes.
std::vector<Tensor> vmap_flat(const FlatFunction& f, std::vector<Tensor> in, const InAxes& in_axes,
                              std::int64_t out_axes);
}  // namespace detail

template <class F>
auto vmap(F f, InAxes in_axes = {}, std::int64_t out_axes = batched_out) {
  return [f = std::move(f), in_axes = std::move(in_axes), out_axes](const auto&... args) {
    using R = decltype(f(Tensor(args)...));
    std::optional<R> first;  // the structure of the results (a nested vmap calls f once per index)
    const detail::FlatFunction flat = [&](const std::vector<Tensor>& v) {
      std::array<Tensor, sizeof...(args)> a;
      std::copy(v.begin(), v.end(), a.begin());
      R r = std::apply(f, a);
      std::vector<Tensor> results = detail::flatten(r);
      if (!first) first.emplace(std::move(r));
      return results;
    };
    return detail::rebuild(detail::vmap_flat(flat, {Tensor(args)...}, in_axes, out_axes), *first);
  };
}

}  // namespace vt
