#include "vmap.hpp"

#include <numeric>

namespace vt::detail {

namespace {
thread_local bool in_vmap_body = false;
}

VmapBody::VmapBody() {
  if (in_vmap_body) fail("vmap: nested vmap is not supported (vmap was called inside a vmapped function)");
  in_vmap_body = true;
}
VmapBody::~VmapBody() { in_vmap_body = false; }

Tensor map_axis(const Tensor& x, std::int64_t axis, std::size_t arg) {
  if (x.is_batched()) {
    if (axis != 0)
      fail(
          "vmap: argument {} is already batched and can only be mapped over its batch (in_axes 0); nested vmap is "
          "not supported",
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

}  // namespace vt::detail
