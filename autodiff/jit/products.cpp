// The rewrites of products and solves (plan.hpp): transposes read as GEMM flags, chains reassociated, captured
// diagonals added inside products, low-rank row sums contracted, repeated solves scaled, indicator products as
// gathers and segment sums. Each states the identity it relies on.
#include <fmt/format.h>

#include <algorithm>
#include <array>
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

bool is_plain_matmul(const PlanIR& plan, const PlanStep& s) {
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
void fold_transposes_into_matmuls(PlanIR& plan) {
  if (plan.device == Device::cpu()) {
    Symmetry symmetric(plan);
    for (PlanStep& s : plan.steps)
      for (int& v : s.in) {
        const PlanStep* t = producer(plan, v);
        if (!t || !is_matrix_transpose(*t->op, t->attrs) || !symmetric(t->in[0])) continue;
        v = t->in[0];
        count_rewrite(plan);
      }
  }
  for (PlanStep& s : plan.steps) {
    if (s.op != &matmul_op) continue;
    MatmulTransposes t = matmul_transposes(s.attrs);
    for (std::size_t side = 0; side < 2; ++side) {
      const PlanStep* transpose = producer(plan, s.in[side]);
      if (!transpose || !is_matrix_transpose(*transpose->op, transpose->attrs)) continue;
      s.in[side] = transpose->in[0];
      (side == 0 ? t.a : t.b) = !(side == 0 ? t.a : t.b);
      count_rewrite(plan);
    }
    s.attrs = matmul_attrs(t);
  }
}

// (P Q) Y -> P (Q Y) and X (Q R) -> (X Q) R when that needs fewer flops by half: the
// cotangents of solves are low-rank products, never worth forming as n x n matrices. Factors may
// be transposed by matmul's flags; (P Q)^T is Q^T P^T. A product of constants is left alone:
// fold_constants computes it once per plan.
void reassociate_matmuls(PlanIR& plan) {
  const std::vector<int> readers = reader_counts(plan);
  const std::vector<bool> fixed = constant_only(plan);
  const auto shape_of = [&](Factor f) {
    const Shape& s = plan.values[static_cast<std::size_t>(f.value)].shape;
    return f.transposed ? Shape{s[1], s[0]} : s;
  };
  std::vector<PlanStep> steps;  // the new list, taking the steps over one by one
  steps.reserve(plan.steps.size());
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep s = std::move(plan.steps[i]);
    for (int side = 0; side < 2 && is_plain_matmul(plan, s); ++side) {
      const MatmulTransposes st = matmul_transposes(s.attrs);
      const int inner = s.in[static_cast<std::size_t>(side)];
      const PlanValue& iv = plan.values[static_cast<std::size_t>(inner)];
      if (iv.kind != PlanValue::Kind::computed || readers[static_cast<std::size_t>(inner)] != 1 ||
          (static_cast<std::size_t>(inner) < fixed.size() && fixed[static_cast<std::size_t>(inner)]))
        continue;
      const PlanStep& m1 = steps[static_cast<std::size_t>(iv.producer)];  // producers index the new list
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

// sum(op(U) W * C, rows) with op(U) n x r, r < n -> sum(W * (op(U)^T C), rows), by sum_i (sum_k U_ik W_kj) C_ij =
// sum_k W_kj (sum_i U_ik C_ij): a low-rank product times a matrix, elementwise times another, summed over rows, as the
// gradient of F diag(p^2) F^T's p has it (op(U) W = A_bar F for a rank-2 A_bar, C = F). Both make n r m products;
// the first then multiplies and adds n m more and writes the n x m product and reads it back with C, the second
// multiplies and adds r m and writes r x m: fewer flops and less memory whenever r < n. Equal up to rounding (the n r
// terms of an entry are added in another order); with non-finite values, as with any reassociation, a result may be NaN
// where eager's is +-Inf (a zero of W times an infinite U^T C), or the reverse. Runs before eliminate_dead_steps, which
// drops the n x m steps, and before merge_common_steps.
void contract_low_rank_row_sums(PlanIR& plan) {
  const Axes rows = {0};
  std::vector<int> readers = reader_counts(plan);
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& total = plan.steps[i];
    if (!is_sum_over(*total.op, total.attrs, rows)) continue;
    const int q = total.in[0];
    const PlanValue qv = value(q);
    const PlanStep* mul = sole_producer(plan, readers, q, mul_op);
    if (!mul || qv.shape.size() != 2 || mul->in.size() != 2 || mul->in[0] == mul->in[1]) continue;
    const auto at = static_cast<std::size_t>(qv.producer);
    const PlanStep times = *mul;  // a copy: the steps change below
    for (std::size_t side = 0; side < 2; ++side) {
      const int p = times.in[side], c = times.in[1 - side];
      const PlanStep* product = sole_producer(plan, readers, p, matmul_op);
      if (!product || value(p).shape != qv.shape || value(c).shape != qv.shape || value(c).dtype != qv.dtype) continue;
      const MatmulTransposes flags = matmul_transposes(product->attrs);
      const int u = product->in[0], w = product->in[1];
      const Shape &us = value(u).shape, &ws = value(w).shape;
      if (flags.b || us.size() != 2 || ws.size() != 2 || value(w).dtype != qv.dtype) continue;
      const std::int64_t rank = flags.a ? us[0] : us[1];
      if (rank >= qv.shape[0] || ws != Shape{rank, qv.shape[1]}) continue;
      const Attrs thin = matmul_attrs({!flags.a, false});
      const Operand ut_c = infer_output(matmul_op, std::array{value(u).operand(), value(c).operand()}, thin);
      if (ut_c.shape != ws || ut_c.dtype != qv.dtype) continue;
      const Operand scaled = infer_output(*times.op, std::array{value(w).operand(), ut_c}, times.attrs);
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
void scale_repeated_solves(PlanIR& plan) {
  const auto value = [&](int v) -> const PlanValue& { return plan.values[static_cast<std::size_t>(v)]; };
  const auto one_number = [&](int v) { return numel(value(v).shape) == 1; };
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].op != &cho_solve_op) continue;
    const PlanStep solve = plan.steps[i];  // a copy: steps and values may grow below
    int b = solve.in[2];
    for (const PlanStep* p = producer(plan, b, reshape_op); p != nullptr; p = producer(plan, b, reshape_op))
      b = p->in[0];
    const PlanStep* made = producer(plan, b);
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
            !(producer(plan, first.in[2], reshape_op) && producer(plan, first.in[2], reshape_op)->in[0] == q))
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
      const Operand scaled = infer_output(mul_op, std::array{as_b, value(s).operand()}, Attrs{});
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
void fold_diagonal_adds(PlanIR& plan) {
  const std::vector<int> readers = reader_counts(plan);
  for (PlanStep& s : plan.steps) {
    if (s.op != &add_op || s.in.size() != 2) continue;
    const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
    for (std::size_t side = 0; side < 2; ++side) {
      const int p = s.in[side], d = s.in[1 - side];
      const PlanValue& pv = plan.values[static_cast<std::size_t>(p)];
      const PlanValue& dv = plan.values[static_cast<std::size_t>(d)];
      const PlanStep* product = p == d ? nullptr : sole_producer(plan, readers, p, matmul_op);
      if (!product || pv.shape != out.shape || pv.batched != out.batched || pv.dtype != dv.dtype || dv.batched ||
          dv.shape.size() > out.shape.size() || !diagonal_constant(dv))
        continue;
      // D's order must be the product's: a 1x1 D broadcasts onto every entry of a larger product.
      const std::size_t r = out.shape.size();
      if (r < 2 || out.shape[r - 1] != dv.shape.back() || out.shape[r - 2] != dv.shape.back()) continue;
      s.in = {product->in[0], product->in[1], d};
      s.attrs = product->attrs;
      s.op = &matmul_add_diagonal_op;
      count_rewrite(plan);
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
void take_indicator_products(PlanIR& plan) {
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
        const Operand taken = infer_output(*op, std::array{value(x).operand(), value(c).operand()}, attrs);
        if (taken.dtype != out.dtype || taken.shape != out.shape || taken.batched != out.batched) continue;
      } catch (const Error&) {
        continue;
      }
      s.op = op;
      s.in = {x, c};
      s.attrs = attrs;
      count_rewrite(plan);
      break;
    }
  }
}

}  // namespace vt::detail
