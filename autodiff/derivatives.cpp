// The non-template parts of the derivative builders (derivatives.hpp).
#include "derivatives.hpp"

#include "../ops/batch.hpp"
#include "../ops/creation.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/indexing.hpp"
#include "../ops/layout.hpp"
#include "../ops/reduce.hpp"

namespace vt::detail {

Tensor tangent_of(const Tensor& out, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents) {
  if (!is_floating(out.dtype()))
    fail("jvp: the function returns {} of shape {}, which has no tangent; return a floating-point tensor",
         name_of(out.dtype()), to_string(out.shape()));
  return push_forward({out}, wrt, tangents)[0];
}

void check_tangent(const Tensor& primal, const Tensor& tangent, std::size_t i, const char* transform) {
  if (!tangent.defined()) return;
  if (!primal.defined()) fail("{}: primal {} is an undefined tensor", transform, i);
  if (tangent.shape() != primal.shape() || tangent.dtype() != primal.dtype())
    fail(
        "{}: tangent {} is {} of shape {}, but its primal is {} of shape {}; a tangent has its primal's shape and "
        "dtype",
        transform, i, name_of(tangent.dtype()), to_string(tangent.shape()), name_of(primal.dtype()),
        to_string(primal.shape()));
}

Tensor unit_like(const Tensor& like, std::int64_t i) {
  std::vector<double> e(static_cast<std::size_t>(numel(like.shape())), 0.0);
  e[static_cast<std::size_t>(i)] = 1;
  const Tensor unit = Tensor::from_vector(e, like.shape(), like.dtype(), like.device());
  return like.is_batched() ? broadcast_to_batch(unit, like) : unit;
}

namespace {

Shape jacobian_shape(const Tensor& out, const Tensor& x) {
  Shape shape = out.shape();
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return shape;
}

Tensor zero_jacobian(const Tensor& out, const Tensor& x) {
  const Tensor z = zeros(jacobian_shape(out, x), out.dtype(), out.device());
  return out.is_batched() ? broadcast_to_batch(z, out) : x.is_batched() ? broadcast_to_batch(z, x) : z;
}

}  // namespace

Tensor stack_rows(const std::vector<Tensor>& rows, const Tensor& out, const Tensor& x) {
  if (rows.empty()) return zero_jacobian(out, x);
  return reshape(stack(rows, 0), jacobian_shape(out, x));
}

Tensor stack_columns(const std::vector<Tensor>& columns, const Tensor& out, const Tensor& x) {
  if (columns.empty()) return zero_jacobian(out, x);
  return reshape(stack(columns, static_cast<std::int64_t>(out.shape().size())), jacobian_shape(out, x));
}

}  // namespace vt::detail
