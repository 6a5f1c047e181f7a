// What rests on symmetry (plan.hpp): which values are exactly symmetric (Symmetry), products marked symmetric,
// scalings moved out of symmetric sums, and upper triangles nobody reads left unwritten.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/backend.hpp"
#include "../../ops/cholesky.hpp"
#include "../../ops/elementwise.hpp"
#include "../../ops/gather.hpp"
#include "../../ops/indexing.hpp"
#include "../../ops/layout.hpp"
#include "../../ops/matmul.hpp"
#include "../../ops/reduce.hpp"
#include "rewrite.hpp"

namespace vt::detail {

namespace {

// The matrix axis of an operand that its product sums over.
enum class Inner { rows, columns };

// The values X with v = X D (inner = columns) or v = D X (rows), D diagonal: v itself, and through
// mul steps by a factor that is constant along the other matrix axis (a scalar, [k] or [.., 1, k]
// for columns; [.., k, 1] for rows), X of v's matrix shape (leading axes broadcast alike).
void diagonal_scale_bases(const PlanIR& plan, int v, Inner inner, std::vector<int>& bases, int depth = 0) {
  bases.push_back(v);
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  const PlanStep* s = depth == 4 ? nullptr : producer(plan, v, mul_op);
  if (!s || s->in.size() != 2) return;
  const std::size_t r = pv.shape.size();
  for (std::size_t side = 0; side < 2; ++side) {
    const Shape& x = plan.values[static_cast<std::size_t>(s->in[side])].shape;
    const Shape& d = plan.values[static_cast<std::size_t>(s->in[1 - side])].shape;
    if (x.size() < 2 || x[x.size() - 1] != pv.shape[r - 1] || x[x.size() - 2] != pv.shape[r - 2]) continue;
    const bool diagonal = inner == Inner::columns ? d.size() < 2 || d[d.size() - 2] == 1 : d.empty() || d.back() == 1;
    if (diagonal) diagonal_scale_bases(plan, s->in[side], inner, bases, depth + 1);
  }
}

// v = concatenate(p, q) of two operands of one shape along their last axis: {p, q}; else {-1, -1}.
std::pair<int, int> column_pair(const PlanIR& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  const PlanStep* s = producer(plan, v, concatenate_op);
  if (!s || s->in.size() != 2) return {-1, -1};
  const Shape& p = plan.values[static_cast<std::size_t>(s->in[0])].shape;
  const Shape& q = plan.values[static_cast<std::size_t>(s->in[1])].shape;
  if (p != q || p.size() < 2 || pv.shape.size() != p.size() || pv.shape.back() != 2 * p.back()) return {-1, -1};
  return {s->in[0], s->in[1]};
}

// A step scaling a value by one number per example: mul by it (either side), div by it, or neg. Its input to scale
// and the factor (-1 for neg); {-1, -1} for any other step.
struct Scaling {
  int scaled = -1, factor = -1;
};

Scaling scaling_of(const PlanIR& plan, const PlanStep& s) {
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  // The scaled value as the scaling's output is: an unbatched matrix scaled per example is not a scaling of it.
  const auto whole = [&](int v) {
    return value(v).shape == value(s.out).shape && value(v).dtype == value(s.out).dtype &&
           value(v).batched == value(s.out).batched;
  };
  if (s.op == &neg_op && s.in.size() == 1) return whole(s.in[0]) ? Scaling{s.in[0], -1} : Scaling{};
  if (s.in.size() != 2 || s.in[0] == s.in[1]) return {};
  const auto one_number = [&](int v) { return numel(value(v).shape) == 1 && value(v).dtype == value(s.out).dtype; };
  if (s.op == &mul_op) {
    for (std::size_t side = 0; side < 2; ++side)
      if (one_number(s.in[1 - side]) && whole(s.in[side])) return {s.in[side], s.in[1 - side]};
  } else if (s.op == &div_op && one_number(s.in[1]) && whole(s.in[0])) {
    return {s.in[0], s.in[1]};
  }
  return {};
}

// v = x c or c x, c one number (scaling_of): {x, c}; else {v, -1}.
std::pair<int, int> scaled_by_one_number(const PlanIR& plan, int v) {
  const PlanStep* s = producer(plan, v, mul_op);
  const Scaling sc = s ? scaling_of(plan, *s) : Scaling{};
  return sc.scaled < 0 ? std::pair{v, -1} : std::pair{sc.scaled, sc.factor};
}

// a b^T = [P1 P2] [Q1 Q2]^T = P1 Q1^T + P2 Q2^T with P1 = X c, P2 = Y c, Q1 = Y, Q2 = X: X c Y^T + Y c X^T, symmetric
// (c one number, the same in both, or none). The cotangent of cho_solve's A, -(bbar x^T + x bbar^T) / 2.
bool swapped_pair_product(const PlanIR& plan, int a, int b) {
  const auto [p1, p2] = column_pair(plan, a);
  const auto [q1, q2] = column_pair(plan, b);
  if (p1 < 0 || q1 < 0) return false;
  const auto [x, c] = scaled_by_one_number(plan, p1);
  const auto [y, d] = scaled_by_one_number(plan, p2);
  return x == q2 && y == q1 && (c == d || (c >= 0 && d >= 0 && same_constant_values(plan, c, d, false, 1)));
}

// op(a) op(b) = X (S X) or (X S) X with X and S symmetric matrices (Symmetry), the inner product read
// untransposed (its op(S) op(X) is S X whatever its own flags): X S X, symmetric. The derivative of an
// inverse, -X dA X.
bool symmetric_sandwich(const PlanIR& plan, Symmetry& symmetric, int a, int b, MatmulTransposes t) {
  for (const bool inner_on_right : {true, false}) {
    const int x = inner_on_right ? a : b, inner = inner_on_right ? b : a;
    const PlanStep* s = producer(plan, inner, matmul_op);
    if ((inner_on_right ? t.b : t.a) || !s || s->in.size() != 2) continue;
    const int shared = inner_on_right ? s->in[1] : s->in[0], other = inner_on_right ? s->in[0] : s->in[1];
    if (shared == x && symmetric(x) && symmetric(other)) return true;
  }
  return false;
}

}  // namespace

// matmul(a, b) whose op(a) op(b) is X D1 D2 X^T (D1, D2 diagonal or absent), X c Y^T + Y c X^T
// (swapped_pair_product), or X S X (symmetric_sandwich) is marked symmetric:
// the backend may compute one triangle, about half the flops, and mirror it. By
// diagonal_scale_bases, op(a) = op(X) D1 and op(b) = D2 op(Y); the product is symmetric when
// op(Y) = op(X)^T: Y is X read with the opposite flag, or a captured constant holding those values.
// Runs after the passes that rebuild matmuls' attributes (fold_transposes_into_matmuls,
// reassociate_matmuls).
void mark_symmetric_products(PlanIR& plan) {
  Symmetry symmetric_value(plan);  // marks below only turn answers to true: one left false is safe
  std::vector<int> left, right;
  for (PlanStep& s : plan.steps) {
    if (s.op != &matmul_op || matmul_symmetric(s.attrs)) continue;
    const PlanValue& a = plan.values[static_cast<std::size_t>(s.in[0])];
    const PlanValue& b = plan.values[static_cast<std::size_t>(s.in[1])];
    if (a.shape.size() < 2 || b.shape.size() < 2) continue;
    const MatmulTransposes t = matmul_transposes(s.attrs);
    left.clear();
    right.clear();
    diagonal_scale_bases(plan, s.in[0], t.a ? Inner::rows : Inner::columns, left);
    diagonal_scale_bases(plan, s.in[1], t.b ? Inner::columns : Inner::rows, right);
    bool symmetric = false;
    for (int x : left)
      for (int y : right)
        // Constants of at most 2^18 elements (2 MiB of float64) are compared, a bound on the compile's reading of
        // captured data; larger ones stay full GEMMs.
        symmetric = symmetric || (x == y ? t.a != t.b : same_constant_values(plan, x, y, t.a == t.b, 1 << 18));
    if (!symmetric && !t.a && t.b) symmetric = swapped_pair_product(plan, s.in[0], s.in[1]);
    if (!symmetric) symmetric = symmetric_sandwich(plan, symmetric_value, s.in[0], s.in[1], t);
    if (!symmetric) continue;
    s.attrs = matmul_attrs(t, true);
    count_rewrite(plan);
  }
}

// On the CPU, a sum over a symmetric matrix of order min_lower_triangle_order or more already adds in its own order
// (fuse.cpp: one triangle, the entries below the diagonal twice), so it may as well be reassociated: a scaling by one
// number per example (a hyperparameter, a constant, a sign) of such a matrix that reaches a sum to one number through
// products, quotients (as the dividend) and negations, each the only reader of the value before it, is applied to the
// sum instead: sum(c (x / s) y) becomes c / s sum(x y), one pass over n^2 elements saved per scaling, a division among
// them. The gradient contractions of a kernel's hyperparameters are such sums. Values change by rounding only, but for
// non-finite ones (an Inf factor times a zero sum is NaN where eager may give +-Inf, and the reverse), as with matmul
// reassociation; matrices, and sums of matrices that are not symmetric, keep their bits. Rescans the plan after each
// move (a few dozen moves at most in a kernel's gradient). Before eliminate_dead_steps, which drops the scalings moved.
void move_scalings_out_of_symmetric_sums(PlanIR& plan) {
  Symmetry symmetric(plan);
  for (bool moved = true; moved;) {
    moved = false;
    const std::vector<int> readers = reader_counts(plan);
    std::vector<int> reader_of(plan.values.size(), -1);
    for (std::size_t i = 0; i < plan.steps.size(); ++i)
      for (int v : plan.steps[i].in) reader_of[static_cast<std::size_t>(v)] = static_cast<int>(i);
    for (std::size_t i = 0; i < plan.steps.size() && !moved; ++i) {
      const Scaling sc = scaling_of(plan, plan.steps[i]);
      if (sc.scaled < 0 || !symmetric(sc.scaled) ||
          plan.values[static_cast<std::size_t>(sc.scaled)].shape[0] < min_lower_triangle_order)
        continue;
      const PlanStep scale = plan.steps[i];  // a copy: the steps move below
      // The chain from the scaled value to its sum, each step its value's only reader.
      std::size_t first = 0, sum = 0;
      for (int v = scale.out;;) {
        const auto u = static_cast<std::size_t>(v);
        if (readers[u] != 1 || reader_of[u] < 0) break;
        const PlanStep& r = plan.steps[static_cast<std::size_t>(reader_of[u])];
        if (first == 0) first = static_cast<std::size_t>(reader_of[u]);
        if (std::count(r.in.begin(), r.in.end(), v) != 1) break;
        const PlanValue& out = plan.values[static_cast<std::size_t>(r.out)];
        if (r.op == &sum_op && numel(out.shape) == 1 && !r.op->reduces_batch && out.dtype == plan.values[u].dtype) {
          sum = static_cast<std::size_t>(reader_of[u]);
          break;
        }
        const bool linear = r.op == &neg_op || r.op == &mul_op || (r.op == &div_op && r.in[0] == v);
        if (!linear || out.shape != plan.values[u].shape || out.batched != plan.values[u].batched ||
            out.dtype != plan.values[u].dtype)
          break;
        v = r.out;
      }
      // Only sums of symmetric matrices: the others add in the reduce kernel's order, bitwise eager.
      if (sum == 0 || !symmetric(plan.steps[sum].in[0])) continue;
      // The scaling applied to the sum, into the sum's value; the sum into a new one.
      const Operand total = plan.values[static_cast<std::size_t>(plan.steps[sum].out)].operand();
      // The factor, reshaped to the sum's shape if need be (a [1] hyperparameter onto a [] sum).
      const bool reshaped = sc.factor >= 0 && plan.values[static_cast<std::size_t>(sc.factor)].shape != total.shape;
      Operand factor = sc.factor >= 0 ? plan.values[static_cast<std::size_t>(sc.factor)].operand() : Operand{};
      if (reshaped) factor.shape = total.shape;
      std::vector<Operand> types;
      for (int v : scale.in) types.push_back(v == sc.scaled ? total : factor);
      const Operand result = infer_output(*scale.op, types, scale.attrs);
      if (result.shape != total.shape || result.batched != total.batched || result.dtype != total.dtype) continue;
      std::vector<PlanStep> added;  // after the sum: the factor's reshape, the scaling
      PlanStep outer = scale;
      outer.out = plan.steps[sum].out;
      if (reshaped) {
        added.push_back(PlanStep{&reshape_op, reshape_attrs(total.shape), {sc.factor}, add_value(plan, factor)});
        for (int& v : outer.in)
          if (v == sc.factor) v = added.back().out;
      }
      const int unscaled_total = add_value(plan, total);
      for (int& v : outer.in)
        if (v == sc.scaled) v = unscaled_total;
      added.push_back(outer);
      plan.steps[sum].out = unscaled_total;
      for (int& v : plan.steps[first].in)
        if (v == scale.out) v = sc.scaled;
      plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(sum) + 1, added.begin(), added.end());
      renumber_producers(plan);
      count_rewrite(plan);
      moved = true;
    }
  }
}

bool Symmetry::operator()(int v) {
  // Sized once per growth of the plan, before any recursion: `known` stays valid across the recursive calls below.
  if (memo_.size() < plan_.values.size()) memo_.resize(plan_.values.size(), -1);
  signed char& known = memo_[static_cast<std::size_t>(v)];
  if (known >= 0) return known != 0;
  known = 0;
  const PlanValue& pv = plan_.values[static_cast<std::size_t>(v)];
  if (pv.shape.size() != 2 || pv.shape[0] != pv.shape[1] || pv.shape[0] < 2) return false;
  if (pv.kind == PlanValue::Kind::constant) return (known = symmetric_constant(pv) ? 1 : 0) != 0;
  const PlanStep* step = nullptr;
  if (pv.kind == PlanValue::Kind::computed) step = &plan_.steps[static_cast<std::size_t>(pv.producer)];
  if (pv.kind == PlanValue::Kind::folded) step = &plan_.folds[static_cast<std::size_t>(pv.producer)];
  if (step == nullptr || step->op->aliases_input || step->out != v) return false;
  if ((step->op == &matmul_op || step->op == &matmul_add_diagonal_op) && matmul_symmetric(step->attrs) &&
      !matmul_lower_only(step->attrs))
    return (known = 1) != 0;
  if (step->op == &cholesky_inverse_op) return (known = 1) != 0;
  if (is_matrix_transpose(*step->op, step->attrs)) {
    const bool transposed_symmetric = (*this)(step->in[0]);  // the same bits, read across
    memo_[static_cast<std::size_t>(v)] = transposed_symmetric ? 1 : 0;
    return transposed_symmetric;
  }
  if (!step->op->elementwise) return false;
  for (int u : step->in)
    if (numel(plan_.values[static_cast<std::size_t>(u)].shape) != 1 && !(*this)(u)) return false;
  memo_[static_cast<std::size_t>(v)] = 1;
  return true;
}

bool reads_lower_triangle_only(const PlanStep& s, std::size_t k) {
  if (s.op->aliases_input) return false;
  return (s.op->handle_inputs >> k & 1u) || (s.op->lower_triangle_inputs >> k & 1u);
}

// Values whose upper triangle nobody reads are left unwritten there: a symmetric product
// (mark_symmetric_products) is not mirrored, a Cholesky factor's upper triangle not zeroed (a tenth
// of the factorization's time at order 256, cache lines it never touches otherwise). A value
// qualifies when every reader reads only the lower triangle (OpDef::lower_triangle_inputs: a
// factorization's A, a solve's or logdet's factor) or holds it as a handle, through aliases of the
// same shape (stop_gradient); any other reader, or the value being a result, keeps it whole. Runs
// after eliminate_dead_steps, so that the readers are the plan's own.
std::vector<bool> values_read_whole(const PlanIR& plan) {
  std::vector<bool> whole(plan.values.size(), false);
  for (int v : plan.outputs) whole[static_cast<std::size_t>(v)] = true;
  for (const auto* steps : {&plan.folds, &plan.steps})
    for (const PlanStep& s : *steps)
      for (std::size_t k = 0; k < s.in.size(); ++k)
        if (!s.op->aliases_input && !reads_lower_triangle_only(s, k)) whole[static_cast<std::size_t>(s.in[k])] = true;
  // An alias is read as its input is: back to front, so that chains of aliases pass it on.
  for (const auto* steps : {&plan.steps, &plan.folds})
    for (auto s = steps->rbegin(); s != steps->rend(); ++s) {
      if (!s->op->aliases_input) continue;
      const PlanValue &in = plan.values[static_cast<std::size_t>(s->in[0])],
                      &out = plan.values[static_cast<std::size_t>(s->out)];
      if (whole[static_cast<std::size_t>(s->out)] || in.shape != out.shape || in.batched != out.batched)
        whole[static_cast<std::size_t>(s->in[0])] = true;
    }
  return whole;
}

void mark_lower_only_outputs(PlanIR& plan) {
  const std::vector<bool> whole = values_read_whole(plan);
  for (PlanStep& s : plan.steps) {
    if (whole[static_cast<std::size_t>(s.out)]) continue;
    Attrs lower_only;
    if ((s.op == &matmul_op || s.op == &matmul_add_diagonal_op) && matmul_symmetric(s.attrs))
      lower_only = matmul_attrs(matmul_transposes(s.attrs), true, true);
    else if (is_cholesky_factorization(*s.op)) lower_only = factor_attrs(true);
    else continue;
    if (lower_only == s.attrs) continue;
    s.attrs = std::move(lower_only);
    count_rewrite(plan);
  }
}

}  // namespace vt::detail
