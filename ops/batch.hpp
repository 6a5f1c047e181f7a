#pragma once
// Batch family: moving between plain tensors and batched ones, and reducing over the batch.
//
// A batched tensor holds B examples of its per-example shape, stored [B, ...shape()]. Every op
// applies to each example, with unbatched operands broadcast across the batch (no copy). Outside
// vmap, reductions over all axes (sum, mean, max with no axes) also reduce over the batch; with
// explicit axes they name per-example axes. The batch size never enters a jit trace or plan.
#include "../core/tensor.hpp"

namespace vt {

// A plain tensor [B, ...] as a batch of B examples of shape [...] (no copy). Under jit, prefer
// passing batched tensors in: as_batch of a traced plain tensor fixes B in that plan.
Tensor as_batch(const Tensor& x);
// The plain [B, ...] tensor of a batched one (no copy). Not available while jit traces, where B
// is a run-time value.
Tensor unbatch(const Tensor& x);

// Reductions over the batch: per-example shape in, unbatched out (integers as sum, mean and max do).
Tensor batch_sum(const Tensor& x);
Tensor batch_mean(const Tensor& x);
Tensor batch_max(const Tensor& x);  // ties share the gradient evenly

// x (unbatched) repeated for every example of `like`'s batch.
Tensor broadcast_to_batch(const Tensor& x, const Tensor& like);

}  // namespace vt
