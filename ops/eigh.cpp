// eigh family: the symmetric eigendecomposition. Shape rule, forward, adjoint.
//
// Two results from an op with one output, as for qr (ops/qr.cpp): the output packs each example's
// eigenvalues and eigenvectors, flat, as [..., n + n n], and eigh() hands back two slices of it,
// reshaped; the adjoint sees both cotangents in the packed output's.
#include <cmath>
#include <limits>

#include "../core/graph.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "indexing.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matmul.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

std::int64_t packed_size(std::int64_t n) { return n + n * n; }

ExampleType eigh_type(std::span<const ExampleType> in, const Attrs&) {
  check_square("eigh", in[0].shape);
  Shape out = batch_axes(in[0].shape);
  out.push_back(packed_size(in[0].shape.back()));
  return {in[0].dtype, out};
}

void eigh_forward(const KernelArgs& k) {
  const std::int64_t n = k.in[0].shape.back();
  const Shape lead(k.out.shape.begin(), k.out.shape.end() - 1);
  std::shared_ptr<Storage> scratch;
  const MatrixOperand a = matrix_operand(k.backend, k.in[0], lead, n, n, scratch, k.batched);
  // The backend may call this after the op returns (a GPU finds out asynchronously): it keeps
  // copies of what the message needs.
  auto failed = [lead, batched = k.batched, n, first = k.first_example, whole = k.whole_batch](std::int64_t flat,
                                                                                               std::int32_t code) {
    const std::string where = locate_matrix(lead, batched, flat, first, whole).where;
    if (code < 0) fail("eigh: {} ({} x {}) has a non-finite entry (NaN or Inf) in its lower triangle", where, n, n);
    fail("eigh: the eigensolver did not converge on {} ({} x {})", where, n, n);
  };
  char* out = static_cast<char*>(k.out.data);
  k.backend.eigh(k.out.dtype, numel(lead), n, a.data, a.stride, out, packed_size(n),
                 out + n * static_cast<std::int64_t>(size_of(k.out.dtype)), packed_size(n), failed);
}

// The eigenvalues [..., n] and eigenvectors [..., n, n] of a packed output (or of its cotangent),
// for matrices of shape `a`.
Eigh unpack(const Tensor& packed, const Shape& a) {
  const std::int64_t n = a.back();
  Shape w_shape = batch_axes(a), v_shape = a;
  w_shape.push_back(n);
  return {reshape(slice(packed, -1, 0, n), w_shape), reshape(slice(packed, -1, n, packed_size(n)), v_shape)};
}

// F_ij = 1 / (w_j - w_i) for the pairs that the adjoint below keeps, else 0.
Tensor gap_inverses(const Tensor& w, const Shape& a) {
  const DType dtype = w.dtype();
  const Device device = w.device();
  Shape row = batch_axes(a);
  row.insert(row.end(), {1, a.back()});
  const Tensor gaps = reshape(w, row) - as_columns(w);  // w_j - w_i
  const double eps =
      dtype == DType::f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  const Tensor tolerance = as_columns(max(abs(w), {-1}, true)) * std::sqrt(eps);
  const Tensor kept = greater(abs(gaps), tolerance);
  return astype(kept, dtype) / where(kept, gaps, ones({}, dtype, device));
}

// Abar = V (diag(wbar) + F o (V^T Vbar)) V^T, symmetrised, F_ij = 1 / (w_j - w_i) off the diagonal.
// Symmetrising keeps F o (V^T Vbar)'s part F_ij ((V^T Vbar)_ij - (V^T Vbar)_ji) / 2, which vanishes
// within a degenerate eigenspace for a function that does not depend on the basis chosen there:
// such pairs (closer than sqrt(eps) max |w|, where rounding leaves 0 / 0 noise) are dropped, as
// documented in linalg.hpp. sqrt(eps) balances the two errors: keeping a pair whose computed gap
// is g amplifies eps-sized noise by 1 / g, and dropping it matters only for gradients that are
// already of size 1 / g.
std::vector<Tensor> eigh_adjoint(const Node& node, const Tensor& out, const Tensor& g, const AdjointContext&) {
  const Shape& a = node.inputs[0].shape();
  const std::int64_t n = a.back();
  const DType dtype = out.dtype();
  const Device device = out.device();
  if (n == 0) return {zeros(a, dtype, device)};  // nothing to differentiate (and max over an empty axis fails)
  const Eigh e = unpack(out, a), bar = unpack(g, a);
  const Tensor f = gap_inverses(e.eigenvalues, a);
  const Tensor inner =
      as_columns(bar.eigenvalues) * eye(n, dtype, device) + f * matmul(e.eigenvectors.t(), bar.eigenvectors);
  const Tensor a_bar = matmul(matmul(e.eigenvectors, inner), e.eigenvectors.t());
  return {(a_bar + a_bar.t()) * 0.5};
}

// With P = V^T dA V (dA symmetric, as the adjoint assumes): dw = diag(P), dV = V (F o P), the same F
// and the same dropped pairs as the adjoint.
Tensor eigh_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents) {
  const Shape& a = node.inputs[0].shape();
  const std::int64_t n = a.back();
  if (n == 0) return zeros(out.shape(), out.dtype(), out.device());
  const Eigh e = unpack(out, a);
  const Tensor p = matmul(matmul(e.eigenvectors.t(), symmetric_part(tangents[0])), e.eigenvectors);
  const Tensor dv = matmul(e.eigenvectors, gap_inverses(e.eigenvalues, a) * p);
  Shape flat = batch_axes(a);
  flat.push_back(n * n);
  return concatenate({diagonal(p), reshape(dv, flat)}, -1);
}

const OpDef eigh_op{.name = "eigh",
                    .inputs = 1,
                    .infer = eigh_type,
                    .forward = eigh_forward,
                    .adjoint = eigh_adjoint,
                    .tangent = eigh_tangent};

}  // namespace

Eigh eigh(const Tensor& a) { return unpack(apply(eigh_op, {a}), a.shape()); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(eigh_op, "eigh");

}  // namespace vt
