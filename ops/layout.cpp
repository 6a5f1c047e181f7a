// Layout family: reshape, transpose/swapaxes, broadcast_to.
#include "layout.hpp"

#include <numeric>

#include "../core/graph.hpp"
#include "tangent.hpp"
#include "reduce.hpp"

namespace vt {

namespace {

// reshape's and broadcast_to's attribute: the output's shape.
struct ShapeAttrs {
  Shape shape;
  auto fields() { return std::tie(shape); }
};

// transpose's attribute: output axis i is input axis perm[i].
struct PermutationAttrs {
  Shape perm;
  auto fields() { return std::tie(perm); }
};

}  // namespace

const OpDef reshape_op{
    .name = "reshape",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          return ExampleType{in[0].dtype, unpack_attrs<ShapeAttrs>(a).shape};
        },
    .forward = nullptr,
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{reshape(g, n.inputs[0].shape())}; },
    .tangent = linear_tangent,
    .aliases_input = true,
    .integers = true,
    .booleans = true};

Attrs reshape_attrs(const Shape& shape) { return pack_attrs(ShapeAttrs{shape}); }

namespace {

const OpDef transpose_op{.name = "transpose",
                         .inputs = 1,
                         .infer =
                             [](std::span<const ExampleType> in, const Attrs& a) {
                               const Shape perm = unpack_attrs<PermutationAttrs>(a).perm;
                               Shape s(in[0].shape.size());
                               for (std::size_t i = 0; i < s.size(); ++i)
                                 s[i] = in[0].shape[static_cast<std::size_t>(perm[i])];
                               return ExampleType{in[0].dtype, s};
                             },
                         .forward =
                             [](const KernelArgs& k) {
                               // Read the input through permuted strides; the batch axis stays first.
                               const Shape perm = unpack_attrs<PermutationAttrs>(k.attrs).perm;
                               const std::size_t lead = k.lead();
                               View src = k.in[0];
                               for (std::size_t i = 0; i < perm.size(); ++i) {
                                 const auto from = lead + static_cast<std::size_t>(perm[i]);
                                 src.shape[lead + i] = k.in[0].shape[from];
                                 src.strides[lead + i] = k.in[0].strides[from];
                               }
                               k.backend.copy(src, k.out);
                             },
                         .adjoint =
                             [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
                               const Shape perm = unpack_attrs<PermutationAttrs>(n.attrs).perm;
                               std::vector<std::int64_t> inverse(perm.size());
                               for (std::size_t i = 0; i < inverse.size(); ++i)
                                 inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
                               return std::vector<Tensor>{transpose(g, inverse)};
                             },
                         .tangent = linear_tangent,
                         .integers = true,
                         .booleans = true};

}  // namespace
const OpDef broadcast_op{
    .name = "broadcast_to",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          const Shape target = unpack_attrs<ShapeAttrs>(a).shape;
          if (broadcast_shapes(in[0].shape, target, "broadcast_to") != target)
            fail("broadcast_to: cannot broadcast shape {} to {}", to_string(in[0].shape), to_string(target));
          return ExampleType{in[0].dtype, target};
        },
    .forward = [](const KernelArgs& k) { k.backend.copy(expand_view(k.in[0], k.out, k.batched), k.out); },
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{sum_to(g, n.inputs[0].shape())}; },
    .tangent = linear_tangent,
    .integers = true,
    .booleans = true};

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = shape;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) fail("reshape: more than one -1 in {}", to_string(shape));
      infer = static_cast<int>(i);
    } else if (target[i] < 0) {
      fail("reshape: negative dimension in {}", to_string(shape));
    }
  }
  // The known dimensions' product; a zero among them makes it 0 whatever the others ([2^62, 4, 0]).
  Shape known_dims;
  for (auto d : target)
    if (d != -1) known_dims.push_back(d);
  known = checked_numel(known_dims, "reshape");
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      fail("reshape: cannot reshape {} into {}", to_string(x.shape()), to_string(shape));
    target[static_cast<std::size_t>(infer)] = x.numel() / known;
  }
  if (numel(target) != x.numel()) fail("reshape: cannot reshape {} into {}", to_string(x.shape()), to_string(shape));
  if (target == x.shape()) return x;
  return apply(reshape_op, {x}, pack_attrs(ShapeAttrs{target}));
}

Tensor transpose(const Tensor& x) {
  std::vector<std::int64_t> perm(x.ndim());
  std::iota(perm.rbegin(), perm.rend(), 0);
  return transpose(x, perm);
}

Tensor transpose(const Tensor& x, const std::vector<std::int64_t>& perm) {
  if (perm.size() != x.ndim())
    fail("transpose: permutation of {} axes for a tensor of shape {}", perm.size(), to_string(x.shape()));
  std::vector<int> seen(x.ndim(), 0);
  PermutationAttrs a;
  for (auto p : perm) {
    const int axis = normalize_axis(p, x.ndim(), "transpose");
    if (seen[static_cast<std::size_t>(axis)]++) fail("transpose: [{}] is not a permutation", fmt::join(perm, ", "));
    a.perm.push_back(axis);
  }
  bool identity = true;
  for (std::size_t i = 0; i < a.perm.size(); ++i) identity &= a.perm[i] == static_cast<std::int64_t>(i);
  if (identity) return x;
  return apply(transpose_op, {x}, pack_attrs(std::move(a)));
}

Tensor swapaxes(const Tensor& x, std::int64_t a, std::int64_t b) {
  const int ia = normalize_axis(a, x.ndim(), "swapaxes"), ib = normalize_axis(b, x.ndim(), "swapaxes");
  std::vector<std::int64_t> perm(x.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(ia)], perm[static_cast<std::size_t>(ib)]);
  return transpose(x, perm);
}

bool is_matrix_transpose(const OpDef& op, const Attrs& attrs) {
  if (&op != &transpose_op) return false;
  const Shape perm = unpack_attrs<PermutationAttrs>(attrs).perm;
  const std::size_t n = perm.size();
  if (n < 2) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t from = i + 2 < n ? i : (i == n - 1 ? n - 2 : n - 1);
    if (perm[i] != static_cast<std::int64_t>(from)) return false;
  }
  return true;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return apply(broadcast_op, {x}, pack_attrs(ShapeAttrs{shape}));
}

Tensor Tensor::t() const {
  if (ndim() < 2) fail("t: needs a tensor of rank >= 2, got shape {}", to_string(shape()));
  return swapaxes(*this, -1, -2);
}
Tensor Tensor::reshape(const Shape& s) const { return vt::reshape(*this, s); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(reshape_op, "reshape", "shape[]");
VT_REGISTER_OP(transpose_op, "transpose", "perm[]");
VT_REGISTER_OP(broadcast_op, "broadcast_to", "shape[]");

}  // namespace vt
