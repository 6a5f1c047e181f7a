#pragma once
/// @file
/// Derivatives beyond the gradient: jvp (a Jacobian-vector product), jacrev and jacfwd (whole
/// Jacobians, by rows or by columns), hessian, and hvp (a Hessian-vector product), named and
/// shaped as in JAX so that models port line by line.
///
/// All are built on the reverse sweep of grad.hpp, whose adjoints are themselves differentiable:
/// - jvp(f, primals, tangents) transposes the vector-Jacobian product. u -> vjp(u) = J^T u is
///   linear, so J v is the gradient of <J^T u, v> with respect to u (at u = 0). Every op with a
///   twice-differentiable adjoint therefore has a tangent, linear algebra included; a jvp costs
///   about two reverse sweeps after the forward pass.
/// - hvp(f)(x, v) is the gradient of <grad f(x), v>: one forward pass and two reverse sweeps.
/// - jacrev takes one pullback per output element, jacfwd one jvp per input element, hessian one
///   pullback of grad f per element of x (the forward pass and the first sweep are shared). One
///   sweep per unit vector, one after another, measured faster than one sweep mapped over all of
///   them (a vmap of the pullback), whose batched n x n values leave the cache (docs/performance.md).
///
/// They compose with vmap and jit: no builder maps internally, so vmap(hessian(f)) is one vmap,
/// and jit(vmap(hessian(f))) traces once for every batch size (the loops over elements unroll in
/// the trace: a Jacobian of m rows is m sweeps in the plan).
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "grad.hpp"

namespace vt {

namespace detail {
// J v for `out` computed from the variables `wrt` (watched), with tangents `tangents` (one per
// variable; an undefined one counts as zero): the gradient of <J^T u, v> with respect to u.
Tensor transposed_vjp(const Tensor& out, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents,
                      bool keep);
// Raises unless `tangent` can be primal `i`'s tangent: the same shape and dtype (a batch of
// tangents for an unbatched primal is a batch of directions, one J v per example).
void check_tangent(const Tensor& primal, const Tensor& tangent, std::size_t i, const char* transform);
// The unit tensor e_i of `like`'s per-example shape and dtype (batched like `like`): a one-hot of
// numel(like) entries, never an identity matrix.
Tensor unit_like(const Tensor& like, std::int64_t i);
// The Jacobian from its pieces: rows (each of x's shape) into out + x, or columns (each of out's
// shape) into out + x; zeros of that shape where there are none (an empty out or x).
Tensor stack_rows(const std::vector<Tensor>& rows, const Tensor& out, const Tensor& x);
Tensor stack_columns(const std::vector<Tensor>& columns, const Tensor& out, const Tensor& x);

template <class F, std::size_t N>
std::pair<Tensor, Tensor> jvp_impl(F& f, std::array<Tensor, N> in, const std::array<Tensor, N>& tangents) {
  TransformScope scope;
  bool outer = scope.nested;
  std::vector<Tensor> wrt, used;
  for (std::size_t i = 0; i < N; ++i) {
    check_tangent(in[i], tangents[i], i, "jvp");
    outer |= in[i].impl().tracked || (tangents[i].defined() && tangents[i].impl().tracked);
    if (!is_floating(in[i].dtype())) continue;  // an integer primal has no tangent
    in[i] = watch(in[i]);
    wrt.push_back(in[i]);
    used.push_back(tangents[i]);
  }
  const Tensor out = std::apply(f, in);
  const Tensor tangent = transposed_vjp(out, wrt, used, outer);
  return {release(out, outer), release(tangent, outer)};
}
}  // namespace detail

/// jvp(f, {primals...}, {tangents...}) -> {f(primals...), J v}: f's value and its directional
/// derivative along the tangents (each of its primal's shape and dtype; batched tangents of an
/// unbatched primal give one J v per example). f returns one tensor. As JAX's jax.jvp.
template <class F, std::size_t N>
std::pair<Tensor, Tensor> jvp(F f, const Tensor (&primals)[N], const Tensor (&tangents)[N]) {
  std::array<Tensor, N> in, t;
  for (std::size_t i = 0; i < N; ++i) {
    in[i] = primals[i];
    t[i] = tangents[i];
  }
  return detail::jvp_impl(f, in, t);
}

/// jacrev(f, argnum)(args...): the Jacobian of f's result (shape S) with respect to argument
/// `argnum` (shape X), of shape S + X, by one pullback per element of S.
template <class F>
auto jacrev(F f, int argnum = 0) {
  return [f = std::move(f), argnum](const auto&... args) {
    const auto k = static_cast<std::size_t>(detail::check_argnums({argnum}, sizeof...(args), "jacrev")[0]);
    const std::array<Tensor, sizeof...(args)> in{Tensor(args)...};
    detail::check_differentiable(in[k], argnum, "jacrev");
    auto [out, pullback] = vjp(f, args...);
    std::vector<Tensor> rows;
    for (std::int64_t i = 0; i < numel(out.shape()); ++i) rows.push_back(pullback(detail::unit_like(out, i))[k]);
    return detail::stack_rows(rows, out, in[k]);
  };
}

/// jacfwd(f, argnum)(args...): the same Jacobian, S + X, by one jvp per element of X.
template <class F>
auto jacfwd(F f, int argnum = 0) {
  return [f = std::move(f), argnum](const auto&... args) {
    constexpr std::size_t n = sizeof...(args);
    const auto k = static_cast<std::size_t>(detail::check_argnums({argnum}, n, "jacfwd")[0]);
    const std::array<Tensor, n> in{Tensor(args)...};
    detail::check_differentiable(in[k], argnum, "jacfwd");
    F g = f;
    const Tensor out = std::apply(g, in);
    const auto push = [&](const Tensor& tangent) {
      std::array<Tensor, n> tangents;
      tangents[k] = tangent;
      return detail::jvp_impl(g, in, tangents).second;
    };
    std::vector<Tensor> columns;
    for (std::int64_t j = 0; j < numel(in[k].shape()); ++j) columns.push_back(push(detail::unit_like(in[k], j)));
    return detail::stack_columns(columns, out, in[k]);
  };
}

/// hessian(f, argnum)(args...): the matrix of second derivatives of scalar f with respect to
/// argument `argnum` (shape X), of shape X + X: the Jacobian of grad(f), by rows.
template <class F>
auto hessian(F f, int argnum = 0) {
  auto gradient = [g = grad(std::move(f), std::vector<int>{argnum})](const auto&... args) { return g(args...)[0]; };
  return jacrev(std::move(gradient), argnum);
}

/// hvp(f)(x, v): the Hessian of scalar f at x times v (x's shape), without forming the Hessian:
/// the gradient of <grad f(x), v>.
template <class F>
auto hvp(F f) {
  return [f = std::move(f)](const Tensor& x, const Tensor& v) {
    detail::check_tangent(x, v, 0, "hvp");
    return grad([&](const Tensor& y) { return sum(grad(f)(y) * v); })(x);
  };
}

}  // namespace vt
