#pragma once
/// @file
/// Gather and scatter family: take, scatter_add, indexed updates (`at`), and reductions over
/// segments (groups of rows given by integer labels).
///
/// - Indices are int32 or int64 tensors of any shape; a float index tensor is refused (convert it
///   with astype). Negative indices count from the end of the axis, as in numpy. An index out of
///   range raises vt::Error naming the op, the index, its position in the index tensor (and its
///   example, for batched indices) and the axis length. On a GPU the kernel finds it and the
///   error is raised when the op (eager) or the jitted plan ends, as for a failed factorization.
///   Nothing is checked where the result is empty.
/// - Batching: the indexed tensor, the indices and the updates may each be batched or shared by
///   the whole batch (vmap, as_batch), in any combination; under jit, indices may be arguments or
///   captured constants, and one plan serves every batch size.
/// - Gradients flow to floating-point operands (x, updates, data), never to indices.
/// - Cost: proportional to the result (gathers) or to the updates (scatters, segments), never a
///   dense indicator matrix. On the CPU, sums over repeated indices are added in row-major order of
///   the indices (the same bits on every run); the CUDA backend adds with atomics, so a float sum
///   may differ in its last bits from run to run, and segment_max of a segment holding both +0
///   and -0 (or NaNs with different payloads) returns whichever the atomics met first.
#include <cstdint>

#include "../core/tensor.hpp"

namespace vt {

/// numpy.take / jnp.take: the elements of x at `indices` along `axis`. The result has shape
/// x.shape[:axis] + indices.shape + x.shape[axis+1:] (x[indices] for axis 0). Its gradient with
/// respect to x adds the cotangent back at the indices (scatter_add into zeros).
Tensor take(const Tensor& x, const Tensor& indices, std::int64_t axis = 0);

/// x with `updates` added at `indices` along `axis`; repeated indices accumulate. `updates` has the
/// shape take(x, indices, axis) has (or broadcasts to it) and is converted to x's dtype.
/// Gradients: x gets the cotangent g, updates get take(g, indices, axis).
Tensor scatter_add(const Tensor& x, const Tensor& indices, const Tensor& updates, std::int64_t axis = 0);

/// Indexed updates in the spirit of JAX's `x.at[indices]`, along one axis: at(x, i).set(v) is x with
/// v written at i. Nothing is modified in place: each method returns a new tensor. Values have the
/// shape take(x, indices, axis) has (or broadcast to it, so a scalar fills every indexed element)
/// and are converted to x's dtype.
class At {
 public:
  At(Tensor x, Tensor indices, std::int64_t axis) : x_(std::move(x)), indices_(std::move(indices)), axis_(axis) {}
  /// take(x, indices, axis).
  Tensor get() const;
  /// x with `values` written at the indices. Where an index repeats, the value of its last
  /// occurrence in row-major order of the index tensor is kept, on every backend. Gradients: x gets
  /// the cotangent with zeros at the indices; values get the cotangent at their index where they
  /// were kept, 0 where a later occurrence overwrote them. Errors name the op "scatter_set".
  Tensor set(const Tensor& values) const;
  Tensor set(double value) const;
  /// scatter_add(x, indices, values, axis).
  Tensor add(const Tensor& values) const;
  Tensor add(double value) const;

 private:
  Tensor x_, indices_;
  std::int64_t axis_;
};
At at(const Tensor& x, const Tensor& indices, std::int64_t axis = 0);

/// Reductions over segments: `data` [n, ...] is grouped by `segment_ids` [n] (int32 or int64, in
/// any order) into `num_segments` segments, giving [num_segments, ...]. An id outside
/// [0, num_segments) raises vt::Error (JAX drops such rows instead); num_segments must be >= 0.
/// segment_sum: the sum of each segment's rows (0 for an empty segment); its gradient with respect
/// to data is take(g, segment_ids, 0).
Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments);
/// segment_mean: the mean of each segment's rows (0 for an empty segment); of integer data, a
/// float64 result (as vt::mean).
Tensor segment_mean(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments);
/// segment_max: the largest of each segment's rows (-inf for an empty segment, as in JAX; an
/// integer tensor's lowest value for integers). A NaN wins. The gradient goes to the maximal
/// elements, ties sharing it evenly (as vt::max).
Tensor segment_max(const Tensor& data, const Tensor& segment_ids, std::int64_t num_segments);

struct OpDef;
struct Attrs;
/// take and segment_sum themselves, with their attributes (axis normalised: 0 <= axis < rank), for passes that make
/// them by identity (jit takes a product by a captured indicator matrix as one of them).
extern const OpDef take_op, segment_sum_op;
Attrs take_attrs(std::int64_t axis);
Attrs segment_sum_attrs(std::int64_t num_segments);

}  // namespace vt
