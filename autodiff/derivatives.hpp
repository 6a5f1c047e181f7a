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
///   n x n values leave the cache (docs/performance.md). Unless an outer transform differentiates the
///   Jacobian, each sweep's result is released at once, so its graph is freed before the next sweep.
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
// Raises unless `tangent` can be primal `i`'s tangent: the same shape and dtype (a batch of
// tangents for an unbatched primal is a batch of directions, one J v per example).
void check_tangent(const Tensor& primal, const Tensor& tangent, std::size_t i, const char* transform);
// jac[i][k]: the Jacobian of f's result i (shape S) with respect to argument argnums[k] (shape X), of shape S + X.
using Jacobians = std::vector<std::vector<Tensor>>;
// Every result's Jacobians, f run once: by one forward sweep per element of the arguments (each sweep gives a column
// of every result), or by one reverse sweep per element of the results (each gives a row for every argument).
Jacobians jacfwd_flat(const FlatFunction& f, std::vector<Tensor> in, const std::vector<int>& argnums);
Jacobians jacrev_flat(const FlatFunction& f, std::vector<Tensor> in, const std::vector<int>& argnums);
// f's results and their tangents along `tangents` (one per argument; an integer argument's is ignored).
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp_flat(const FlatFunction& f, std::vector<Tensor> in,
                                                             const std::vector<Tensor>& tangents);
}  // namespace detail

/// jvp(f, {primals...}, {tangents...}) -> {f(primals...), J v}: f's value and its directional
/// derivative along the tangents (each of its primal's shape and dtype; batched tangents of an
/// unbatched primal give one J v per example). f returns one tensor. As JAX's jax.jvp.
template <class F, std::size_t N>
std::pair<Tensor, Tensor> jvp(F f, const Tensor (&primals)[N], const Tensor (&tangents)[N]) {
  auto [out, tangent] = detail::jvp_flat(detail::flat_call<N>(f), std::vector<Tensor>(primals, primals + N),
                                         std::vector<Tensor>(tangents, tangents + N));
  return {out[0], tangent[0]};
}

/// jacrev(f, argnum)(args...): the Jacobian of f's result (shape S) with respect to argument
/// `argnum` (shape X), of shape S + X, by one pullback per element of S.
template <class F>
auto jacrev(F f, int argnum = 0) {
  return [f = std::move(f), argnum](const auto&... args) {
    return detail::jacrev_flat(detail::flat_call<sizeof...(args)>(f), {Tensor(args)...}, {argnum})[0][0];
  };
}

/// jacfwd(f, argnum)(args...): the same Jacobian, S + X, by one forward sweep per element of X
/// (f runs once).
template <class F>
auto jacfwd(F f, int argnum = 0) {
  return [f = std::move(f), argnum](const auto&... args) {
    return detail::jacfwd_flat(detail::flat_call<sizeof...(args)>(f), {Tensor(args)...}, {argnum})[0][0];
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
