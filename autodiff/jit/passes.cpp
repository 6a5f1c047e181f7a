// Rewrites of a built plan, each keeping its results (up to rounding): apart from the builder so
// that a pass can be added or dropped on its own. build_plan runs them before the memory plan,
// which must see the final steps.
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
#include "plan.hpp"

namespace vt::detail {

namespace {

// A value of type t that a pass's new step makes (its producer: the step's index, or renumber_producers).
int add_value(Plan& plan, const Operand& t) {
  plan.values.emplace_back(PlanValue::Kind::computed, t.dtype, t.shape, t.batched);
  return static_cast<int>(plan.values.size()) - 1;
}

// Every step's output's producer, after a pass inserted or replaced steps in place.
void renumber_producers(Plan& plan) {
  for (std::size_t k = 0; k < plan.steps.size(); ++k)
    plan.values[static_cast<std::size_t>(plan.steps[k].out)].producer = static_cast<int>(k);
}

std::vector<int> reader_counts(const Plan& plan) {
  std::vector<int> readers(plan.values.size(), 0);
  for (const PlanStep& s : plan.steps)
    for (int v : s.in) ++readers[static_cast<std::size_t>(v)];
  for (int v : plan.outputs) ++readers[static_cast<std::size_t>(v)];
  return readers;
}

// Whether each value depends on constants only (a constant, or made by a step whose inputs all do):
// what fold_constants computes once per plan.
std::vector<bool> constant_only(const Plan& plan) {
  std::vector<bool> fixed(plan.values.size(), false);
  for (std::size_t v = 0; v < plan.values.size(); ++v)
    fixed[v] = plan.values[v].kind == PlanValue::Kind::constant || plan.values[v].kind == PlanValue::Kind::folded;
  for (const PlanStep& s : plan.steps) {
    bool all = true;
    for (int v : s.in) all = all && fixed[static_cast<std::size_t>(v)];
    fixed[static_cast<std::size_t>(s.out)] = all;
  }
  return fixed;
}

bool is_plain_matmul(const Plan& plan, const PlanStep& s) {
  if (s.op != &matmul_op) return false;
  for (int v : s.in)
    if (plan.values[static_cast<std::size_t>(v)].shape.size() != 2) return false;
  return true;
}

// A factor of a matmul chain: a value, seen transposed or not (matmul's GEMM flags).
struct Factor {
  int value;
  bool transposed;
  Factor flipped() const { return {value, !transposed}; }
};

}  // namespace

// matmul(x.t(), y) -> matmul(x, y) with x's transpose flag flipped (and so on for y): the GEMM
// reads x transposed, and the transposed copy, when nothing else reads it, is a dead step. On the CPU
// also op(..., x.t(), ...) -> op(..., x, ...) for any step, where x is exactly symmetric (Symmetry):
// the same bits, not copied (the symmetric part (dA + dA^T) / 2 that tangent rules take of a
// symmetric dA).
void fold_transposes_into_matmuls(Plan& plan) {
  if (plan.device == Device::cpu()) {
    Symmetry symmetric(plan);
    for (PlanStep& s : plan.steps)
      for (int& v : s.in) {
        const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
        if (pv.kind != PlanValue::Kind::computed) continue;
        const PlanStep& producer = plan.steps[static_cast<std::size_t>(pv.producer)];
        if (!is_matrix_transpose(*producer.op, producer.attrs) || !symmetric(producer.in[0])) continue;
        v = producer.in[0];
        count_rewrite(plan);
      }
  }
  for (PlanStep& s : plan.steps) {
    if (s.op != &matmul_op) continue;
    MatmulTransposes t = matmul_transposes(s.attrs);
    for (std::size_t side = 0; side < 2; ++side) {
      const PlanValue& v = plan.values[static_cast<std::size_t>(s.in[side])];
      if (v.kind != PlanValue::Kind::computed) continue;
      const PlanStep& producer = plan.steps[static_cast<std::size_t>(v.producer)];
      if (!is_matrix_transpose(*producer.op, producer.attrs)) continue;
      s.in[side] = producer.in[0];
      (side == 0 ? t.a : t.b) = !(side == 0 ? t.a : t.b);
      count_rewrite(plan);
    }
    s.attrs = matmul_attrs(t);
  }
}

// op(..., broadcast_to(x, S), ...) -> op(..., x, ...) for an elementwise op, whose kernel broadcasts its operands
// itself, where the step's output keeps its type (S is then still the broadcast of the operands' shapes): the same
// values, read where they are instead of from a copy of S's size, and broadcast_to, when nothing else reads it, is a
// dead step (a per-example number spread over a gradient's rows, in every vmap of value_and_grad). Bitwise.
void fold_broadcasts_into_elementwise(Plan& plan) {
  for (PlanStep& s : plan.steps) {
    if (!s.op->elementwise) continue;
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      const PlanValue& v = plan.values[static_cast<std::size_t>(s.in[k])];
      if (v.kind != PlanValue::Kind::computed) continue;
      const PlanStep& producer = plan.steps[static_cast<std::size_t>(v.producer)];
      if (producer.op != &broadcast_op) continue;
      std::vector<Operand> operands;
      for (std::size_t j = 0; j < s.in.size(); ++j)
        operands.push_back(plan.values[static_cast<std::size_t>(j == k ? producer.in[0] : s.in[j])].operand());
      const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
      try {
        const Operand folded = infer_output(*s.op, operands, s.attrs);
        if (folded.dtype != out.dtype || folded.shape != out.shape || folded.batched != out.batched) continue;
      } catch (const Error&) {
        continue;
      }
      s.in[k] = producer.in[0];
      count_rewrite(plan);
    }
  }
}

// (P Q) Y -> P (Q Y) and X (Q R) -> (X Q) R when that needs fewer flops by half: the
// cotangents of solves are low-rank products, never worth forming as n x n matrices. Factors may
// be transposed by matmul's flags; (P Q)^T is Q^T P^T. A product of constants is left alone:
// fold_constants computes it once per plan.
void reassociate_matmuls(Plan& plan) {
  const std::vector<int> readers = reader_counts(plan);
  const std::vector<bool> fixed = constant_only(plan);
  const auto shape_of = [&](Factor f) {
    const Shape& s = plan.values[static_cast<std::size_t>(f.value)].shape;
    return f.transposed ? Shape{s[1], s[0]} : s;
  };
  std::vector<PlanStep> steps;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep s = plan.steps[i];
    for (int side = 0; side < 2 && is_plain_matmul(plan, s); ++side) {
      const MatmulTransposes st = matmul_transposes(s.attrs);
      const int inner = s.in[static_cast<std::size_t>(side)];
      const PlanValue& iv = plan.values[static_cast<std::size_t>(inner)];
      if (iv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(inner)] != 1 ||
          (static_cast<std::size_t>(inner) < fixed.size() && fixed[static_cast<std::size_t>(inner)]))
        continue;
      const PlanStep m1 = steps[static_cast<std::size_t>(iv.producer)];  // producers index the new list
      if (!is_plain_matmul(plan, m1)) continue;
      const MatmulTransposes t1 = matmul_transposes(m1.attrs);
      // The chain's three factors: side 0, P Q Y; side 1, Y P Q.
      Factor p{m1.in[0], t1.a}, q{m1.in[1], t1.b};
      if (side == 0 ? st.a : st.b) {  // the outer product reads (P Q)^T = Q^T P^T
        const Factor old_p = p;
        p = q.flipped();
        q = old_p.flipped();
      }
      const Factor y{s.in[static_cast<std::size_t>(1 - side)], side == 0 ? st.b : st.a};
      // side 0: (P Q) Y with P [a, k], Q [k, b], Y [b, c]; side 1: Y (P Q) with Y [c, a].
      const Shape ps = shape_of(p), qs = shape_of(q), ys = shape_of(y);
      const double a = static_cast<double>(ps[0]), k = static_cast<double>(ps[1]), b = static_cast<double>(qs[1]);
      const double c = static_cast<double>(side == 0 ? ys[1] : ys[0]);
      const double before = a * k * b + (side == 0 ? a * b * c : c * a * b);
      const double after = side == 0 ? k * b * c + a * k * c : c * a * k + c * k * b;
      if (after * 2 > before) continue;
      // The new inner product, then the outer one in its place.
      const Factor first_left = side == 0 ? q : y, first_right = side == 0 ? y : p;
      const Attrs first_attrs = matmul_attrs({first_left.transposed, first_right.transposed});
      const std::vector<int> first{first_left.value, first_right.value};
      std::vector<Operand> types;
      for (int v : first) types.push_back(plan.values[static_cast<std::size_t>(v)].operand());
      const Operand t = infer_output(*s.op, types, first_attrs);
      const int tid = add_value(plan, t);
      plan.values.back().producer = static_cast<int>(steps.size());
      steps.push_back({s.op, first_attrs, first, tid});
      s.in = side == 0 ? std::vector<int>{p.value, tid} : std::vector<int>{tid, q.value};
      s.attrs = side == 0 ? matmul_attrs({p.transposed, false}) : matmul_attrs({false, q.transposed});
      count_rewrite(plan);
      break;
    }
    plan.values[static_cast<std::size_t>(s.out)].producer = static_cast<int>(steps.size());
    steps.push_back(std::move(s));
  }
  plan.steps = std::move(steps);
}

// The trace merges equal steps as it records them (plan.cpp's Builder). This finds the ones it cannot see: captured
// constants of a few elements with the same bits are one value (a model's several -0.5s), so the steps that read them
// may be equal; and the passes above rewrite steps into equal ones (a moved scaling leaves K_bar * k twice). A step
// equal to an earlier one (op, attributes, inputs so merged) is read as that one; eliminate_dead_steps drops it. A
// collective keeps its step (processes run equally many, whatever their constants hold), and so does a result (its
// readers read the earlier step's value; PlanSummary::merged does not count it).
void merge_common_steps(Plan& plan) {
  // Each small constant's bits are read once (copied from a device once), keyed with its type: linear in their number.
  constexpr std::int64_t most_compared = 16;
  std::vector<int> same(plan.values.size());
  std::unordered_map<std::string, int> constants;
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    same[v] = static_cast<int>(v);
    const PlanValue& pv = plan.values[v];
    if (pv.kind != PlanValue::Kind::constant || pv.batched || numel(pv.shape) > most_compared) continue;
    std::string bits(static_cast<std::size_t>(numel(pv.shape)) * size_of(pv.dtype), '\0');
    if (bits.empty())
      ;  // no bits to read: its dtype and shape are the key
    else if (pv.constant.device() == Device::cpu()) std::memcpy(bits.data(), pv.constant.raw_data(), bits.size());
    else backend_for(pv.constant.device()).to_host(bits.data(), pv.constant.raw_data(), bits.size());
    const std::string key = fmt::format("{}|{}|{}|", static_cast<int>(pv.dtype), fmt::join(pv.shape, ","),
                                        to_string(pv.constant.device())) +
                            bits;
    const auto [it, first] = constants.emplace(key, static_cast<int>(v));
    if (first) continue;
    same[v] = it->second;
    ++plan.summary.merged;
  }
  std::vector<bool> result(plan.values.size(), false);
  for (int v : plan.outputs) result[static_cast<std::size_t>(v)] = true;
  std::unordered_map<std::string, int> made;
  for (PlanStep& s : plan.steps) {
    for (int& v : s.in) v = same[static_cast<std::size_t>(v)];
    if (s.op->collective) continue;
    const auto [it, first] = made.emplace(step_key(s.op, s.attrs, s.in), s.out);
    if (first) continue;
    same[static_cast<std::size_t>(s.out)] = it->second;
    if (!result[static_cast<std::size_t>(s.out)]) ++plan.summary.merged;
  }
}

// Keeps the steps the outputs need, renumbering producers.
void eliminate_dead_steps(Plan& plan) {
  std::vector<bool> live(plan.values.size(), false);
  for (int v : plan.outputs) live[static_cast<std::size_t>(v)] = true;
  for (std::size_t i = plan.steps.size(); i-- > 0;) {
    const PlanStep& s = plan.steps[i];
    if (!live[static_cast<std::size_t>(s.out)]) continue;
    for (int v : s.in) live[static_cast<std::size_t>(v)] = true;
  }
  std::vector<PlanStep> kept;
  for (PlanStep& s : plan.steps) {
    if (!live[static_cast<std::size_t>(s.out)]) {
      plan.values[static_cast<std::size_t>(s.out)].producer = -1;  // no step makes it any more
      continue;
    }
    plan.values[static_cast<std::size_t>(s.out)].producer = static_cast<int>(kept.size());
    kept.push_back(std::move(s));
  }
  plan.steps = std::move(kept);
}

// Steps whose inputs are all constants (or folded values) move to plan.folds, their outputs
// becoming folded values: computed on the plan's first run and kept, never per call, never while
// tracing. Run after the other passes (a reassociated chain may make new products of constants)
// and before the memory plan, which leaves folded values out of the arena.
void fold_constants(Plan& plan) {
  const std::vector<bool> fixed = constant_only(plan);
  std::vector<PlanStep> kept;
  for (PlanStep& s : plan.steps) {
    PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    if (fixed[static_cast<std::size_t>(s.out)]) {
      out.kind = PlanValue::Kind::folded;
      out.producer = static_cast<int>(plan.folds.size());
      plan.folds.push_back(std::move(s));
    } else {
      out.producer = static_cast<int>(kept.size());
      kept.push_back(std::move(s));
    }
  }
  plan.steps = std::move(kept);
}

// Steps fall in four phases: S, unbatched and depending on no batched value (run once, first); E,
// batched, and R, reductions over the batch of E values (run per chunk of examples; an R writes a
// partial result); A, unbatched and reading an R or A value (run once, last, on the combined
// results). Stable-partitioned into S | E R | A, which keeps every step after its inputs. A batched
// step or a reduction that reads an R or A value needs the whole batch's reduction first: such a
// plan runs whole-batch, as does one with a fixed batch size (as_batch and unbatch of a plain
// argument alias the whole batch).
void order_for_chunks(Plan& plan) {
  plan.chunkable = false;
  plan.chunk_begin = plan.chunk_end = 0;
  if (plan.fixed_batch >= 0) return;
  enum class Phase : unsigned char { S, E, R, A };
  std::vector<Phase> phase(plan.values.size(), Phase::S);
  for (std::size_t v = 0; v < plan.values.size(); ++v)
    if (plan.values[v].batched) phase[v] = Phase::E;  // batched arguments and constants
  std::vector<Phase> step_phase;
  std::size_t per_chunk = 0;
  for (const PlanStep& s : plan.steps) {
    bool batched_in = false, reduced_in = false;
    for (int v : s.in) {
      const Phase p = phase[static_cast<std::size_t>(v)];
      batched_in |= p == Phase::E;
      reduced_in |= p == Phase::R || p == Phase::A;
    }
    Phase p;
    if (plan.values[static_cast<std::size_t>(s.out)].batched) {
      if (reduced_in) return;
      p = Phase::E;
    } else if (s.op->reduces_batch) {
      if (reduced_in || !batched_in) return;
      p = Phase::R;
    } else {
      if (batched_in) return;  // an unbatched alias of a batched value
      p = reduced_in ? Phase::A : Phase::S;
    }
    phase[static_cast<std::size_t>(s.out)] = p;
    step_phase.push_back(p);
    per_chunk += p == Phase::E || p == Phase::R ? 1 : 0;
  }
  if (per_chunk == 0) return;
  std::vector<PlanStep> ordered;
  ordered.reserve(plan.steps.size());
  const auto take = [&](auto in_phase) {
    for (std::size_t i = 0; i < plan.steps.size(); ++i)
      if (in_phase(step_phase[i])) {
        plan.values[static_cast<std::size_t>(plan.steps[i].out)].producer = static_cast<int>(ordered.size());
        ordered.push_back(std::move(plan.steps[i]));
      }
  };
  take([](Phase p) { return p == Phase::S; });
  plan.chunk_begin = ordered.size();
  take([](Phase p) { return p == Phase::E || p == Phase::R; });
  plan.chunk_end = ordered.size();
  take([](Phase p) { return p == Phase::A; });
  plan.steps = std::move(ordered);
  plan.chunkable = true;
}

namespace {

// The matrix axis of an operand that its product sums over.
enum class Inner { rows, columns };

// The values X with v = X D (inner = columns) or v = D X (rows), D diagonal: v itself, and through
// mul steps by a factor that is constant along the other matrix axis (a scalar, [k] or [.., 1, k]
// for columns; [.., k, 1] for rows), X of v's matrix shape (leading axes broadcast alike).
void diagonal_scale_bases(const Plan& plan, int v, Inner inner, std::vector<int>& bases, int depth = 0) {
  bases.push_back(v);
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (depth == 4 || pv.kind != PlanValue::Kind::computed) return;
  const PlanStep& s = plan.steps[static_cast<std::size_t>(pv.producer)];
  if (s.op != &mul_op || s.in.size() != 2) return;
  const std::size_t r = pv.shape.size();
  for (std::size_t side = 0; side < 2; ++side) {
    const Shape& x = plan.values[static_cast<std::size_t>(s.in[side])].shape;
    const Shape& d = plan.values[static_cast<std::size_t>(s.in[1 - side])].shape;
    if (x.size() < 2 || x[x.size() - 1] != pv.shape[r - 1] || x[x.size() - 2] != pv.shape[r - 2]) continue;
    const bool diagonal = inner == Inner::columns ? d.size() < 2 || d[d.size() - 2] == 1 : d.empty() || d.back() == 1;
    if (diagonal) diagonal_scale_bases(plan, s.in[side], inner, bases, depth + 1);
  }
}

}  // namespace

namespace {

// v = concatenate(p, q) of two operands of one shape along their last axis: {p, q}; else {-1, -1}.
std::pair<int, int> column_pair(const Plan& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (pv.kind != PlanValue::Kind::computed) return {-1, -1};
  const PlanStep& s = plan.steps[static_cast<std::size_t>(pv.producer)];
  if (s.op != &concatenate_op || s.in.size() != 2) return {-1, -1};
  const Shape& p = plan.values[static_cast<std::size_t>(s.in[0])].shape;
  const Shape& q = plan.values[static_cast<std::size_t>(s.in[1])].shape;
  if (p != q || p.size() < 2 || pv.shape.size() != p.size() || pv.shape.back() != 2 * p.back()) return {-1, -1};
  return {s.in[0], s.in[1]};
}

// A step scaling a value by one number per example: mul by it (either side), div by it, or neg. Its input to scale
// and the factor (-1 for neg); {-1, -1} for any other step.
struct Scaling {
  int scaled = -1, factor = -1;
};

Scaling scaling_of(const Plan& plan, const PlanStep& s) {
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
std::pair<int, int> scaled_by_one_number(const Plan& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (pv.kind != PlanValue::Kind::computed) return {v, -1};
  const PlanStep& s = plan.steps[static_cast<std::size_t>(pv.producer)];
  const Scaling sc = s.op == &mul_op ? scaling_of(plan, s) : Scaling{};
  return sc.scaled < 0 ? std::pair{v, -1} : std::pair{sc.scaled, sc.factor};
}

// a b^T = [P1 P2] [Q1 Q2]^T = P1 Q1^T + P2 Q2^T with P1 = X c, P2 = Y c, Q1 = Y, Q2 = X: X c Y^T + Y c X^T, symmetric
// (c one number, the same in both, or none). The cotangent of cho_solve's A, -(bbar x^T + x bbar^T) / 2.
bool swapped_pair_product(const Plan& plan, int a, int b) {
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
bool symmetric_sandwich(const Plan& plan, Symmetry& symmetric, int a, int b, MatmulTransposes t) {
  for (const bool inner_on_right : {true, false}) {
    const int x = inner_on_right ? a : b, inner = inner_on_right ? b : a;
    const PlanValue& pv = plan.values[static_cast<std::size_t>(inner)];
    if ((inner_on_right ? t.b : t.a) || pv.kind != PlanValue::Kind::computed) continue;
    const PlanStep& s = plan.steps[static_cast<std::size_t>(pv.producer)];
    if (s.op != &matmul_op || s.in.size() != 2) continue;
    const int shared = inner_on_right ? s.in[1] : s.in[0], other = inner_on_right ? s.in[0] : s.in[1];
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
void mark_symmetric_products(Plan& plan) {
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
    if (symmetric) s.attrs = matmul_attrs(t, true);
  }
}

// sum(op(U) W * C, rows) with op(U) n x r, r < n -> sum(W * (op(U)^T C), rows), by sum_i (sum_k U_ik W_kj) C_ij =
// sum_k W_kj (sum_i U_ik C_ij): a low-rank product times a matrix, elementwise times another, summed over rows, as the
// gradient of F diag(p^2) F^T's p has it (op(U) W = A_bar F for a rank-2 A_bar, C = F). Both make n r m products;
// the first then multiplies and adds n m more and writes the n x m product and reads it back with C, the second
// multiplies and adds r m and writes r x m: fewer flops and less memory whenever r < n. Equal up to rounding (the n r
// terms of an entry are added in another order); with non-finite values, as with any reassociation, a result may be NaN
// where eager's is +-Inf (a zero of W times an infinite U^T C), or the reverse. Runs before eliminate_dead_steps, which
// drops the n x m steps, and before merge_common_steps.
void contract_low_rank_row_sums(Plan& plan) {
  const Axes rows = {0};
  std::vector<int> readers = reader_counts(plan);
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& total = plan.steps[i];
    if (!is_sum_over(*total.op, total.attrs, rows)) continue;
    const int q = total.in[0];
    const PlanValue qv = value(q);
    if (qv.kind != PlanValue::Kind::computed || qv.shape.size() != 2 || readers[static_cast<std::size_t>(q)] != 1)
      continue;
    const auto at = static_cast<std::size_t>(qv.producer);
    const PlanStep times = plan.steps[at];
    if (times.op != &mul_op || times.in.size() != 2 || times.in[0] == times.in[1]) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      const int p = times.in[side], c = times.in[1 - side];
      const PlanValue& pv = value(p);
      if (pv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(p)] != 1 || pv.shape != qv.shape ||
          value(c).shape != qv.shape || value(c).dtype != qv.dtype)
        continue;
      const PlanStep& product = plan.steps[static_cast<std::size_t>(pv.producer)];
      if (product.op != &matmul_op) continue;
      const MatmulTransposes flags = matmul_transposes(product.attrs);
      const int u = product.in[0], w = product.in[1];
      const Shape &us = value(u).shape, &ws = value(w).shape;
      if (flags.b || us.size() != 2 || ws.size() != 2 || value(w).dtype != qv.dtype) continue;
      const std::int64_t rank = flags.a ? us[0] : us[1];
      if (rank >= qv.shape[0] || ws != Shape{rank, qv.shape[1]}) continue;
      const Attrs thin = matmul_attrs({!flags.a, false});
      const Operand ut_c = infer_output(matmul_op, {value(u).operand(), value(c).operand()}, thin);
      if (ut_c.shape != ws || ut_c.dtype != qv.dtype) continue;
      const Operand scaled = infer_output(*times.op, {value(w).operand(), ut_c}, times.attrs);
      if (scaled.shape != ws || scaled.dtype != qv.dtype) continue;
      // op(U)^T C where the elementwise product was (C may be made after the first product), then W times it.
      const int ut_c_value = add_value(plan, ut_c), scaled_value = add_value(plan, scaled);
      plan.steps[at] = PlanStep{&matmul_op, thin, {u, c}, ut_c_value};
      plan.values[static_cast<std::size_t>(times.out)].producer = -1;  // no step makes it any more
      plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                        PlanStep{times.op, times.attrs, {w, ut_c_value}, scaled_value});
      ++i;  // the sum, one step down
      plan.steps[i].in[0] = scaled_value;
      renumber_producers(plan);
      readers = reader_counts(plan);
      count_rewrite(plan);
      break;
    }
  }
}

// cho_solve(A, L, s q) -> cho_solve(A, L, q) * s, s one number per example, when the plan already solves against q with
// the same factor: a solve is linear in its right-hand side, A^-1 (s q) = s A^-1 q. The right-hand side is s q as
// mul(q, s) or mul(s, q), or as broadcast_to(s), which is s times a vector of ones: q is then any captured vector of
// ones the plan solves against (the gradient of mean(cho_solve(A, 1)) solves against its cotangent, 1/n broadcast, as
// a column). One pass over the factor less per solve. Equal up to rounding (a product of two
// roundings where the solve rounds its own way).
void scale_repeated_solves(Plan& plan) {
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  const auto producer = [&](int v) -> const PlanStep* {
    const PlanValue& pv = value(v);
    const bool made = pv.kind == PlanValue::Kind::computed && pv.producer >= 0;
    return made ? &plan.steps[static_cast<std::size_t>(pv.producer)] : nullptr;
  };
  const auto one_number = [&](int v) { return numel(value(v).shape) == 1; };
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].op != &cho_solve_op) continue;
    const PlanStep solve = plan.steps[i];  // a copy: steps and values may grow below
    int b = solve.in[2];
    for (const PlanStep* p = producer(b); p != nullptr && p->op == &reshape_op; p = producer(b)) b = p->in[0];
    const PlanStep* made = producer(b);
    if (made == nullptr) continue;
    // b = s q: the scaling s, and q (-1: a vector of ones).
    int s = -1, q = -1;
    if (made->op == &broadcast_op && one_number(made->in[0])) {
      s = made->in[0];
    } else if (made->op == &mul_op && made->in.size() == 2 && made->in[0] != made->in[1]) {
      for (std::size_t side = 0; side < 2 && s < 0; ++side)
        if (one_number(made->in[side]) && !one_number(made->in[1 - side]) &&
            value(made->in[1 - side]).shape == value(b).shape)
          s = made->in[side], q = made->in[1 - side];
    }
    if (s < 0) continue;
    const Operand out = value(solve.out).operand(), rhs = value(solve.in[2]).operand();
    for (std::size_t j = 0; j < i; ++j) {
      const PlanStep& first = plan.steps[j];
      if (first.op != solve.op || first.in[0] != solve.in[0] || first.in[1] != solve.in[1]) continue;
      const Shape first_shape = value(first.in[2]).shape;
      if (q >= 0) {
        // the same q, its shape that of the solve's right-hand side (or as a column)
        if (first.in[2] != q &&
            !(producer(first.in[2]) && producer(first.in[2])->op == &reshape_op && producer(first.in[2])->in[0] == q))
          continue;
      } else if (first_shape.size() != 1 || (rhs.shape != first_shape && rhs.shape != Shape{first_shape[0], 1}) ||
                 !ones_constant(value(first.in[2]))) {
        continue;
      }
      const int against_q = first.out;
      const Operand x = value(against_q).operand();
      if (numel(x.shape) != numel(out.shape)) continue;
      Operand as_b = x;  // the solve against q in b's shape
      as_b.shape = out.shape;
      const Operand scaled = infer_output(mul_op, {as_b, value(s).operand()}, Attrs{});
      if (scaled.shape != out.shape || scaled.dtype != out.dtype || scaled.batched != out.batched) continue;
      int solved = against_q;
      if (x.shape != out.shape) {  // the earlier solve seen in this one's shape (a column, or back from one)
        solved = add_value(plan, Operand{x.dtype, out.shape, x.batched, nullptr});
        plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(i),
                          PlanStep{&reshape_op, reshape_attrs(out.shape), {against_q}, solved});
        ++i;
      }
      plan.steps[i] = PlanStep{&mul_op, Attrs{}, {solved, s}, solve.out};
      renumber_producers(plan);
      count_rewrite(plan);
      break;
    }
  }
}

// matmul(a, b) + D -> matmul_add_diagonal(a, b, D) when D is a captured diagonal matrix (eye(n),
// c I, diag(v)) and the add is the product's only reader: the diagonal goes into the product's
// output in place, n entries instead of an add that reads and writes n^2. D's off-diagonal zeros
// change nothing (x + -0 is x; x + +0 is x but for x = -0, which becomes +0 unfolded and stays -0
// here). The product's symmetry mark is kept: a diagonal keeps it symmetric. Runs after
// mark_symmetric_products, before eliminate_dead_steps (which drops the product's step).
void fold_diagonal_adds(Plan& plan) {
  const std::vector<int> readers = reader_counts(plan);
  for (PlanStep& s : plan.steps) {
    if (s.op != &add_op || s.in.size() != 2) continue;
    const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    for (std::size_t side = 0; side < 2; ++side) {
      const int p = s.in[side], d = s.in[1 - side];
      const PlanValue& pv = plan.values[static_cast<std::size_t>(p)];
      const PlanValue& dv = plan.values[static_cast<std::size_t>(d)];
      if (pv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(p)] != 1 || p == d) continue;
      const PlanStep& product = plan.steps[static_cast<std::size_t>(pv.producer)];
      if (product.op != &matmul_op || pv.shape != out.shape || pv.batched != out.batched || pv.dtype != dv.dtype ||
          dv.batched || dv.shape.size() > out.shape.size() || !diagonal_constant(dv))
        continue;
      // D's order must be the product's: a 1x1 D broadcasts onto every entry of a larger product.
      const std::size_t r = out.shape.size();
      if (r < 2 || out.shape[r - 1] != dv.shape.back() || out.shape[r - 2] != dv.shape.back()) continue;
      s.in = {product.in[0], product.in[1], d};
      s.attrs = product.attrs;
      s.op = &matmul_add_diagonal_op;
      break;
    }
  }
}

// x S -> segment_sum(x, c, n) and x S^T -> take(x, c) for a captured S [k, n] whose row r is 0 but for a 1 in column
// c_r (indicator_columns: which epoch each observation is in, say): (x S)_j = sum_r x_r S_rj adds the x_r of the rows
// in column j, and (x S^T)_r = x_{c_r}; likewise S^T X -> segment_sum(X, c, n) over X's rows, and S X -> take(X, c)
// along them. A gather or a scatter reads and writes k entries per row of x where the product multiplies k n, and the
// plan no longer streams S. Where x is a matrix (x S sums along its rows' last axis, which segment_sum does not) the
// product stays. Equal up to rounding (the segment sum adds its rows in order and no products by zeros), but for
// non-finite x: an Inf or NaN x_r makes the product NaN in every column, the segment sum only in its own. CPU plans: a
// GPU's segment sums add with atomics, in no fixed order. After fold_transposes_into_matmuls (S.t() is a flag there),
// before reassociate_matmuls (which could move S inside a chain).
void take_indicator_products(Plan& plan) {
  std::unordered_map<int, int>
      columns_of;  // by S: the constant of its columns, or -1 for a matrix that is no indicator
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  for (PlanStep& s : plan.steps) {
    if (s.op != &matmul_op || s.in.size() != 2 || s.in[0] == s.in[1]) continue;
    const MatmulTransposes t = matmul_transposes(s.attrs);
    for (std::size_t side = 0; side < 2; ++side) {
      const int S = s.in[side], x = s.in[1 - side];
      const bool s_transposed = side == 0 ? t.a : t.b, x_transposed = side == 0 ? t.b : t.a;
      if (x_transposed || value(S).kind != PlanValue::Kind::constant || value(S).shape.size() != 2) continue;
      auto found = columns_of.find(S);
      if (found == columns_of.end()) {
        const std::vector<std::int64_t> c = indicator_columns(value(S));
        int id = -1;
        if (!c.empty()) {
          const auto k = static_cast<std::int64_t>(c.size());
          plan.values.emplace_back(PlanValue::Kind::constant, DType::i64, Shape{k}, false);
          plan.values.back().constant = Tensor::from_ints(c, {k});
          id = static_cast<int>(plan.values.size()) - 1;
        }
        found = columns_of.emplace(S, id).first;
      }
      const int c = found->second;
      if (c < 0) continue;
      const std::int64_t n = value(S).shape[1];
      const auto rank = static_cast<std::int64_t>(value(x).shape.size());
      const OpDef* op = &take_op;
      Attrs attrs;
      if (side == 1 && !s_transposed) {  // x [k] S
        if (rank != 1) continue;
        op = &segment_sum_op;
        attrs = segment_sum_attrs(n);
      } else if (side == 1) {  // x [.., n] S^T
        attrs = take_attrs(rank - 1);
      } else if (!s_transposed) {  // S X, X [n] or [.., n, m]
        attrs = take_attrs(rank == 1 ? 0 : rank - 2);
      } else {  // S^T X, X [k] or [k, m]
        if (rank > 2) continue;
        op = &segment_sum_op;
        attrs = segment_sum_attrs(n);
      }
      const PlanValue& out = value(s.out);
      try {
        const Operand taken = infer_output(*op, {value(x).operand(), value(c).operand()}, attrs);
        if (taken.dtype != out.dtype || taken.shape != out.shape || taken.batched != out.batched) continue;
      } catch (const Error&) {
        continue;
      }
      s.op = op;
      s.in = {x, c};
      s.attrs = attrs;
      break;
    }
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
void move_scalings_out_of_symmetric_sums(Plan& plan) {
  Symmetry symmetric(plan);
  for (bool moved = true; moved;) {
    moved = false;
    const std::vector<int> readers = reader_counts(plan);
    std::vector<int> reader_of(plan.values.size(), -1);
    for (std::size_t i = 0; i < plan.steps.size(); ++i)
      for (int v : plan.steps[i].in) reader_of[static_cast<std::size_t>(v)] = static_cast<int>(i);
    for (std::size_t i = 0; i < plan.steps.size() && !moved; ++i) {
      const PlanStep scale = plan.steps[i];
      const Scaling sc = scaling_of(plan, scale);
      if (sc.scaled < 0 || !symmetric(sc.scaled) ||
          plan.values[static_cast<std::size_t>(sc.scaled)].shape[0] < min_lower_triangle_order)
        continue;
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
std::vector<bool> values_read_whole(const Plan& plan) {
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

void mark_lower_only_outputs(Plan& plan) {
  const std::vector<bool> whole = values_read_whole(plan);
  for (PlanStep& s : plan.steps) {
    if (whole[static_cast<std::size_t>(s.out)]) continue;
    if ((s.op == &matmul_op || s.op == &matmul_add_diagonal_op) && matmul_symmetric(s.attrs))
      s.attrs = matmul_attrs(matmul_transposes(s.attrs), true, true);
    else if (is_cholesky_factorization(*s.op)) s.attrs = factor_attrs(true);
  }
}

}  // namespace vt::detail
