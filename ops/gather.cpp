// Gather family: take, scatter_add and scatter_set (at(x, i).set), and the `at` helper. The
// segment reductions are in segment.cpp.
#include "gather.hpp"

#include "../core/graph.hpp"
#include "tangent.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "gather_views.hpp"
#include "layout.hpp"

namespace vt {

namespace {

struct AxisAttrs {
  std::int64_t axis;  // normalised: 0 <= axis < rank of x
  auto fields() { return std::tie(axis); }
};

void check_indices(std::string_view op, const ExampleType& indices) {
  if (!is_integer(indices.dtype))
    fail("{}: indices must be int32 or int64, got {} of shape {}; convert them with astype(vt::DType::i64)", op,
         name_of(indices.dtype), to_string(indices.shape));
}

// x.shape[:axis] + indices.shape + x.shape[axis+1:]: what take gives and what scatters take.
Shape taken_shape(const Shape& x, const Shape& indices, std::int64_t axis) {
  Shape s(x.begin(), x.begin() + axis);
  s.insert(s.end(), indices.begin(), indices.end());
  s.insert(s.end(), x.begin() + axis + 1, x.end());
  return s;
}

std::string range_of(const KernelArgs& k, std::size_t axis) {
  return fmt::format("for axis {} of length {}", axis, k.in[0].shape[k.lead() + axis]);
}

}  // namespace

const OpDef take_op{
    .name = "take",
    .inputs = 2,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          check_indices("take", in[1]);
          return ExampleType{in[0].dtype, taken_shape(in[0].shape, in[1].shape, unpack_attrs<AxisAttrs>(a).axis)};
        },
    .forward =
        [](const KernelArgs& k) {
          const auto axis = static_cast<std::size_t>(unpack_attrs<AxisAttrs>(k.attrs).axis);
          const detail::IndexedViews v = detail::indexed_views(k.in[0], k.in[1], k.lead(), axis, true);
          k.backend.gather(v.x, v.indices, v.axis, k.out,
                           detail::index_failure(k, 1, "index", "indices", range_of(k, axis)));
        },
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          const Tensor& x = n.inputs[0];
          const std::int64_t axis = unpack_attrs<AxisAttrs>(n.attrs).axis;
          if (!ctx.needs[0]) return std::vector<Tensor>{Tensor(), Tensor()};
          return std::vector<Tensor>{scatter_add(zeros(x.shape(), g.dtype(), g.device()), n.inputs[1], g, axis),
                                     Tensor()};
        },
    .tangent = linear_tangent,
    .mixed_dtypes = true,
    .integers = true,
    .booleans = true};

Attrs take_attrs(std::int64_t axis) { return pack_attrs(AxisAttrs{axis}); }

namespace {

// x, indices, updates -> x with the updates combined in as Kind says.
ExampleType scatter_type(std::string_view op, std::span<const ExampleType> in, const Attrs& a) {
  check_indices(op, in[1]);
  if (in[2].dtype != in[0].dtype)
    fail("{}: updates are {} but x is {} (internal error: they are converted)", op, name_of(in[2].dtype),
         name_of(in[0].dtype));
  const Shape want = taken_shape(in[0].shape, in[1].shape, unpack_attrs<AxisAttrs>(a).axis);
  if (in[2].shape != want)
    fail("{}: updates of shape {} do not match x[:axis] + indices.shape + x[axis+1:] = {}", op, to_string(in[2].shape),
         to_string(want));
  return in[0];
}

template <ScatterKind Kind>
void scatter_forward(const KernelArgs& k) {
  const auto axis = static_cast<std::size_t>(unpack_attrs<AxisAttrs>(k.attrs).axis);
  // Never in place: the updates or the indices may be x's own buffer, read while out is written.
  k.backend.copy(k.in[0], k.out);
  const detail::IndexedViews v = detail::indexed_views(k.out, k.in[1], k.lead(), axis, true);
  k.backend.scatter(Kind, k.in[2], v.indices, v.axis, v.x,
                    detail::index_failure(k, 1, "index", "indices", range_of(k, axis)));
}

const OpDef scatter_add_op{
    .name = "scatter_add",
    .inputs = 3,
    .infer = [](std::span<const ExampleType> in, const Attrs& a) { return scatter_type("scatter_add", in, a); },
    .forward = scatter_forward<ScatterKind::sum>,
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          const std::int64_t axis = unpack_attrs<AxisAttrs>(n.attrs).axis;
          return std::vector<Tensor>{ctx.needs[0] ? g : Tensor(), Tensor(),
                                     ctx.needs[2] ? take(g, n.inputs[1], axis) : Tensor()};
        },
    .tangent = linear_tangent,
    .mixed_dtypes = true,
    .integers = true};

Tensor scatter_set(const Tensor& x, const Tensor& indices, const Tensor& updates, const Attrs& attrs);

// 1 where an update is kept by scatter_set, 0 where a later one at the same index overwrote it:
// each update's position is written at its index (the last one stays) and read back.
Tensor kept_updates(const Node& n, DType dtype) {
  const Tensor &x = n.inputs[0], &indices = n.inputs[1], &updates = n.inputs[2];
  const std::int64_t count = updates.numel();
  const Tensor position =
      reshape(arange(0, static_cast<double>(count), 1, DType::f64, updates.device()), updates.shape());
  const Tensor last = scatter_set(full(x.shape(), -1.0, DType::f64, x.device()), indices, position, n.attrs);
  return astype(equal(take(last, indices, unpack_attrs<AxisAttrs>(n.attrs).axis), position), dtype);
}

const OpDef scatter_set_op{
    .name = "scatter_set",
    .inputs = 3,
    .infer = [](std::span<const ExampleType> in, const Attrs& a) { return scatter_type("scatter_set", in, a); },
    .forward = scatter_forward<ScatterKind::assign>,
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          const Tensor &indices = n.inputs[1], &updates = n.inputs[2];
          const std::int64_t axis = unpack_attrs<AxisAttrs>(n.attrs).axis;
          Tensor gx, gu;
          if (ctx.needs[0]) gx = scatter_set(g, indices, zeros(updates.shape(), g.dtype(), g.device()), n.attrs);
          if (ctx.needs[2]) gu = take(g, indices, axis) * kept_updates(n, g.dtype());
          return std::vector<Tensor>{gx, Tensor(), gu};
        },
    .tangent = linear_tangent,
    .mixed_dtypes = true,
    .integers = true};

Tensor scatter_set(const Tensor& x, const Tensor& indices, const Tensor& updates, const Attrs& attrs) {
  return apply(scatter_set_op, {x, indices, updates}, attrs);
}

// Whether `from` broadcasts to `to` (numpy rules, `to` unchanged).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (std::size_t i = 1; i <= from.size(); ++i)
    if (from[from.size() - i] != 1 && from[from.size() - i] != to[to.size() - i]) return false;
  return true;
}

// A scatter op on x, with the updates converted to x's dtype and broadcast to take's shape.
Tensor scatter(const OpDef& op, const Tensor& x, const Tensor& indices, Tensor updates, std::int64_t axis) {
  if (!x.defined() || !indices.defined() || !updates.defined())
    fail("{}: x, indices or updates is an undefined tensor", op.name);
  const int ax = normalize_axis(axis, x.ndim(), op.name);
  const Shape want = taken_shape(x.shape(), indices.shape(), ax);
  if (!broadcasts_to(updates.shape(), want))
    fail(
        "{}: updates of shape {} do not match (or broadcast to) x[:axis] + indices.shape + x[axis+1:] = {} "
        "(x {}, indices {}, axis {})",
        op.name, to_string(updates.shape()), to_string(want), to_string(x.shape()), to_string(indices.shape()), ax);
  if (updates.dtype() != x.dtype()) updates = astype(updates, x.dtype());
  if (updates.shape() != want) updates = broadcast_to(updates, want);
  return apply(op, {x, indices, updates}, pack_attrs(AxisAttrs{ax}));
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& indices, std::int64_t axis) {
  if (!x.defined() || !indices.defined()) fail("take: x or indices is an undefined tensor");
  return apply(take_op, {x, indices}, pack_attrs(AxisAttrs{normalize_axis(axis, x.ndim(), "take")}));
}

Tensor scatter_add(const Tensor& x, const Tensor& indices, const Tensor& updates, std::int64_t axis) {
  return scatter(scatter_add_op, x, indices, updates, axis);
}

Tensor At::get() const { return take(x_, indices_, axis_); }
Tensor At::set(const Tensor& values) const { return scatter(scatter_set_op, x_, indices_, values, axis_); }
Tensor At::set(double value) const { return set(full({}, value, x_.dtype(), x_.device())); }
Tensor At::add(const Tensor& values) const { return scatter_add(x_, indices_, values, axis_); }
Tensor At::add(double value) const { return add(full({}, value, x_.dtype(), x_.device())); }

At at(const Tensor& x, const Tensor& indices, std::int64_t axis) { return At(x, indices, axis); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(take_op, "take", "axis");
VT_REGISTER_OP(scatter_add_op, "scatter_add", "axis");
VT_REGISTER_OP(scatter_set_op, "scatter_set", "axis");

}  // namespace vt
