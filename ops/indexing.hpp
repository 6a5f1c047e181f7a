#pragma once
/// @file
/// Indexing family: slices, concatenation, stacking, diagonals and triangles.
#include <optional>
#include <vector>

#include "../core/tensor.hpp"

namespace vt {

/// Elements start, start+step, ... before stop along `axis`, with Python's rules for negative and
/// out-of-range bounds; step > 0.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1);
namespace detail {
/// A window [start, stop) of a per-example axis.
struct SliceWindow {
  std::int64_t axis;   ///< per-example axis
  std::int64_t start;  ///< first index taken
  std::int64_t stop;   ///< one past the last
};
/// concatenate, whose result keeps its pieces (its node) even where nothing records it: a cotangent built so gives
/// concatenate's adjoint its pieces at the same seams, and none where a piece stands for no cotangent.
Tensor concatenate_pieces(const std::vector<Tensor>& pieces, std::int64_t axis);
/// Where `t` is a recorded slice whose elements are contiguous in its input (step 1, or one element): its window;
/// nullopt otherwise.
std::optional<SliceWindow> unit_slice_window(const Tensor& t);
}  // namespace detail
/// Joins tensors along an existing axis (concatenate) or a new one (stack); dtypes are promoted.
Tensor concatenate(const std::vector<Tensor>& xs, std::int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis = 0);
/// numpy's diag: a vector gives a square matrix with it on the diagonal; a matrix gives its
/// main diagonal.
Tensor diag(const Tensor& x);
/// The main diagonal of the last two axes, leading axes kept (numpy.diagonal(x, 0, -2, -1)).
Tensor diagonal(const Tensor& x);
/// The lower (tril) or upper (triu) triangle of the last two axes from the k-th diagonal, the rest 0.
Tensor tril(const Tensor& x, std::int64_t k = 0);
Tensor triu(const Tensor& x, std::int64_t k = 0);

struct OpDef;
/// concatenate's op, which jit's passes recognise by identity.
extern const OpDef concatenate_op;

}  // namespace vt
