// Layout family: reshape, transpose/swapaxes, broadcast_to.
#include "layout.hpp"

#include <numeric>

#include "../core/graph.hpp"
#include "reduce.hpp"

namespace vt {

namespace {

Shape shape_attr(const Attrs& a) { return Shape(a.ints.begin(), a.ints.end()); }

const OpDef reshape_op{"reshape",
                       [](const std::vector<TypeInfo>& in, const Attrs& a) { return TypeInfo{in[0].dtype, shape_attr(a)}; },
                       nullptr,
                       [](const Node& n, const Tensor&, const Tensor& g, const std::vector<bool>&) {
                         return std::vector<Tensor>{reshape(g, n.inputs[0].shape())};
                       },
                       false, /*aliases_input=*/true};

const OpDef transpose_op{"transpose",
                         [](const std::vector<TypeInfo>& in, const Attrs& a) {
                           Shape s(in[0].shape.size());
                           for (std::size_t i = 0; i < s.size(); ++i) s[i] = in[0].shape[static_cast<std::size_t>(a.ints[i])];
                           return TypeInfo{in[0].dtype, s};
                         },
                         [](const KernelArgs& k) {
                           // Read the input through permuted strides; the batch axis stays first.
                           const std::size_t lead = k.batched ? 1 : 0;
                           View src = k.in[0];
                           for (std::size_t i = 0; i < k.attrs.ints.size(); ++i) {
                             const auto from = lead + static_cast<std::size_t>(k.attrs.ints[i]);
                             src.shape[lead + i] = k.in[0].shape[from];
                             src.strides[lead + i] = k.in[0].strides[from];
                           }
                           k.backend.copy(src, k.out);
                         },
                         [](const Node& n, const Tensor&, const Tensor& g, const std::vector<bool>&) {
                           std::vector<std::int64_t> inverse(n.attrs.ints.size());
                           for (std::size_t i = 0; i < inverse.size(); ++i)
                             inverse[static_cast<std::size_t>(n.attrs.ints[i])] = static_cast<std::int64_t>(i);
                           return std::vector<Tensor>{transpose(g, inverse)};
                         }};

const OpDef broadcast_op{"broadcast_to",
                         [](const std::vector<TypeInfo>& in, const Attrs& a) {
                           const Shape target = shape_attr(a);
                           if (broadcast_shapes(in[0].shape, target, "broadcast_to") != target)
                             fail("broadcast_to: cannot broadcast shape {} to {}", to_string(in[0].shape), to_string(target));
                           return TypeInfo{in[0].dtype, target};
                         },
                         [](const KernelArgs& k) { k.backend.copy(expand_view(k.in[0], k.out, k.batched), k.out); },
                         [](const Node& n, const Tensor&, const Tensor& g, const std::vector<bool>&) {
                           return std::vector<Tensor>{sum_to(g, n.inputs[0].shape())};
                         }};

}  // namespace

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
  return apply(reshape_op, {x}, Attrs{target, {}});
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
  Attrs a;
  for (auto p : perm) {
    const int axis = normalize_axis(p, x.ndim(), "transpose");
    if (seen[static_cast<std::size_t>(axis)]++) fail("transpose: [{}] is not a permutation", fmt::join(perm, ", "));
    a.ints.push_back(axis);
  }
  bool identity = true;
  for (std::size_t i = 0; i < a.ints.size(); ++i) identity &= a.ints[i] == static_cast<std::int64_t>(i);
  if (identity) return x;
  return apply(transpose_op, {x}, std::move(a));
}

Tensor swapaxes(const Tensor& x, std::int64_t a, std::int64_t b) {
  const int ia = normalize_axis(a, x.ndim(), "swapaxes"), ib = normalize_axis(b, x.ndim(), "swapaxes");
  std::vector<std::int64_t> perm(x.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(ia)], perm[static_cast<std::size_t>(ib)]);
  return transpose(x, perm);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return apply(broadcast_op, {x}, Attrs{shape, {}});
}

}  // namespace vt
