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

// J v for each of `outs` computed from the variables `wrt` (watched), with tangents `tangents` (one per variable;
// an undefined one counts as zero), in one sweep; raises unless every output is floating-point.
std::vector<Tensor> tangents_of(const std::vector<Tensor>& outs, const std::vector<Tensor>& wrt,
                                const std::vector<Tensor>& tangents) {
  for (const Tensor& out : outs)
    if (!is_floating(out.dtype()))
      fail("jvp: the function returns {} of shape {}, which has no tangent; return a floating-point tensor",
           name_of(out.dtype()), to_string(out.shape()));
  return push_forward(outs, wrt, tangents);
}

Tensor tangent_of(const Tensor& out, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents) {
  return tangents_of({out}, wrt, tangents)[0];
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
  std::vector<Tensor> out = f(in), tangent = tangents_of(out, wrt, used);
  for (Tensor& t : tangent) t = release(t, outer);
  for (Tensor& o : out) o = release(o, outer);
  return {std::move(out), std::move(tangent)};
}

Tensor jacfwd_flat(const FlatFunction& f, std::vector<Tensor> in, int argnum) {
  const auto k = static_cast<std::size_t>(check_argnums({argnum}, in.size(), "jacfwd")[0]);
  check_differentiable(in[k], argnum, "jacfwd");
  TransformScope scope;
  const bool outer = scope.nested || in[k].impl().tracked;
  const Tensor x = in[k];
  in[k] = watch(x);
  const std::vector<Tensor> out = f(in);
  if (out.size() != 1) fail("jacfwd: the function returns {} results; it must return one tensor", out.size());
  std::vector<Tensor> columns;
  for (std::int64_t j = 0; j < numel(x.shape()); ++j) columns.push_back(tangent_of(out[0], {in[k]}, {unit_like(x, j)}));
  return release(stack_columns(columns, out[0], x), outer);
}

Tensor jacrev_flat(const FlatFunction& f, const std::vector<Tensor>& in, int argnum) {
  const auto k = static_cast<std::size_t>(check_argnums({argnum}, in.size(), "jacrev")[0]);
  check_differentiable(in[k], argnum, "jacrev");
  auto [out, pullback] = vjp_flat(f, in);
  if (out.size() != 1) fail("jacrev: the function returns {} results; it must return one tensor", out.size());
  std::vector<Tensor> rows;
  for (std::int64_t i = 0; i < numel(out[0].shape()); ++i) rows.push_back(pullback({unit_like(out[0], i)})[k]);
  return stack_rows(rows, out[0], in[k]);
}

}  // namespace vt::detail
