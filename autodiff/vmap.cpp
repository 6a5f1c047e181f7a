#include "vmap.hpp"

#include <algorithm>
#include <numeric>

#include "../ops/creation.hpp"
#include "../ops/indexing.hpp"
#include "jit.hpp"

namespace vt::detail {

namespace {
thread_local int vmap_body_depth = 0;
}

bool in_vmap_body() { return vmap_body_depth > 0; }
VmapBody::VmapBody() { ++vmap_body_depth; }
VmapBody::~VmapBody() { --vmap_body_depth; }
InVmapBody::InVmapBody(bool on) : previous_(vmap_body_depth) { vmap_body_depth = on ? std::max(previous_, 1) : 0; }
InVmapBody::~InVmapBody() { vmap_body_depth = previous_; }

Tensor map_axis(const Tensor& x, std::int64_t axis, std::size_t arg) {
  if (x.is_batched()) {
    if (axis != 0)
      fail(
          "vmap: argument {} is already batched and can only be mapped over its batch (in_axes 0); to map one of "
          "its per-example axes too, nest the vmaps: vmap(vmap(f, inner_axes))",
          arg);
    return x;
  }
  if (x.ndim() == 0) fail("vmap: argument {} is a scalar and has no axis {} to map over", arg, axis);
  const int a = normalize_axis(axis, x.ndim(), "vmap");
  if (a == 0) return as_batch(x);
  std::vector<std::int64_t> perm(x.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + a);
  perm.insert(perm.begin(), a);
  return as_batch(transpose(x, perm));
}

Tensor map_result(const Tensor& r, const Tensor& like, std::int64_t out_axis) {
  const Tensor b = broadcast_to_batch(r, like);
  if (out_axis == batched_out) return b;
  if (b.is_symbolic() && !b.impl().deferred && !known_batch_size(like))
    fail(
        "vmap: out_axes {} asks for plain results [B, ...], but the function is jitted and its mapped argument is "
        "batched, whose batch size B is a run-time value; keep the results batched (the default out_axes), or pass "
        "the argument plain [B, ...] (one trace per batch size)",
        out_axis);
  const Tensor plain = unbatch_like(b, like);
  const int a = normalize_axis(out_axis, plain.ndim(), "vmap out_axes");
  if (a == 0) return plain;
  std::vector<std::int64_t> perm;  // [1 .. a, 0, a+1 ..]: the batch axis moves to position a
  for (std::int64_t i = 1; i <= a; ++i) perm.push_back(i);
  perm.push_back(0);
  for (std::int64_t i = a + 1; i < static_cast<std::int64_t>(plain.ndim()); ++i) perm.push_back(i);
  return transpose(plain, perm);
}

namespace {

// Nested vmap's pieces: the size of argument `arg`'s mapped per-example axis (checked against `size`, -1 before the
// first), index i of that axis, and the results of each index stacked at out_axis.
std::int64_t nested_axis_size(const Tensor& x, std::int64_t axis, std::size_t arg, std::int64_t size) {
  if (x.ndim() == 0) fail("vmap: argument {} is a scalar (per example) and has no axis {} to map over", arg, axis);
  const int a = normalize_axis(axis, x.ndim(), "vmap");
  const std::int64_t n = x.shape(a);
  if (size >= 0 && n != size)
    fail("vmap: mapped axes have different sizes ({} for an earlier argument, {} for argument {})", size, n, arg);
  return n;
}

Tensor nested_index(const Tensor& x, std::int64_t axis, std::int64_t i) {
  const int a = normalize_axis(axis, x.ndim(), "vmap");
  Shape shape = x.shape();
  shape.erase(shape.begin() + a);
  return reshape(slice(x, a, i, i + 1), shape);
}

Tensor nested_stack(const std::vector<Tensor>& results, std::int64_t out_axis) {
  const int a = normalize_axis(out_axis, results[0].ndim() + 1, "vmap out_axes");
  return stack(results, a);
}

std::optional<std::int64_t> axis_of(const InAxes& in_axes, std::size_t i) {
  return in_axes.empty() ? std::optional<std::int64_t>(0) : in_axes[i];
}

// A map over an axis of size 0: f traced once on symbolic arguments (an example's types, nothing computed) for the
// results' shapes, each result then empty along the mapped axis (at out_axes), as JAX gives.
std::vector<Tensor> empty_results(const FlatFunction& f, const std::vector<Tensor>& in, const InAxes& in_axes,
                                  std::int64_t out_axes) {
  std::vector<Tensor> args = in;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (const auto axis = axis_of(in_axes, i)) {
      Shape shape = in[i].shape();
      shape.erase(shape.begin() + normalize_axis(*axis, in[i].ndim(), "vmap"));
      auto impl = std::make_shared<TensorImpl>();
      impl->dtype = in[i].dtype();
      impl->shape = std::move(shape);
      impl->batched = in[i].is_batched();
      impl->device = in[i].device();
      args[i] = Tensor(std::move(impl));
    }
  std::vector<Tensor> results;
  {
    const TracingScope shapes_only;
    const DeferConstantOps nothing_computed;
    results = f(args);
  }
  std::vector<Tensor> out;
  for (const Tensor& r : results) {
    Shape shape = r.shape();
    shape.insert(shape.begin() + normalize_axis(out_axes == batched_out ? 0 : out_axes, r.ndim() + 1, "vmap out_axes"),
                 0);
    out.push_back(zeros(shape, r.dtype(), r.device()));
  }
  return out;
}

// vmap inside a vmap body: a loop over the mapped per-example axis (see vmap).
std::vector<Tensor> vmap_by_loop(const FlatFunction& f, const std::vector<Tensor>& in, const InAxes& in_axes,
                                 std::int64_t out_axes) {
  std::int64_t size = -1;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (const auto axis = axis_of(in_axes, i)) size = nested_axis_size(in[i], *axis, i, size);
  if (size < 0) fail("vmap: no argument is mapped");
  if (size == 0) return empty_results(f, in, in_axes, out_axes);
  std::vector<std::vector<Tensor>> results;
  for (std::int64_t k = 0; k < size; ++k) {
    std::vector<Tensor> args = in;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (const auto axis = axis_of(in_axes, i)) args[i] = nested_index(in[i], *axis, k);
    results.push_back(f(args));
    if (results.back().size() != results[0].size())
      fail("vmap: the function returns {} results at index {} of the mapped axis and {} at index 0",
           results.back().size(), k, results[0].size());
  }
  std::vector<Tensor> stacked;
  for (std::size_t j = 0; j < results[0].size(); ++j) {
    std::vector<Tensor> column;
    for (const auto& r : results) column.push_back(r[j]);
    stacked.push_back(nested_stack(column, out_axes == batched_out ? 0 : out_axes));
  }
  return stacked;
}

}  // namespace

std::vector<Tensor> vmap_flat(const FlatFunction& f, std::vector<Tensor> in, const InAxes& in_axes,
                              std::int64_t out_axes) {
  if (!in_axes.empty() && in_axes.size() != in.size())
    fail("vmap: {} in_axes for a function of {} arguments", in_axes.size(), in.size());
  if (in_vmap_body()) return vmap_by_loop(f, in, in_axes, out_axes);
  Tensor like;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto axis = axis_of(in_axes, i);
    if (!axis) continue;
    in[i] = map_axis(in[i], *axis, i);
    const auto size = known_batch_size(in[i]), earlier = like.defined() ? known_batch_size(like) : size;
    if (size && earlier && *size != *earlier)
      fail("vmap: mapped axes have different sizes ({} for an earlier argument, {} for argument {})", *earlier, *size,
           i);
    if (!like.defined()) like = in[i];
  }
  if (!like.defined()) fail("vmap: no argument is mapped");
  std::vector<Tensor> results = [&] {
    VmapBody body;
    return f(in);
  }();
  for (Tensor& r : results) r = map_result(r, like, out_axes);
  return results;
}

}  // namespace vt::detail
