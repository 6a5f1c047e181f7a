// Segment reductions: segment_sum, segment_mean, segment_max. Each is one scatter of the rows of
// data into a fresh [num_segments, ...] result (the kernels of ops/gather.cpp's scatters).
#include <cmath>

#include "../core/graph.hpp"
#include "tangent.hpp"
#include "creation.hpp"
#include "elementwise.hpp"
#include "gather.hpp"
#include "gather_views.hpp"
#include "layout.hpp"

namespace vt {

namespace {

struct SegmentAttrs {
  std::int64_t num_segments;
  auto fields() { return std::tie(num_segments); }
};

// data [n, ...], segment_ids [n] -> [num_segments, ...]
ExampleType segment_type(std::string_view op, std::span<const ExampleType> in, const Attrs& a) {
  const ExampleType &data = in[0], &ids = in[1];
  const std::int64_t segments = unpack_attrs<SegmentAttrs>(a).num_segments;
  if (!is_integer(ids.dtype))
    fail("{}: segment_ids must be int32 or int64, got {}; convert them with astype(vt::DType::i64)", op,
         name_of(ids.dtype));
  if (data.shape.empty()) fail("{}: data must have a leading axis of rows to group, got a scalar", op);
  if (ids.shape != Shape{data.shape[0]})
    fail("{}: segment_ids must have shape [{}], one id per row of data of shape {}; got shape {}", op, data.shape[0],
         to_string(data.shape), to_string(ids.shape));
  if (segments < 0) fail("{}: num_segments must be >= 0, got {}", op, segments);
  Shape s = data.shape;
  s[0] = segments;
  return {data.dtype, s};
}

// The result starts at `initial` everywhere (what an empty segment gives), then every row of data
// is combined into its segment's row.
template <ScatterKind Kind>
void segment_forward(const KernelArgs& k) {
  k.backend.fill(k.out, Kind == ScatterKind::sum ? 0.0 : -INFINITY);  // -inf saturates to an integer's lowest
  const detail::IndexedViews v = detail::indexed_views(k.out, k.in[1], k.lead(), 0, false);
  k.backend.scatter(Kind, k.in[0], v.indices, v.axis, v.x,
                    detail::index_failure(k, 1, "segment id", "segment_ids", fmt::format("[0, {})", v.axis.length)));
}

std::int64_t segments_of(const Node& n) { return unpack_attrs<SegmentAttrs>(n.attrs).num_segments; }

}  // namespace

const OpDef segment_sum_op{
    .name = "segment_sum",
    .inputs = 2,
    .infer = [](std::span<const ExampleType> in, const Attrs& a) { return segment_type("segment_sum", in, a); },
    .forward = segment_forward<ScatterKind::sum>,
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          return std::vector<Tensor>{ctx.needs[0] ? take(g, n.inputs[1], 0) : Tensor(), Tensor()};
        },
    .tangent = linear_tangent,
    .mixed_dtypes = true,
    .integers = true};

Attrs segment_sum_attrs(std::int64_t num_segments) { return pack_attrs(SegmentAttrs{num_segments}); }

namespace {

const OpDef segment_max_op{
    .name = "segment_max",
    .inputs = 2,
    .infer = [](std::span<const ExampleType> in, const Attrs& a) { return segment_type("segment_max", in, a); },
    .forward = segment_forward<ScatterKind::max>,
    .adjoint =
        [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext& ctx) {
          if (!ctx.needs[0]) return std::vector<Tensor>{Tensor(), Tensor()};
          // As vt::max: the maximal elements of each segment share its cotangent evenly.
          const Tensor &data = n.inputs[0], &ids = n.inputs[1];
          const Tensor hit = astype(equal(data, take(y, ids, 0)), data.dtype());
          const Tensor count = segment_sum(hit, ids, segments_of(n));
          return std::vector<Tensor>{take(g, ids, 0) * hit / take(count, ids, 0), Tensor()};
        },
    // As max's: the maximal elements' tangents, averaged over ties; 0 for an empty segment.
    .tangent =
        [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
          const Tensor &data = n.inputs[0], &ids = n.inputs[1];
          const Tensor hit = astype(equal(data, take(y, ids, 0)), data.dtype());
          const Tensor count = segment_sum(hit, ids, segments_of(n));
          return segment_sum(t[0] * hit, ids, segments_of(n)) / maximum(count, ones({}, y.dtype(), y.device()));
        },
    .mixed_dtypes = true,
    .integers = true};

Tensor segment(const OpDef& op, const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments) {
  return apply(op, {data, segment_ids}, pack_attrs(SegmentAttrs{num_segments}));
}

}  // namespace

Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments) {
  return segment(segment_sum_op, data, segment_ids, num_segments);
}

Tensor segment_max(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments) {
  return segment(segment_max_op, data, segment_ids, num_segments);
}

Tensor segment_mean(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments) {
  const Tensor total = segment_sum(data, segment_ids, num_segments);  // checks the arguments
  const Tensor rows = ones({data.shape()[0]}, data.dtype(), data.device());
  const Tensor count = maximum(segment_sum(rows, segment_ids, num_segments), ones({}, data.dtype(), data.device()));
  Shape per_row(total.ndim(), 1);  // the count of each segment, broadcast along its row
  per_row[0] = num_segments;
  return total / reshape(count, per_row);
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(segment_sum_op, "segment_sum", "num_segments");
VT_REGISTER_OP(segment_max_op, "segment_max", "num_segments");

}  // namespace vt
