#pragma once
/// @file
/// Batch family: moving between plain tensors and batched ones, and reducing over the batch.
///
/// A batched tensor holds B examples of its per-example shape, stored [B, ...shape()]. Every op
/// applies to each example, with unbatched operands broadcast across the batch (no copy). Outside
/// vmap, reductions over all axes (sum, mean, max with no axes) also reduce over the batch; with
/// explicit axes they name per-example axes. The batch size never enters a jit trace or plan.
#include <optional>

#include "../core/tensor.hpp"

namespace vt {

struct OpDef;
struct Attrs;

/// A plain tensor [B, ...] as a batch of B examples of shape [...] (no copy). Under jit, as_batch
/// (or vmap) of a plain argument fixes B in that plan: B is part of the argument's shape, which is in
/// jit's cache key, so another B traces again. Passing batched tensors in avoids that.
Tensor as_batch(const Tensor& x);
/// The plain [B, ...] tensor of a batched one (no copy). Not available while jit traces, where B
/// is a run-time value.
Tensor unbatch(const Tensor& x);

/// Reductions over the batch: per-example shape in, unbatched out (integers as sum, mean and max do).
Tensor batch_sum(const Tensor& x);
Tensor batch_mean(const Tensor& x);
Tensor batch_max(const Tensor& x);  ///< ties share the gradient evenly

/// x (unbatched) repeated for every example of `like`'s batch.
Tensor broadcast_to_batch(const Tensor& x, const Tensor& like);

namespace detail {
// The batch size a jit plan's step fixes (as_batch or unbatch of a traced plain tensor), else -1.
std::int64_t fixed_batch(const OpDef& op, const Attrs& attrs);
// x's batch size where it is known: a concrete batched tensor's, or while jit traces, that of a
// plain tensor made a batch (as_batch of a traced plain tensor). Nothing for an argument's batch.
std::optional<std::int64_t> known_batch_size(const Tensor& x);
// unbatch(x), where x is in the batch of `like` (vmap's results): while jit traces, possible when
// like's batch size is known (see known_batch_size).
Tensor unbatch_like(const Tensor& x, const Tensor& like);
}  // namespace detail

}  // namespace vt
