#include "vmap.hpp"

#include <numeric>

#include "../ops/indexing.hpp"

namespace vt::detail {

namespace {
thread_local int vmap_body_depth = 0;
}

bool in_vmap_body() { return vmap_body_depth > 0; }
VmapBody::VmapBody() { ++vmap_body_depth; }
VmapBody::~VmapBody() { --vmap_body_depth; }

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

}  // namespace vt::detail
