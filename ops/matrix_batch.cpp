#include "matrix_batch.hpp"

#include "layout.hpp"

namespace vt {

MatrixOperand matrix_operand(Backend& be, const View& v, const Shape& batch, std::int64_t rows, std::int64_t cols,
                             std::shared_ptr<Storage>& scratch, bool lead) {
  // v's leading axes right-aligned against batch (after the vmap axis, when `lead`), then the
  // matrix axes.
  Shape shape = batch, strides(batch.size(), 0);
  const std::size_t first = lead ? 1 : 0;
  if (lead) strides[0] = v.strides[0];
  const std::size_t vb = v.shape.size() - 2;
  for (std::size_t i = first; i < vb; ++i) {
    const std::size_t d = batch.size() - vb + i;
    strides[d] = v.shape[i] == batch[d] ? v.strides[i] : 0;
  }
  const std::int64_t mat = rows * cols;
  bool all_zero = true, contiguous = true;
  std::int64_t expect = mat;
  for (std::size_t d = batch.size(); d-- > 0;) {
    all_zero &= strides[d] == 0 || batch[d] == 1;
    contiguous &= strides[d] == expect || batch[d] == 1;
    expect *= batch[d];
  }
  if (all_zero) return {v.data, 0};
  if (contiguous) return {v.data, mat};
  shape.push_back(rows);
  shape.push_back(cols);
  strides.push_back(v.strides[v.strides.size() - 2]);
  strides.push_back(v.strides.back());
  scratch = std::make_shared<Storage>(be.device(), static_cast<std::size_t>(numel(shape)) * size_of(v.dtype));
  be.copy(View{v.dtype, v.data, shape, strides}, View{v.dtype, scratch->data, shape, contiguous_strides(shape)});
  return {scratch->data, mat};
}

void check_square(std::string_view op, const Shape& shape) {
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
    fail("{}: needs square matrices [..., n, n], got shape {}", op, to_string(shape));
}

void check_factor(std::string_view op, const ExampleType& a, const ExampleType& l) {
  if (a.shape != l.shape)
    fail("{}: factor of shape {} for matrices of shape {}", op, to_string(l.shape), to_string(a.shape));
}

ExampleType solve_type(std::string_view op, const ExampleType& t, const ExampleType& b) {
  const Shape& ts = t.shape;
  check_square(op, ts);
  const std::int64_t n = ts.back();
  const bool vector = b.shape.size() == 1;
  if (b.shape.empty() || b.shape[vector ? 0 : b.shape.size() - 2] != n)
    fail("{}: right-hand side of shape {} does not match matrices of shape {} (needs [{}] or [..., {}, k])", op,
         to_string(b.shape), to_string(ts), n, n);
  Shape out = broadcast_shapes(batch_axes(ts), vector ? Shape{} : batch_axes(b.shape), op);
  out.push_back(n);
  if (!vector) out.push_back(b.shape.back());
  return {t.dtype, out};
}

SolveLayout solve_layout(const KernelArgs& a, std::size_t t_input, std::size_t b_input) {
  const std::size_t lead = a.lead();
  const View& t = a.in[t_input];
  const std::int64_t n = t.shape.back();
  const bool vector = a.in[b_input].shape.size() - lead == 1;
  Shape batch(a.out.shape.begin(), a.out.shape.end() - (vector ? 1 : 2));
  const std::int64_t k = vector ? 1 : a.out.shape.back();
  Shape matrices = batch;
  matrices.push_back(n);
  matrices.push_back(k);
  a.backend.copy(expand_view(a.in[b_input], a.out, a.batched), a.out);
  return {reshaped_view(a.out, matrices), batch, n, k};
}

MatrixLocation locate_matrix(const Shape& lead, bool batched, std::int64_t flat, std::int64_t first_example,
                             std::int64_t whole_batch) {
  Shape index(lead.size());
  for (std::size_t d = lead.size(), rest = static_cast<std::size_t>(flat); d-- > 0;) {
    index[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(lead[d]));
    rest /= static_cast<std::size_t>(lead[d]);
  }
  const auto matrix = [](const Shape& at, const Shape& of) {
    return of.size() == 1 ? fmt::format("matrix {} of the batch {}", at[0], to_string(of))
                          : fmt::format("matrix {} of the batch {}", to_string(at), to_string(of));
  };
  if (batched) {
    const Shape within(index.begin() + 1, index.end()), stack(lead.begin() + 1, lead.end());
    const std::int64_t example = first_example + index[0];
    return {fmt::format("example {} of the batch of {}{}", example, whole_batch < 0 ? lead[0] : whole_batch,
                        within.empty() ? std::string() : fmt::format(" ({})", matrix(within, stack))),
            static_cast<long>(example)};
  }
  return {lead.empty() ? std::string("the matrix") : matrix(index, lead), static_cast<long>(flat)};
}

Tensor as_columns(const Tensor& x) {
  Shape s = x.shape();
  s.push_back(1);
  return reshape(x, s);
}

}  // namespace vt
