#pragma once
/// @file
/// Loops and branches, named and shaped as in JAX's lax: scan, fori_loop, while_loop, cond.
///
/// scan(f, init, xs) runs `carry, y = f(carry, x)` for each x along the leading axis of xs (a
/// tensor, or a pair, tuple or vector of them, all of one length T) and returns {final carry, ys},
/// ys stacking every step's y along a new leading axis. The carry and y are a Tensor or a pair,
/// tuple or vector of tensors; the carry keeps its structure and shapes from step to step.
/// scan(f, init, length) passes the step index (an int64 scalar tensor) as x.
///
/// A loop is one op: its body is traced once (into a plan of its own, for every batch size) and
/// run once per step, never unrolled, eagerly as under jit. Tensors the body reads from outside
/// (parameters it closes over) are found by running it once when the loop is called, and become the
/// loop's inputs: gradients reach them, and vmap batches them.
///
/// Reverse mode: scan and fori_loop store the carry of every step (T carries) and run the body's
/// pullback backwards over the steps, itself a scan, so second derivatives work too. while_loop is
/// forward only: its number of steps is not known ahead, and differentiating it raises.
///
/// vmap: a batched carry, x or captured tensor makes every step one batched call over the whole
/// batch. A batched while_loop predicate runs until every example is finished, leaving the finished
/// ones unchanged; a batched or traced cond predicate runs both branches and selects.
///
/// Limits: the carry's and ys' tensors share one floating-point dtype, which xs have too (integer
/// counters come from the step index); loop bounds are C++ integers. A scan of no steps gives its
/// carry and ys of length 0 (its body traced once all the same, for the ys' shapes).
#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/tensor.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/indexing.hpp"
#include "../ops/layout.hpp"
#include "structure.hpp"

namespace vt {

namespace detail {

// A loop's body on flat tensors: (step index, carry [Cc], x [Cx] when there are xs) -> {carry', y}.
using FlatBody = std::function<std::pair<Tensor, Tensor>(const std::vector<Tensor>&)>;

// The loop op over flat tensors: out [T, Cc + Cy], row t = {carry after step t, y of step t}.
// `xs` [T, Cx] or undefined (then the body gets no x). Steps run from last to first when reversed.
Tensor scan_flat(FlatBody body, const Tensor& init, const Tensor& xs, std::int64_t length, std::int64_t first_index,
                 bool reverse, const char* name);
// scan_flat's final carry and ys [length, Cy]. With `every` > 0 (checkpointing), the same steps by
// segments of `every`: a scan over the segments whose body scans one segment, then a scan over the
// steps left, so reverse mode stores the carry before each segment only and recomputes one segment's
// carries at a time.
std::pair<Tensor, Tensor> scan_results(const FlatBody& body, const Tensor& init, const Tensor& xs, std::int64_t length,
                                       std::int64_t first_index, bool reverse, std::int64_t every, const char* name);
// while cond(c): c = body(c), on a flat carry: cond(c) is c's predicate (a scalar, per example), body(c) the next
// carry. The body never runs on a state whose predicate is false, unless another example of the batch goes on.
using FlatMap = std::function<Tensor(const Tensor&)>;
Tensor while_flat(const FlatMap& cond, const FlatMap& body, const Tensor& init);

// A structure's tensors as one flat vector (checked to have `dtype`), and back.
Tensor pack(const std::vector<Tensor>& leaves, DType dtype, Device device, const char* name, const char* what);
// xs' tensors [T, ...] as one [T, Cx] tensor.
Tensor pack_rows(const std::vector<Tensor>& leaves, std::int64_t length, DType dtype, const char* name);
// Tensors of these shapes from a flat vector, or, with rows >= 0, from the columns of a [rows, C]
// tensor (each then [rows, ...shape]).
std::vector<Tensor> unpack(const Tensor& flat, const std::vector<Shape>& shapes, std::int64_t rows = -1);
// The leaves' shapes (per step: without their leading axis).
std::vector<Shape> leaf_shapes(const std::vector<Tensor>& leaves, bool per_step);
DType loop_dtype(const std::vector<Tensor>& carry, const char* name);
std::int64_t loop_length(const std::vector<Tensor>& xs, const char* name);
void check_leaves(const std::vector<Tensor>& got, const std::vector<Shape>& shapes, const char* name, const char* what);
void check_predicate(const Tensor& pred, const char* name);
// A concrete, unbatched predicate's value (false when the predicate is traced or batched).
bool concrete_predicate(const Tensor& pred, bool& value);
Tensor select_branch(const Tensor& pred, const Tensor& on_true, const Tensor& on_false);
// cond over flat results: on_true() where the scalar pred is nonzero, else on_false(), each returning tensors of the
// same types. A concrete unbatched pred runs one branch. A traced or batched one runs both and selects, each branch
// reading every tensor it reads from outside (its operands and what it closes over) masked by the predicate: where
// the branch is not taken, x through stop_gradient, so no derivative reaches x through the branch not taken.
using Branch = std::function<std::vector<Tensor>()>;
std::vector<Tensor> cond_flat(const Tensor& pred, const Branch& on_true, const Branch& on_false);

// What a structured loop learns from its body's first run: the ys' shapes and structure.
template <class Y>
struct YLayout {
  std::vector<Shape> shapes;
  Y like{};
  bool known = false;
};

// scan over structures. x_of(flat args) is the body's x: xs' row (rebuilt) or the step index.
template <class C, class XArg, class F>
auto scan_structured(F f, const C& init, const std::vector<Tensor>& xs_leaves, const XArg& x_like, bool index_x,
                     std::int64_t length, std::int64_t first_index, bool reverse, const char* name,
                     std::int64_t checkpoint_every = 0) {
  using R = decltype(f(init, x_like));
  using Y = std::decay_t<decltype(std::declval<R>().second)>;
  const std::vector<Tensor> init_leaves = flatten(init);
  const DType dtype = loop_dtype(init_leaves, name);
  const std::vector<Shape> carry_shapes = leaf_shapes(init_leaves, false), x_shapes = leaf_shapes(xs_leaves, true);
  auto y_layout = std::make_shared<YLayout<Y>>();
  FlatBody body = [f, init, x_like, index_x, carry_shapes, x_shapes, y_layout, dtype,
                   name](const std::vector<Tensor>& a) {
    const C carry = rebuild(unpack(a[1], carry_shapes), init);
    const XArg x = [&] {
      if constexpr (std::is_same_v<XArg, Tensor>)
        if (index_x) return a[0];
      return rebuild(unpack(a[2], x_shapes), x_like);
    }();
    const R result = f(carry, x);
    const std::vector<Tensor> next = flatten(result.first), ys = flatten(result.second);
    check_leaves(next, carry_shapes, name, "carry");
    if (!y_layout->known) {
      y_layout->shapes = leaf_shapes(ys, false);
      y_layout->like = result.second;
      y_layout->known = true;
    }
    check_leaves(ys, y_layout->shapes, name, "y");
    return std::pair<Tensor, Tensor>{pack(next, dtype, a[1].device(), name, "carry"),
                                     pack(ys, dtype, a[1].device(), name, "y")};
  };
  const Tensor flat_init = pack(init_leaves, dtype, init_leaves[0].device(), name, "carry");
  const Tensor flat_xs = index_x ? Tensor() : pack_rows(xs_leaves, length, dtype, name);
  const auto [final_carry, flat_ys] =
      scan_results(body, flat_init, flat_xs, length, first_index, reverse, checkpoint_every, name);
  C carry = rebuild(unpack(final_carry, carry_shapes), init);
  Y ys = rebuild(unpack(flat_ys, y_layout->shapes, length), y_layout->like);
  return std::pair<C, Y>{std::move(carry), std::move(ys)};
}

}  // namespace detail

/// How a scan runs. `reverse` runs from the last step to the first (ys stay in xs' order).
/// `checkpoint_every` = k > 0: reverse mode stores the carry before every k-th step only and
/// recomputes the k steps after it, one segment at a time, when the gradient needs them: about
/// T / k + k carries held instead of T, for about one more forward pass. (The body's own
/// intermediates are never stored: each step's pullback replays the body from its carry.)
struct ScanOptions {
  bool reverse = false;
  std::int64_t checkpoint_every = 0;
};

/// scan(f, init, xs) -> {final carry, ys}: `f(carry, x)` returns {carry, y} (a std::pair); x is
/// one row of xs (each of xs' tensors indexed along its leading axis).
template <class F, class C, class X>
requires(!std::is_integral_v<X>) auto scan(F f, const C& init, const X& xs, ScanOptions options) {
  const std::vector<Tensor> leaves = detail::flatten(xs);
  return detail::scan_structured(std::move(f), init, leaves, xs, false, detail::loop_length(leaves, "scan"), 0,
                                 options.reverse, "scan", options.checkpoint_every);
}
template <class F, class C, class X>
requires(!std::is_integral_v<X>) auto scan(F f, const C& init, const X& xs, bool reverse = false) {
  return scan(std::move(f), init, xs, ScanOptions{.reverse = reverse});
}

/// scan(f, init, length): as above with the step index (an int64 scalar tensor, 0 to length - 1)
/// as x.
template <class F, class C>
auto scan(F f, const C& init, std::int64_t length, ScanOptions options) {
  return detail::scan_structured(std::move(f), init, {}, Tensor(), true, length, 0, options.reverse, "scan",
                                 options.checkpoint_every);
}
template <class F, class C>
auto scan(F f, const C& init, std::int64_t length, bool reverse = false) {
  return scan(std::move(f), init, length, ScanOptions{.reverse = reverse});
}

/// fori_loop(lo, hi, body, init): val = body(i, val) for i = lo, ..., hi - 1 (i an int64 scalar
/// tensor); init when hi <= lo. Differentiable, as a scan.
template <class F, class C>
C fori_loop(std::int64_t lo, std::int64_t hi, F body, const C& init) {
  if (hi <= lo) return init;
  auto step = [body = std::move(body)](const C& carry, const Tensor& i) {
    return std::pair<C, std::tuple<>>{body(i, carry), {}};
  };
  return detail::scan_structured(std::move(step), init, {}, Tensor(), true, hi - lo, lo, false, "fori_loop").first;
}

/// while_loop(cond, body, init): val = body(val) while cond(val) (a scalar, nonzero meaning
/// true). Forward only. body never runs on a value whose cond is false (the one it exits with);
/// batched, it runs until cond is false for every example, and an example whose cond is false
/// keeps its value (the body runs on it as long as another example goes on, its result unused).
template <class P, class F, class C>
C while_loop(P cond, F body, const C& init) {
  const std::vector<Tensor> init_leaves = detail::flatten(init);
  const DType dtype = detail::loop_dtype(init_leaves, "while_loop");
  const std::vector<Shape> shapes = detail::leaf_shapes(init_leaves, false);
  const auto carry_of = [init, shapes](const Tensor& flat) {
    return detail::rebuild(detail::unpack(flat, shapes), init);
  };
  detail::FlatMap flat_cond = [cond, carry_of](const Tensor& flat) { return Tensor(cond(carry_of(flat))); };
  detail::FlatMap flat_body = [body, carry_of, shapes, dtype](const Tensor& flat) {
    const std::vector<Tensor> next = detail::flatten(body(carry_of(flat)));
    detail::check_leaves(next, shapes, "while_loop", "carry");
    return detail::pack(next, dtype, flat.device(), "while_loop", "carry");
  };
  const Tensor out = detail::while_flat(
      flat_cond, flat_body, detail::pack(init_leaves, dtype, init_leaves[0].device(), "while_loop", "carry"));
  return carry_of(out);
}

/// cond(pred, on_true, on_false, operands...): on_true(operands...) where pred (a scalar) is
/// nonzero, else on_false(operands...); the branches return the same structure and shapes. A
/// concrete unbatched pred runs one branch; a traced (under jit) or batched one runs both and
/// selects each element. No derivative reaches anything through the branch not taken: each branch
/// reads its operands and the tensors it closes over through the predicate (the value where it is
/// taken, the value through stop_gradient elsewhere), so even a non-finite derivative there (sqrt's
/// at 0, in the branch that guards against 0) gives no NaN.
template <class T, class F, class... Operands>
auto cond(const Tensor& pred, T on_true, F on_false, const Operands&... operands) {
  detail::check_predicate(pred, "cond");
  bool value = false;
  if (detail::concrete_predicate(pred, value)) return value ? on_true(operands...) : on_false(operands...);
  using R = decltype(on_true(operands...));
  std::optional<R> first;  // the structure of the results
  const auto flat = [&](auto& branch) -> detail::Branch {
    return [&] {
      R r = branch(operands...);
      std::vector<Tensor> leaves = detail::flatten(r);
      if (!first) first.emplace(std::move(r));
      return leaves;
    };
  };
  const std::vector<Tensor> out = detail::cond_flat(pred, flat(on_true), flat(on_false));
  return detail::rebuild(out, *first);
}

}  // namespace vt
