// The non-template parts of the derivative builders (derivatives.hpp).
#include "derivatives.hpp"

#include "../ops/batch.hpp"
#include "../ops/creation.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/indexing.hpp"
#include "../ops/layout.hpp"
#include "../ops/reduce.hpp"

namespace vt::detail {

namespace {

// Raises unless every result of the function is floating-point (an integer one has no derivative).
void check_floating_results(const std::vector<Tensor>& outs, const char* transform) {
  for (const Tensor& out : outs)
    if (!is_floating(out.dtype()))
      fail("{}: the function returns {} of shape {}, which has no derivative; return a floating-point tensor",
           transform, name_of(out.dtype()), to_string(out.shape()));
}

// The unit tensor e_i of `like`'s per-example shape and dtype (batched like `like`): a one-hot of numel(like)
// entries, never an identity matrix.
Tensor unit_like(const Tensor& like, std::int64_t i) {
  std::vector<double> e(static_cast<std::size_t>(numel(like.shape())), 0.0);
  e[static_cast<std::size_t>(i)] = 1;
  const Tensor unit = Tensor::from_vector(e, like.shape(), like.dtype(), like.device());
  return like.is_batched() ? broadcast_to_batch(unit, like) : unit;
}

Shape jacobian_shape(const Tensor& out, const Tensor& x) {
  Shape shape = out.shape();
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return shape;
}

Tensor zero_jacobian(const Tensor& out, const Tensor& x) {
  const Tensor z = zeros(jacobian_shape(out, x), out.dtype(), out.device());
  return out.is_batched() ? broadcast_to_batch(z, out) : x.is_batched() ? broadcast_to_batch(z, x) : z;
}

// The Jacobian from its pieces: rows (each of x's shape) into out + x, or columns (each of out's shape) into out + x;
// zeros of that shape where there are none (an empty out or x).
Tensor stack_rows(const std::vector<Tensor>& rows, const Tensor& out, const Tensor& x) {
  if (rows.empty()) return zero_jacobian(out, x);
  return reshape(stack(rows, 0), jacobian_shape(out, x));
}

Tensor stack_columns(const std::vector<Tensor>& columns, const Tensor& out, const Tensor& x) {
  if (columns.empty()) return zero_jacobian(out, x);
  return reshape(stack(columns, static_cast<std::int64_t>(out.shape().size())), jacobian_shape(out, x));
}

}  // namespace

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

std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp_flat(const FlatFunction& f, std::vector<Tensor> in,
                                                             const std::vector<Tensor>& tangents) {
  if (tangents.size() != in.size())
    fail("jvp: {} tangents for {} primals; give one tangent per primal", tangents.size(), in.size());
  TransformScope scope;
  bool outer = scope.nested;
  std::vector<Tensor> wrt, used;
  for (std::size_t i = 0; i < in.size(); ++i) {
    check_tangent(in[i], tangents[i], i, "jvp");
    outer |= in[i].impl().tracked || (tangents[i].defined() && tangents[i].impl().tracked);
    if (!is_floating(in[i].dtype())) continue;  // an integer primal has no tangent
    in[i] = watch(in[i]);
    wrt.push_back(in[i]);
    used.push_back(tangents[i]);
  }
  std::vector<Tensor> out = f(in);
  check_floating_results(out, "jvp");
  outer |= scope.differentiated_by_older(out);
  std::vector<Tensor> tangent = push_forward(out, wrt, used);
  for (Tensor& t : tangent) t = release(t, outer);
  for (Tensor& o : out) o = release(o, outer);
  return {std::move(out), std::move(tangent)};
}

Jacobians jacfwd_flat(const FlatFunction& f, std::vector<Tensor> in, const std::vector<int>& argnums) {
  TransformScope scope;
  bool outer = scope.nested;
  const std::vector<Tensor> wrt = watch_arguments(in, argnums, "jacfwd", outer);
  const std::vector<Tensor> out = f(in);
  check_floating_results(out, "jacfwd");
  outer |= scope.differentiated_by_older(out);
  Jacobians jac(out.size());
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    std::vector<std::vector<Tensor>> columns(out.size());  // per result, one column per element of wrt[k]
    for (std::int64_t j = 0; j < numel(wrt[k].shape()); ++j) {
      const std::vector<Tensor> tangents = push_forward(out, {wrt[k]}, {unit_like(wrt[k], j)});
      // Released at once unless an outer transform needs it: the sweep's graph, as large as f's, goes with it.
      for (std::size_t i = 0; i < out.size(); ++i) columns[i].push_back(release(tangents[i], outer));
    }
    for (std::size_t i = 0; i < out.size(); ++i)
      jac[i].push_back(release(stack_columns(columns[i], out[i], wrt[k]), outer));
  }
  return jac;
}

Jacobians jacrev_flat(const FlatFunction& f, std::vector<Tensor> in, const std::vector<int>& argnums) {
  TransformScope scope;
  bool outer = scope.nested;
  const std::vector<Tensor> wrt = watch_arguments(in, argnums, "jacrev", outer);
  const std::vector<Tensor> out = f(in);
  check_floating_results(out, "jacrev");
  outer |= scope.differentiated_by_older(out);
  Jacobians jac(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<std::vector<Tensor>> rows(wrt.size());  // per variable, one row per element of out[i]
    for (std::int64_t e = 0; e < numel(out[i].shape()); ++e) {
      const std::vector<Tensor> grads = backward({out[i]}, {unit_like(out[i], e)}, wrt, outer);
      for (std::size_t k = 0; k < wrt.size(); ++k) rows[k].push_back(release(grads[k], outer));  // as jacfwd's
    }
    for (std::size_t k = 0; k < wrt.size(); ++k) jac[i].push_back(release(stack_rows(rows[k], out[i], wrt[k]), outer));
  }
  return jac;
}

}  // namespace vt::detail
