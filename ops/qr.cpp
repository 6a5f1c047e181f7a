// QR family: the reduced QR decomposition. Shape rule, forward, adjoint.
//
// Two results from an op with one output: the op's output packs each example's Q and R, flat, as
// [..., m k + k n], and qr() hands back two slices of it, reshaped. So the factorization is one
// backend call, and the adjoint sees the cotangents of Q and R together (the slices' adjoints add
// into one cotangent of the packed output; a result nobody uses contributes zeros). Deriving R
// with ops instead (R = triu(Q^T A), exact by the chain rule) would cost a product as large as the
// factorization, and its adjoint would still need R.
#include <algorithm>

#include "../core/graph.hpp"
#include "elementwise.hpp"
#include "indexing.hpp"
#include "layout.hpp"
#include "linalg.hpp"
#include "matmul.hpp"
#include "matrix_batch.hpp"

namespace vt {

namespace {

struct QrSizes {
  std::int64_t m, n, k;
  std::int64_t q_size() const { return m * k; }
  std::int64_t packed() const { return m * k + k * n; }
};

QrSizes qr_sizes(const Shape& a) {
  const std::int64_t m = a[a.size() - 2], n = a.back();
  return {m, n, std::min(m, n)};
}

ExampleType qr_type(std::span<const ExampleType> in, const Attrs&) {
  const Shape& s = in[0].shape;
  if (s.size() < 2) fail("qr: needs matrices [..., m, n], got shape {}", to_string(s));
  Shape out = batch_axes(s);
  out.push_back(qr_sizes(s).packed());
  return {in[0].dtype, out};
}

void qr_forward(const KernelArgs& k) {
  const QrSizes s = qr_sizes(k.in[0].shape);
  const Shape lead(k.out.shape.begin(), k.out.shape.end() - 1);
  std::shared_ptr<Storage> scratch;
  const MatrixOperand a = matrix_operand(k.backend, k.in[0], lead, s.m, s.n, scratch, k.batched);
  // The backend may call this after the op returns (a GPU finds out asynchronously): it keeps
  // copies of what the message needs.
  auto failed = [lead, batched = k.batched, s, first = k.first_example, whole = k.whole_batch](std::int64_t flat,
                                                                                               std::int32_t) {
    fail("qr: {} ({} x {}) has a non-finite entry (NaN or Inf)", locate_matrix(lead, batched, flat, first, whole).where,
         s.m, s.n);
  };
  char* out = static_cast<char*>(k.out.data);
  k.backend.qr(k.out.dtype, numel(lead), s.m, s.n, a.data, a.stride, out, s.packed(),
               out + s.q_size() * static_cast<std::int64_t>(size_of(k.out.dtype)), s.packed(), failed);
}

// Q [..., m, k] and R [..., k, n] of a packed output (or of its cotangent), for matrices `a`.
QR unpack(const Tensor& packed, const Shape& a) {
  const QrSizes s = qr_sizes(a);
  Shape q_shape = batch_axes(a), r_shape = batch_axes(a);
  q_shape.insert(q_shape.end(), {s.m, s.k});
  r_shape.insert(r_shape.end(), {s.k, s.n});
  return {reshape(slice(packed, -1, 0, s.q_size()), q_shape),
          reshape(slice(packed, -1, s.q_size(), s.packed()), r_shape)};
}

// For m >= n (k = n): with dA = dQ R + Q dR, C = Q^T dQ is skew (Q^T Q = I) and dR R^-1 is upper
// triangular, so the strict lower triangle of B = Q^T dA R^-1 is C's, which fixes dQ and dR.
// Collecting the terms of <Qbar, dQ> + <Rbar, dR> in dA gives
//   Abar = (Qbar + Q copyltu(M)) R^-T,  M = R Rbar^T - Qbar^T Q,
// copyltu(M) = tril(M) + tril(M, -1)^T. For m < n, A = [X | Y] with X = Q U square and
// Y = Q V, V = Q^T Y: X is the square case with Qbar + Y Vbar^T (V depends on Q), and Ybar = Q Vbar.
// R^-T is a triangular solve, never an inverse; a rank-deficient A gives a non-finite gradient.
std::vector<Tensor> qr_adjoint(const Node& node, const Tensor& out, const Tensor& g, const AdjointContext&) {
  const Tensor& a = node.inputs[0];
  const QrSizes s = qr_sizes(a.shape());
  const QR f = unpack(out, a.shape()), bar = unpack(g, a.shape());
  const bool wide = s.m < s.n;
  const Tensor u = wide ? slice(f.r, -1, 0, s.m) : f.r;
  const Tensor u_bar = wide ? slice(bar.r, -1, 0, s.m) : bar.r;
  const Tensor v_bar = wide ? slice(bar.r, -1, s.m, s.n) : Tensor();
  const Tensor q_bar = wide ? bar.q + matmul(slice(a, -1, s.m, s.n), v_bar.t()) : bar.q;
  const Tensor m = matmul(u, u_bar.t()) - matmul(q_bar.t(), f.q);
  const Tensor copyltu = tril(m) + tril(m, -1).t();
  const Tensor x_bar = triangular_solve(u, q_bar + matmul(f.q, copyltu), /*lower=*/false, /*transpose=*/true,
                                        /*left=*/false);
  if (!wide) return {x_bar};
  return {concatenate({x_bar, matmul(f.q, v_bar)}, -1)};
}

// The packed form of Q's and R's tangents.
Tensor pack(const Tensor& q, const Tensor& r) {
  const auto flat = [](const Tensor& x) {
    Shape s = batch_axes(x.shape());
    s.push_back(x.shape(-2) * x.shape(-1));
    return reshape(x, s);
  };
  return concatenate({flat(q), flat(r)}, -1);
}

// For m >= n, with the same B = Q^T dA R^-1 as above (Q^T dQ = skew, dR R^-1 upper triangular):
// Omega = tril(B, -1) - tril(B, -1)^T is Q^T dQ, dR = (B - Omega) R, dQ = dA R^-1 - Q (B - Omega).
// For m < n, A = [X | Y]: X = Q U is the square case, and V = Q^T Y gives dV = dQ^T Y + Q^T dY.
Tensor qr_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents) {
  const Tensor& a = node.inputs[0];
  const QrSizes s = qr_sizes(a.shape());
  const QR f = unpack(out, a.shape());
  const bool wide = s.m < s.n;
  const Tensor u = wide ? slice(f.r, -1, 0, s.m) : f.r;
  const Tensor da = tangents[0], dx = wide ? slice(da, -1, 0, s.m) : da;
  const Tensor d = triangular_solve(u, dx, /*lower=*/false, /*transpose=*/false, /*left=*/false);  // dX U^-1
  const Tensor b = matmul(f.q.t(), d);
  const Tensor below = tril(b, -1);
  const Tensor upper = b - below + below.t();  // B - Omega
  const Tensor dq = d - matmul(f.q, upper);
  const Tensor du = matmul(upper, u);
  if (!wide) return pack(dq, du);
  const Tensor y = slice(a, -1, s.m, s.n);
  const Tensor dv = matmul(dq.t(), y) + matmul(f.q.t(), slice(da, -1, s.m, s.n));
  return pack(dq, concatenate({du, dv}, -1));
}

const OpDef qr_op{
    .name = "qr", .inputs = 1, .infer = qr_type, .forward = qr_forward, .adjoint = qr_adjoint, .tangent = qr_tangent};

}  // namespace

QR qr(const Tensor& a) { return unpack(apply(qr_op, {a}), a.shape()); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(qr_op, "qr");

}  // namespace vt
