#pragma once
/// @file
/// Derivatives beyond the gradient: jvp (a Jacobian-vector product), jacrev and jacfwd (whole
/// Jacobians, by rows or by columns), hessian, and hvp (a Hessian-vector product), named and
/// shaped as in JAX so that models port line by line.
///
/// Forward mode is a sweep of its own (push_forward, grad.hpp): every op has a tangent rule
/// (OpDef::tangent), written with ordinary ops, so a sweep over a gradient's graph is recorded and
/// differentiable too:
/// - jvp(f, primals, tangents): f's forward pass, then one forward sweep.
/// - hvp(f)(x, v) is forward over reverse, the jvp of grad f along v: a forward pass, a reverse
///   sweep and one forward sweep over both.
/// - jacrev takes one pullback per output element; jacfwd runs f once and one forward sweep per
///   input element; hessian is jacfwd of grad f (forward over reverse: f and its reverse sweep run
///   once, then one forward sweep per element of x). One sweep per unit vector, one after another,
///   measured faster than one sweep mapped over all of them (a vmap of the pullback), whose batched
///   n x n values leave the cache (docs/performance.md).
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
// variable; an undefined one counts as zero); raises unless `out` is floating-point.
Tensor tangent_of(const Tensor& out, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents);
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
  const Tensor tangent = tangent_of(out, wrt, used);
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

/// jacfwd(f, argnum)(args...): the same Jacobian, S + X, by one forward sweep per element of X
/// (f runs once).
template <class F>
auto jacfwd(F f, int argnum = 0) {
  return [f = std::move(f), argnum](const auto&... args) {
    const auto k = static_cast<std::size_t>(detail::check_argnums({argnum}, sizeof...(args), "jacfwd")[0]);
    std::array<Tensor, sizeof...(args)> in{Tensor(args)...};
    detail::check_differentiable(in[k], argnum, "jacfwd");
    detail::TransformScope scope;
    const bool outer = scope.nested || in[k].impl().tracked;
    const Tensor x = in[k];
    in[k] = detail::watch(x);
    F g = f;
    const Tensor out = std::apply(g, in);
    std::vector<Tensor> columns;
    for (std::int64_t j = 0; j < numel(x.shape()); ++j)
      columns.push_back(detail::tangent_of(out, {in[k]}, {detail::unit_like(x, j)}));
    return detail::release(detail::stack_columns(columns, out, x), outer);
  };
}

/// hessian(f, argnum)(args...): the matrix of second derivatives of scalar f with respect to
/// argument `argnum` (shape X), of shape X + X: the Jacobian of grad(f), by forward sweeps
/// (forward over reverse). As JAX's jax.hessian.
template <class F>
auto hessian(F f, int argnum = 0) {
  auto gradient = [g = grad(std::move(f), std::vector<int>{argnum})](const auto&... args) { return g(args...)[0]; };
  return jacfwd(std::move(gradient), argnum);
}

/// hvp(f)(x, v): the Hessian of scalar f at x times v (x's shape), without forming the Hessian:
/// the jvp of grad f along v (forward over reverse).
template <class F>
auto hvp(F f) {
  return [f = std::move(f)](const Tensor& x, const Tensor& v) {
    detail::check_tangent(x, v, 0, "hvp");
    return jvp(grad(f), {x}, {v}).second;
  };
}

}  // namespace vt
