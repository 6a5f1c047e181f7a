// Matmul family: numpy matmul semantics lowered to one strided-batched GEMM.
#include "matmul.hpp"

#include "../core/graph.hpp"
#include "elementwise.hpp"
#include "layout.hpp"
#include "matrix_batch.hpp"
#include "reduce.hpp"

namespace vt {

namespace {

// Per-example shapes as matrices: a vector is a row on the left, a column on the right.
Shape as_left(Shape s) {
  if (s.size() == 1) s.insert(s.begin(), 1);
  return s;
}
Shape as_right(Shape s) {
  if (s.size() == 1) s.push_back(1);
  return s;
}

ExampleType matmul_type(const std::vector<ExampleType>& in, const Attrs&) {
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  if (a.empty() || b.empty())
    fail("matmul: operands must have rank >= 1, got shapes {} and {}", to_string(a), to_string(b));
  const Shape a2 = as_left(a), b2 = as_right(b);
  if (a2.back() != b2[b2.size() - 2])
    fail("matmul: inner dimensions differ for shapes {} and {}", to_string(a), to_string(b));
  Shape out = broadcast_shapes(batch_axes(a2), batch_axes(b2), "matmul");
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2.back());
  return {in[0].dtype, out};
}

void matmul_forward(const KernelArgs& k) {
  const std::size_t lead = k.lead();
  // Physical matrix shapes; the vmap batch axis is one more leading batch axis.
  Shape a = k.in[0].shape, b = k.in[1].shape;
  const bool a_vec = a.size() - lead == 1, b_vec = b.size() - lead == 1;
  if (a_vec) a.insert(a.end() - 1, 1);
  if (b_vec) b.push_back(1);
  const std::int64_t m = a[a.size() - 2], kk = a.back(), n = b.back();
  View va = k.in[0], vb = k.in[1];
  va.shape = a;
  vb.shape = b;
  if (a_vec) va.strides.insert(va.strides.end() - 1, kk);
  if (b_vec) vb.strides.push_back(1);
  // The per-example batch axes broadcast numpy-style; the vmap axis stays in front.
  const auto per_example = [&](const Shape& s) { return Shape(s.begin() + static_cast<std::ptrdiff_t>(lead), s.end() - 2); };
  Shape out_batch = broadcast_shapes(per_example(a), per_example(b), "matmul");
  if (k.batched) out_batch.insert(out_batch.begin(), k.batch);
  std::shared_ptr<Storage> scratch_a, scratch_b;
  const MatrixOperand pa = matrix_operand(k.backend, va, out_batch, m, kk, scratch_a, k.batched);
  const MatrixOperand pb = matrix_operand(k.backend, vb, out_batch, kk, n, scratch_b, k.batched);
  k.backend.gemm(GemmArgs{.dtype = k.out.dtype,
                          .count = numel(out_batch),
                          .m = m,
                          .n = n,
                          .k = kk,
                          .trans_a = false,
                          .trans_b = false,
                          .alpha = 1.0,
                          .beta = 0.0,
                          .a = pa.data,
                          .stride_a = pa.stride,
                          .b = pb.data,
                          .stride_b = pb.stride,
                          .c = k.out.data,
                          .stride_c = m * n});
}

std::vector<Tensor> matmul_adjoint(const Node& node, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
  const Tensor& a = node.inputs[0];
  const Tensor& b = node.inputs[1];
  // Work on the matrix forms, then sum over broadcast batch axes and restore vector shapes.
  const Tensor a2 = reshape(a, as_left(a.shape())), b2 = reshape(b, as_right(b.shape()));
  Shape g_shape = broadcast_shapes(batch_axes(a2.shape()), batch_axes(b2.shape()), "matmul");
  g_shape.push_back(a2.shape()[a2.ndim() - 2]);
  g_shape.push_back(b2.shape().back());
  const Tensor g2 = reshape(g, g_shape);
  Tensor ga, gb;
  if (ctx.needs[0]) ga = reshape(sum_to(matmul(g2, swapaxes(b2, -1, -2)), a2.shape()), a.shape());
  if (ctx.needs[1]) gb = reshape(sum_to(matmul(swapaxes(a2, -1, -2), g2), b2.shape()), b.shape());
  return {ga, gb};
}

}  // namespace

const OpDef matmul_op{.name = "matmul", .infer = matmul_type, .forward = matmul_forward, .adjoint = matmul_adjoint};

Tensor matmul(const Tensor& a, const Tensor& b) {
  const DType d = promote(a.dtype(), b.dtype());
  return apply(matmul_op, {astype(a, d), astype(b, d)});
}

}  // namespace vt
