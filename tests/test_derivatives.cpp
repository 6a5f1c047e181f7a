// jvp, jacrev, jacfwd, hessian and hvp (autodiff/derivatives.hpp): every tangent against central
// finite differences and against the reverse rule (<J v, u> = <v, J^T u>), Jacobians both ways
// against each other and against finite differences, Hessians against closed forms, and all of
// them under vmap and jit.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "forwarding_backend.hpp"
#include "gradcheck.hpp"
#include "opaque_device.hpp"

using namespace vt;
using vt::testing::error_of;
using vt::testing::OpaqueDevice;
using vt::testing::require_close;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;

double dot(const Tensor& a, const Tensor& b) { return sum(a * b).item(); }

// A symmetric positive definite matrix (or stack) from any square x [..., n, n]: x x^T / n + I (so
// every op of the factorizations is exercised through x).
Tensor spd(const Tensor& x) {
  const std::int64_t n = x.shape(-1);
  return matmul(x, x, false, true) / static_cast<double>(n) + eye(n);
}

// x as a vector (its per-example elements, under vmap).
Tensor flat(const Tensor& x) { return reshape(x, {-1}); }

// Row i of t along its leading axis.
Tensor row(const Tensor& t, std::int64_t i) { return take(t, Tensor::from_ints({i}, {})); }

// The device of the to_device rule: a stand-in whose memory the host cannot read (opaque_device.hpp).
const Device stand_in = Device::cuda(4);

// f at the primal x. The direction v, the cotangent u and the finite-difference step h are random
// (seeds 11 and 12) and 1e-6 unless a rule gives its own: astype's, whose float32 values must stay
// exact.
struct Rule {
  std::string name;  // the ops the rule covers
  Unary f;
  Tensor x;
  Tensor v{}, u{};
  double h = 1e-6;
};

// Every differentiable op (an OpDef with an adjoint) in at least one rule, at primals where each
// function is smooth: no ties in max, maximum, minimum, segment_max or batch_max, nothing near abs's or
// clip's kinks, logs, sqrt and pow's bases on positive values, distinct eigenvalues, full-rank qr.
// Where an op broadcasts, its operands' shapes differ. Ops that only adjoints make (slice_scatter,
// pow_base_grad, matmul_batch_sum, ...) are reached through a gradient inside f; as_batch and unbatch
// of a traced tensor by the jit test below. Not here: trigamma and while_loop, whose adjoints raise
// (no tangent through the transposed VJP); sign, the comparisons, cholesky_backward and
// matmul_add_diagonal, which have no adjoint; the MPI layer's collectives.
std::vector<Rule> rules() {
  const Tensor m23 = randn({2, 3}, 8), m34 = randn({3, 4}, 9), m32 = randn({3, 2}, 10), m62 = randn({6, 2}, 16);
  const Tensor v6 = randn({6}, 6), m44 = randn({4, 4}, 13) * 0.5, s233 = randn({2, 3, 3}, 17);
  const Tensor w24 = randn({2, 4}, 14), w243 = randn({2, 4, 3}, 15), w32 = randn({3, 2}, 18);
  const Tensor v3 = randn({3}, 19), v4 = randn({4}, 20), b32 = randn({3, 2}, 21), batch43 = randn({4, 3}, 22);
  const Tensor ids = Tensor::from_ints({2, 0, 1, 2, 2, 0}, {6});
  return {
      {"neg, exp, log, log1p, sqrt, square, sin, cos, tanh, abs",
       [](const Tensor& x) {
         return exp(-x) * sin(x) + cos(x) * tanh(x) + log(square(x) + 0.5) + log1p(abs(x)) * sqrt(square(x) + 1.0);
       },
       m23},
      {"log10, log2, exp2, exp10, expm1, erf, erfc, lgamma, digamma, sigmoid, softplus",
       [](const Tensor& x) {
         const Tensor s = square(x);
         return log10(s + 1.0) + log2(s + 2.0) + exp2(x) + exp10(x * 0.5) + expm1(x) + erf(x) * erfc(x) +
                lgamma(s + 0.5) + digamma(s + 1.0) + sigmoid(x) * softplus(x);
       },
       v6},
      {"add, sub, mul, div, pow (tensors, a scalar base, a scalar exponent), maximum, minimum, clip: [2, 3] with [3] "
       "and [2, 1]",
       [](const Tensor& x) {
         const Tensor a = x, b = reshape(slice(x, 0, 0, 1), {3}), c = slice(x, 1, 0, 1);
         return (a + b) * c - a / (square(c) + 1.0) + pow(square(a) + 1.0, b) + pow(square(b) + 0.5, c) + pow(2.0, a) +
                pow(a, 3.0) + maximum(a, b + 0.3) + minimum(c - 0.2, a) + clip(a, -0.5, 0.5) + (2.0 - b) -
                1.0 / (square(c) + 1.0);
       },
       m23},
      {"where (broadcast condition and branches; less and greater give no tangent)",
       [](const Tensor& x) {
         const Tensor a = x, b = reshape(slice(x, 0, 0, 1), {3}), c = slice(x, 1, 0, 1);
         return where(less(a, b + 0.1), square(a) * c, sin(b) + c) + where(greater(c, zeros({})), b, exp(c));
       },
       m23},
      {"astype (float64 to float32 and back; float32 promoted in a product)",
       [](const Tensor& x) {
         const Tensor single = astype(x, DType::f32);
         return astype(single * 2.0 - 0.5, DType::f64) + single * x + exp(x);
       },
       // Multiples of 1/4 below 2, and h = 2^-20: x + h v, and all that float32 computes, are exact.
       Tensor::from_vector({0.75, -1.25, 1.5, -0.25, 0.5, 1.75}, {2, 3}),
       Tensor::from_vector({0.5, 1.25, -0.75, 1.0, -1.5, 0.25}, {2, 3}),
       Tensor::from_vector({1.0, -0.5, 0.25, 0.75, -1.25, 1.5}, {2, 3}), std::ldexp(1.0, -20)},
      {"reshape, transpose (reversed and permuted), swapaxes, t, broadcast_to, sum_to",
       [w243](const Tensor& x) {
         const Tensor y = reshape(x, {3, 2, 1});
         const Tensor spread = broadcast_to(reshape(x, {2, 1, 3}), {2, 4, 3}) * w243;
         return concatenate({flat(square(transpose(y))), flat(exp(transpose(y, {2, 0, 1}))),
                             flat(sin(swapaxes(y, 0, 1))), flat(x.t() * x.t()), flat(sum_to(spread * spread, {1, 3})),
                             flat(sum_to(spread, {4, 1}))});
       },
       m23},
      {"slice (a step, negative bounds), concatenate, stack, diag (both ways), diagonal (non-square, a stack), tril, "
       "triu",
       [](const Tensor& x) {
         const Tensor s = stack({x, sin(x)}, 1);  // [3, 2, 4]
         return concatenate({flat(square(slice(x, 1, 0, 4, 2))), flat(exp(slice(x, 0, -2, 3))),
                             flat(concatenate({x, square(x)}, 1) * 0.5), flat(s * s), flat(diag(square(diag(x)))),
                             flat(diagonal(s) * 2.0), flat(tril(x, 1) * x), flat(triu(square(x), -1))});
       },
       m34},
      {"sum, mean, max, logsumexp (over given axes, keepdims, all axes), cumsum (both axes)",
       [](const Tensor& x) {
         return concatenate({sum(square(x), {0}), flat(mean(x * x, {1}, true)), max(x, {1}), flat(max(x, {0}, true)),
                             reshape(max(x), {1}), logsumexp(x, {0}), flat(logsumexp(x, {1}, true)),
                             reshape(logsumexp(x) + sum(x) * mean(x), {1}), flat(cumsum(x, 1) * x),
                             flat(cumsum(sin(x), 0))});
       },
       m34},
      {"take (axis 1, 2-d and negative indices), scatter_add (repeated indices, broadcast updates), at().set "
       "(scatter_set: the last of repeated indices kept), at().add, at().get",
       [](const Tensor& x) {
         const Tensor cols = Tensor::from_ints({2, 0, -1, 2}, {2, 2}), rows = Tensor::from_ints({1, 2, 1}, {3});
         const Tensor repeated = Tensor::from_ints({1, 3, 1}, {3});
         return concatenate({flat(square(take(x, cols, 1))), flat(scatter_add(x * 0.5, rows, exp(row(x, 0)))),
                             flat(at(x, repeated, 1).set(sin(slice(x, 1, 0, 3)))), flat(at(x, rows).add(square(x))),
                             flat(at(x, rows).get() * 2.0)});
       },
       m34},
      {"segment_sum, segment_mean, segment_max",
       [ids](const Tensor& x) {
         return concatenate(
             {flat(segment_sum(square(x), ids, 3)), flat(segment_mean(x, ids, 3)), flat(segment_max(sin(x), ids, 3))});
       },
       m62},
      {"matmul: matrices (transpose flags), matrix-vector, vector-matrix, dot, broadcast batch axes",
       [w24, w243, v3, v4](const Tensor& x) {
         const Tensor r = row(x, 0);
         return concatenate({flat(matmul(x, x, true, false)), flat(matmul(x, sin(x), false, true)),
                             flat(matmul(x, w24, false, true)), flat(matmul(w24, x, false, true)), matmul(x, v4),
                             matmul(v3, x), reshape(matmul(r, exp(r)), {1}), flat(matmul(reshape(x, {1, 3, 4}), w243)),
                             flat(matmul(w243, sin(x))), flat(matmul(w243, x, true, true))});
       },
       m34},
      {"matmul_batch_sum, broadcast_to_batch, batch_mean's spread (a gradient inside: a batch sharing a matrix)",
       [batch43](const Tensor& x) {
         return grad([&](const Tensor& w) {
           const Tensor examples = as_batch(batch43);  // 4 examples of [3]
           return sum(batch_sum(tanh(matmul(examples, w)))) + sum(batch_mean(sin(matmul(w, examples, true, false))));
         })(x);
       },
       m32},
      {"adjoint ops (a gradient inside): slice_scatter, cumsum reversed, pow_base_grad, diag_embed, scatter_add "
       "into zeros, broadcast_to",
       [w32](const Tensor& x) {
         return grad([&](const Tensor& y) {
           const Tensor head = slice(y, 0, 0, 4), exponent = slice(y, 0, 2, 6) * 0.5;
           const Tensor picked = take(y, Tensor::from_ints({1, 3, 3, 0}, {4}));
           return sum(pow(square(head) + 1.0, exponent)) + sum(cumsum(sin(y), 0) * y) +
                  sum(exp(diagonal(reshape(y, {2, 3})))) + sum(square(slice(y, 0, 1, 6, 2))) * sum(y) +
                  sum(picked * picked * exp(picked)) + max(y) * mean(y) + logsumexp(y) +
                  sum(square(matmul(reshape(y, {2, 3}), w32)));
         })(x);
       },
       v6},
      {"triangular_solve: lower and upper, transposed or not, left and right, a vector, a broadcast stack",
       [](const Tensor& x) {
         const Tensor t = x + eye(4) * 3.0, b = sin(slice(x, 1, 0, 2)), column = reshape(slice(x, 1, 2, 3), {4});
         return concatenate({flat(triangular_solve(t, b, true, false)), flat(triangular_solve(t, b, true, true)),
                             flat(triangular_solve(t, b, false, false)), flat(triangular_solve(t, b, false, true)),
                             flat(triangular_solve(t, b.t(), true, false, false)),
                             flat(triangular_solve(t, b.t(), false, true, false)),
                             triangular_solve(t, column, false, true), triangular_solve(t, column, true, false),
                             flat(triangular_solve(t, stack({b, square(b)}), true, true))});
       },
       m44},
      {"cholesky (a stack [2, 3, 3])", [](const Tensor& x) { return cholesky(spd(x)); }, s233},
      {"cho_factor (its factor too), cho_solve (vector, matrix and broadcast right-hand sides), logdet (of a factor "
       "and of a matrix), solve",
       [v3, b32](const Tensor& x) {
         const Tensor a = spd(x), a0 = row(a, 0), rhs = sin(slice(x, -1, 0, 2));  // [2, 3, 3], [3, 3], [2, 3, 2]
         const CholeskyFactor c = cho_factor(a);
         return concatenate({flat(c.l), flat(cho_solve(c, v3)), flat(cho_solve(c, rhs)), flat(cho_solve(c, b32)),
                             logdet(c), logdet(a * 2.0), flat(solve(a * 1.5, rhs + b32)), flat(solve(a0, rhs))});
       },
       s233},
      {"cholesky_inverse (A^-1 in logdet's gradient, a stack [2, 3, 3])",
       [](const Tensor& x) { return grad([](const Tensor& a) { return sum(logdet(a)); })(spd(x)); }, s233},
      {"cholesky_checked (its factor; info has no tangent)",
       [](const Tensor& x) {
         const CheckedCholesky c = cholesky_checked(spd(x));
         return c.l + reshape(c.info, {2, 1, 1});
       },
       s233},
      {"qr (tall, a stack [2, 4, 3]): q and r",
       [](const Tensor& x) {
         const QR d = qr(x);
         return concatenate({flat(d.q), flat(d.r)});
       },
       randn({2, 4, 3}, 23)},
      {"qr (wide, m < n): q and r",
       [](const Tensor& x) {
         const QR d = qr(x);
         return concatenate({flat(d.q), flat(d.r)});
       },
       m34},
      {"eigh: eigenvalues and eigenvectors (through v * v, which their signs leave alone), a stack",
       [](const Tensor& x) {
         const Eigh e = eigh(spd(x));
         return concatenate({flat(e.eigenvalues), flat(e.eigenvectors * e.eigenvectors)});
       },
       s233},
      {"stop_gradient (a shift that cancels)",
       [](const Tensor& x) {
         const Tensor m = stop_gradient(max(x));
         return exp(x - m) * exp(m) + log(sum(exp(x - m))) + m;
       },
       v6},
      {"scan (a pair carry, xs, ys, captured parameters; reversed; over a length), fori_loop, cond (a concrete "
       "predicate)",
       [](const Tensor& x) {  // x [3, 2]: the xs
         using Carry = std::pair<Tensor, Tensor>;
         const Tensor p = row(x, 0);
         const auto step = [p](const Carry& c, const Tensor& xt) {
           const Tensor h = tanh(c.first * xt + p);
           return std::pair{Carry{h, c.second + square(h)}, h * xt};
         };
         const auto [carry, ys] = scan(step, Carry{sin(p), cos(p)}, x);
         const auto [back, ys_back] = scan(step, Carry{cos(p), sin(p)}, x * 0.5, true);
         const auto [counted, ys_counted] = scan(
             [p](const Tensor& c, const Tensor& i) {
               return std::pair{sin(c) * p + c * astype(i, DType::f64) * 0.1, square(c)};
             },
             p, 3);
         const Tensor horner = fori_loop(
             0, 3, [p](const Tensor&, const Tensor& c) { return c * p + cos(c); }, p * 0.5);
         const Tensor branch = cond(
             greater(sum(p), zeros({})), [](const Tensor& a) { return exp(a); }, [](const Tensor& a) { return sin(a); },
             p);
         return concatenate({carry.first, carry.second, flat(ys), back.first, back.second, flat(ys_back), counted,
                             flat(ys_counted), horner, branch});
       },
       m32},
      {"scan and fori_loop (carries and xs from x, a captured constant)",
       [w2 = randn({2}, 24)](const Tensor& x) {  // x [3, 2]: the xs
         const auto [carry, ys] = scan(
             [w2](const Tensor& c, const Tensor& xt) {
               const Tensor h = tanh(c * xt + w2);
               return std::pair{h, h * xt};
             },
             row(x, 0) * 0.5, x);
         const Tensor looped = fori_loop(
             0, 3, [w2](const Tensor&, const Tensor& c) { return sin(c) * w2 + c; }, row(x, 1));
         return concatenate({carry, flat(ys), looped});
       },
       m32},
      {"as_batch, unbatch, vmap, batch_sum, batch_mean, batch_max, broadcast_to_batch, sum and mean over a batch, "
       "cond (a batched predicate)",
       [](const Tensor& x) {  // x [3, 2]: 3 examples of [2]
         const Tensor xb = as_batch(x);
         const Tensor branched = vmap([](const Tensor& r) {
           return cond(
               greater(sum(r), zeros({})), [](const Tensor& a) { return exp(a); },
               [](const Tensor& a) { return sin(a) * 2.0; }, r);
         })(x);
         return concatenate({flat(unbatch(branched * xb)), batch_sum(square(xb)), batch_mean(sin(xb)), batch_max(xb),
                             reshape(sum(xb * xb) + mean(exp(xb)), {1}),
                             flat(unbatch(broadcast_to_batch(sum(x, {0}), xb) * xb))});
       },
       m32},
      {"to_device (to a stand-in device and back)",
       [](const Tensor& x) {
         const Tensor d = to_device(x, stand_in);
         return to_device(exp(d) * d, Device::cpu());
       },
       m23},
  };
}

// The rules whose names start with one of `names`.
std::vector<Rule> rules_named(const std::vector<std::string>& names) {
  const std::vector<Rule> all = rules();
  std::vector<Rule> found;
  for (const std::string& name : names) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const Rule& r) { return r.name.starts_with(name); });
    INFO(name);
    REQUIRE(it != all.end());
    found.push_back(*it);
  }
  return found;
}

// (f(x + h v) - f(x - h v)) / 2h.
Tensor finite_difference(const Unary& f, const Tensor& x, const Tensor& v, double h = 1e-6) {
  return (f(x + v * h) - f(x - v * h)) / (2 * h);
}

}  // namespace

TEST_CASE("jvp: every tangent against finite differences and against the reverse rule", "[derivatives][jvp]") {
  const OpaqueDevice device(stand_in);  // for to_device's rule
  for (const Rule& r : rules()) {
    INFO(r.name);
    const Tensor v = r.v.defined() ? r.v : randn(r.x.shape(), 11);
    const auto [y, jv] = jvp(r.f, {r.x}, {v});
    require_close(y, r.f(r.x), 0);
    require_close(jv, finite_difference(r.f, r.x, v, r.h), 1e-6);
    // <J v, u> = <v, J^T u> for a random u.
    const Tensor u = r.u.defined() ? r.u : randn(y.shape(), 12);
    const auto [value, pullback] = vjp(r.f, r.x);
    const double forward = dot(jv, u), reverse = dot(v, pullback(u)[0]);
    CHECK(std::abs(forward - reverse) <= 1e-10 * std::max(1.0, std::abs(reverse)));
  }
}

namespace {
// Rules whose functions also run per example (no as_batch inside, no device). Of the loops, those
// whose bodies capture only constants: a body that captures a tensor computed from a batched x has
// wrong second derivatives for batches of more than one example (hessian and hvp too), and the
// transposed VJP takes one.
const std::vector<std::string> mapped_rules{
    "neg, exp",   "log10",    "add, sub", "where",         "reshape",           "slice",
    "sum, mean",  "take",     "segment",  "matmul:",       "triangular_solve",  "cholesky (",
    "cho_factor", "qr (tall", "eigh",     "stop_gradient", "scan and fori_loop"};
}  // namespace

TEST_CASE("jvp: a batch of tangents for an unbatched primal gives one J v per tangent, as a loop of jvps",
          "[derivatives][jvp][vmap]") {
  std::vector<std::string> names = mapped_rules;
  names.push_back("scan (a pair carry");
  for (const Rule& r : rules_named(names)) {
    INFO(r.name);
    Shape shape = r.x.shape();
    shape.insert(shape.begin(), 3);
    const Tensor V = randn(shape, 60);
    const Tensor batched = unbatch(vmap([&](const Tensor& v) { return jvp(r.f, {r.x}, {v}).second; })(V));
    for (std::int64_t i = 0; i < 3; ++i) require_close(row(batched, i), jvp(r.f, {r.x}, {row(V, i)}).second, 1e-12);
  }
}

TEST_CASE("jvp of a batched primal (inside vmap, eager and under jit) equals a loop of jvps",
          "[derivatives][jvp][vmap]") {
  for (const Rule& r : rules_named(mapped_rules)) {
    INFO(r.name);
    Shape shape = r.x.shape();
    shape.insert(shape.begin(), 3);
    Shape one = r.x.shape();
    one.insert(one.begin(), 1);
    // Near the rule's primal, where its function is smooth.
    const Tensor X = reshape(r.x, one) + randn(shape, 61) * 0.05, V = randn(shape, 62);
    const auto tangent = [&](const Tensor& x, const Tensor& v) { return jvp(r.f, {x}, {v}).second; };
    const Tensor batched = unbatch(vmap(tangent)(X, V));
    const Tensor jitted = unbatch(jit(vmap(tangent))(as_batch(X), as_batch(V)));
    for (std::int64_t i = 0; i < 3; ++i) {
      const Tensor expected = tangent(row(X, i), row(V, i));
      require_close(row(batched, i), expected, 1e-12);
      require_close(row(jitted, i), expected, 1e-12);
    }
  }
  // as_batch and unbatch of a plain tensor while jit traces (aliases of their own).
  auto f = [](const Tensor& y) {
    const Tensor b = as_batch(y);
    return concatenate({flat(unbatch(sin(b) * b)), batch_sum(exp(b))});
  };
  const Tensor x = randn({3, 2}, 63), v = randn({3, 2}, 64);
  const Tensor eager = jvp(f, {x}, {v}).second;
  require_close(eager, finite_difference(f, x, v), 1e-6);
  auto traced = jit([&](const Tensor& y, const Tensor& d) { return jvp(f, {y}, {d}).second; });
  require_close(traced(x, v), eager, 1e-13);
}

TEST_CASE("jvp: several primals, integer primals, zero tangents and bad tangents", "[derivatives][jvp]") {
  const Tensor x = randn({3}, 20), y = randn({3}, 21), i = Tensor::from_ints({2, 0}, {2});
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& idx) { return take(a * b, idx) + sum(exp(b)); };
  const Tensor vx = randn({3}, 22), vy = randn({3}, 23);
  const auto [out, t] = jvp(f, {x, y, i}, {vx, vy, Tensor()});
  // By linearity: the tangent along (vx, vy) is the sum of those along (vx, 0) and (0, vy).
  const Tensor tx = jvp(f, {x, y, i}, {vx, zeros({3}), Tensor()}).second;
  const Tensor ty = jvp(f, {x, y, i}, {zeros({3}), vy, Tensor()}).second;
  require_close(t, tx + ty, 1e-13);
  // d/dx take(x * y, idx) along vx is take(vx * y, idx).
  require_close(tx, take(vx * y, i), 1e-14);
  require_close(jvp(f, {x, y, i}, {zeros({3}), zeros({3}), Tensor()}).second, zeros({2}), 0);
  CHECK(error_of([&] {
          jvp(f, {x, y, i}, {randn({4}, 24), vy, Tensor()});
        }).find("jvp: tangent 0 is float64 of shape [4], but its primal is float64 of shape [3]") != std::string::npos);
  CHECK(error_of([&] {
          jvp([](const Tensor& a) { return astype(a, DType::i64); }, {x}, {vx});
        }).find("jvp: the function returns int64 of shape [3], which has no derivative") != std::string::npos);
}

TEST_CASE("a pullback under vmap keeps each cotangent's result apart; a batch of tangents gives one J v each",
          "[derivatives][jvp]") {
  const Tensor A = randn({3, 3}, 25), x = randn({3}, 26), E = randn({4, 3}, 27);
  auto f = [&](const Tensor& y) { return matmul(A, y) * y; };
  auto [out, pullback] = vjp(f, x);
  const Tensor rows = vmap([&](const Tensor& u) { return pullback(u)[0]; }, {0}, 0)(E);
  const Tensor columns = vmap([&](const Tensor& v) { return jvp(f, {x}, {v}).second; }, {0}, 0)(E);
  for (std::int64_t i = 0; i < 4; ++i) {
    const Tensor e = reshape(slice(E, 0, i, i + 1), {3});
    require_close(reshape(slice(rows, 0, i, i + 1), {3}), pullback(e)[0], 1e-14);
    require_close(reshape(slice(columns, 0, i, i + 1), {3}), jvp(f, {x}, {e}).second, 1e-14);
  }
  // A pullback under vmap of a result that reduces a batch is refused (the two batches would share one axis).
  auto [mean_out, mean_pullback] = vjp([](const Tensor& b) { return batch_mean(b * 2.0); }, as_batch(E));
  CHECK(error_of([&] {
          vmap([&](const Tensor& u) { return mean_pullback(u)[0]; }, {0}, 0)(randn({2, 3}, 29));
        }).find("a batch of cotangents (a pullback under vmap) for an unbatched result") != std::string::npos);
  require_close(unbatch(mean_pullback(ones({3}))[0]), full({4, 3}, 0.5), 1e-15);
  // A loss over a batch still sums a shared variable's cotangents.
  const Tensor W = randn({3}, 28);
  const Tensor g = grad([&](const Tensor& w) { return sum(vmap([&](const Tensor& e) { return sum(e * w); })(E)); })(W);
  require_close(g, sum(E, {0}), 1e-14);
}

TEST_CASE("jacrev and jacfwd agree with each other and with finite differences", "[derivatives][jacobian]") {
  const Tensor w = randn({3, 4}, 30);
  // f: [2, 4] -> [3, 2]
  auto f = [&](const Tensor& x) { return tanh(matmul(w, x.t())) * sum(x); };
  const Tensor x = randn({2, 4}, 31);
  const Tensor jr = jacrev(f)(x), jf = jacfwd(f)(x);
  CHECK(jr.shape() == Shape{3, 2, 2, 4});
  CHECK(jf.shape() == Shape{3, 2, 2, 4});
  require_close(jr, jf, 1e-13);
  // Column (a, b) of the Jacobian is the derivative along the unit tensor e_ab.
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t c = 0; c < 4; ++c) {
      std::vector<double> e(8, 0.0);
      e[static_cast<std::size_t>(a * 4 + c)] = 1;
      const Tensor column = reshape(slice(reshape(jr, {6, 8}), 1, a * 4 + c, a * 4 + c + 1), {3, 2});
      require_close(column, finite_difference(f, x, Tensor::from_vector(e, {2, 4})), 1e-7);
    }
  // A second argument, and a scalar function's Jacobian (its gradient's shape).
  auto g = [](const Tensor& a, const Tensor& b) { return sum(a * exp(b)); };
  const Tensor a = randn({3}, 32), b = randn({3}, 33);
  require_close(jacrev(g, 1)(a, b), a * exp(b), 1e-14);
  require_close(jacfwd(g, 1)(a, b), a * exp(b), 1e-14);
  CHECK(error_of([&] { jacrev(g, 2)(a, b); }).find("jacrev: argnum 2 is out of range") != std::string::npos);
  // Empty: zeros of the Jacobian's shape.
  CHECK(jacrev(f)(zeros({0, 4})).shape() == Shape{3, 0, 0, 4});
}

TEST_CASE("the flat Jacobians: every result with respect to every listed argument, f run once",
          "[derivatives][jacobian]") {
  // f(a, b, c) = {a * exp(b), sum(a) * c}: c is not differentiated, the second result does not depend on b.
  const Tensor a = randn({3}, 34), b = randn({3}, 35), c = randn({2}, 36);
  int runs = 0;
  const detail::FlatFunction f = [&](const std::vector<Tensor>& x) {
    ++runs;
    return std::vector<Tensor>{x[0] * exp(x[1]), sum(x[0]) * x[2]};
  };
  for (const bool forward : {true, false}) {
    runs = 0;
    const detail::Jacobians jac =
        forward ? detail::jacfwd_flat(f, {a, b, c}, {1, 0}) : detail::jacrev_flat(f, {a, b, c}, {1, 0});
    CHECK(runs == 1);
    REQUIRE(jac.size() == 2);
    REQUIRE(jac[0].size() == 2);
    REQUIRE(jac[1].size() == 2);
    // Each piece is the single-result Jacobian of that result and argument.
    auto first = [](const Tensor& x, const Tensor& y) { return x * exp(y); };
    auto second = [&](const Tensor& x, const Tensor&) { return sum(x) * c; };
    require_close(jac[0][0], jacfwd(first, 1)(a, b), 1e-14);
    require_close(jac[0][1], jacfwd(first, 0)(a, b), 1e-14);
    require_close(jac[1][1], jacrev(second, 0)(a, b), 1e-14);
    // d(second)/db is zero, of shape [2, 3].
    CHECK(jac[1][0].shape() == Shape{2, 3});
    require_close(jac[1][0], zeros({2, 3}), 0);
  }
  // An integer result has no derivative, even beside a floating-point one.
  const detail::FlatFunction g = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0] * 2.0, astype(x[0], DType::i64)};
  };
  CHECK(error_of([&] { detail::jacrev_flat(g, {a}, {0}); }).find("jacrev: the function returns int64 of shape [3]") !=
        std::string::npos);
  CHECK(error_of([&] { detail::jacfwd_flat(g, {a}, {0}); }).find("jacfwd: the function returns int64 of shape [3]") !=
        std::string::npos);
}

TEST_CASE("a Jacobian's sweeps do not pile up: its peak memory does not grow with its rows or columns",
          "[derivatives][jacobian]") {
  // Each sweep of f's graph makes n x n intermediates; unless an outer transform differentiates the Jacobian, a
  // sweep's are freed before the next, so 16 sweeps peak where 4 do.
  vt::testing::MemoryWatcher device(Device::cuda(7));
  const std::int64_t n = 96;
  const Tensor W = randn({n, 16}, 37).to(device.device());
  auto kernel = [&](const Tensor& x) {  // n x n, from the first x.shape(0) columns of W
    const Tensor v = matmul(slice(W, 1, 0, x.shape(0)), x);
    const Tensor d = reshape(v, {n, 1}) - reshape(v, {1, n});
    return exp(-(d * d));
  };
  auto scalar = [&](const Tensor& x) { return sum(kernel(x) * kernel(x)); };
  auto rows = [&](const Tensor& x) { return slice(sum(kernel(x), {1}), 0, 0, x.shape(0)); };
  auto peak_of = [&](auto&& compute, std::int64_t m) {
    const Tensor x = randn({m}, 38).to(device.device());
    device.peak = device.live;
    const Tensor result = compute(x);
    CHECK(result.shape().back() == m);
    return device.peak - device.live + result.numel() * 8;  // what the computation held beyond its result
  };
  const auto hessian_of = [&](const Tensor& x) { return hessian(scalar)(x); };
  const auto jacrev_of = [&](const Tensor& x) { return jacrev(rows)(x); };
  const auto jacfwd_of = [&](const Tensor& x) { return jacfwd(rows)(x); };
  CHECK(peak_of(hessian_of, 16) < 2 * peak_of(hessian_of, 4));
  CHECK(peak_of(jacrev_of, 16) < 2 * peak_of(jacrev_of, 4));
  CHECK(peak_of(jacfwd_of, 16) < 2 * peak_of(jacfwd_of, 4));
}

TEST_CASE("hessian and hvp against closed forms and finite differences of the gradient", "[derivatives][hessian]") {
  // A quadratic form: H = A + A^T.
  const Tensor A = randn({4, 4}, 40), x = randn({4}, 41), v = randn({4}, 42);
  auto quad = [&](const Tensor& y) { return matmul(y, matmul(A, y)); };
  require_close(hessian(quad)(x), A + A.t(), 1e-13);
  require_close(hvp(quad)(x, v), matmul(A + A.t(), v), 1e-13);
  // A GP's negative log likelihood in its hyperparameters (a Cholesky, a solve and a logdet).
  const Tensor t = reshape(Tensor::from_vector({0.0, 0.3, 0.7, 1.1, 1.6, 2.0}, {6}), {6, 1}), y = randn({6}, 43);
  auto nll = [&](const Tensor& theta) {
    auto p = [&](std::int64_t i) { return exp(reshape(slice(theta, 0, i, i + 1), {})); };
    const Tensor amp = p(0), ell = p(1), noise = p(2);
    const Tensor K = amp * exp(square(t - t.t()) * -0.5 / square(ell)) + eye(6) * noise;
    const CholeskyFactor c = cho_factor(K);
    return 0.5 * sum(y * cho_solve(c, y)) + 0.5 * logdet(c);
  };
  const Tensor theta = Tensor::from_vector({0.2, -0.4, -1.5}, {3});
  const Tensor H = hessian(nll)(theta);
  CHECK(H.shape() == Shape{3, 3});
  require_close(H, H.t(), 1e-10);
  for (std::int64_t j = 0; j < 3; ++j) {
    const Tensor e = reshape(slice(eye(3), 0, j, j + 1), {3});
    const Tensor column = reshape(slice(H, 1, j, j + 1), {3});
    require_close(column, finite_difference(grad(nll), theta, e), 1e-6);
    require_close(hvp(nll)(theta, e), column, 1e-12);
  }
  CHECK(error_of([&] { hvp(quad)(x, randn({3}, 44)); }).find("hvp: tangent 0 is float64 of shape [3]") !=
        std::string::npos);
}

TEST_CASE("derivative builders under vmap and jit: one vmap, one trace for every batch size", "[derivatives][jit]") {
  const Tensor A = randn({3, 3}, 50);
  auto f = [&](const Tensor& p) { return sum(exp(matmul(A, p)) * p) + logdet(spd(reshape(p, {3, 1}) * 1.0 + A)); };
  const Tensor P = randn({5, 3}, 51) * 0.3;
  // vmap(hessian) equals a loop of hessians.
  const Tensor H = vmap(hessian(f))(P);
  for (std::int64_t i = 0; i < 5; ++i) {
    const Tensor p = reshape(slice(P, 0, i, i + 1), {3});
    require_close(reshape(slice(unbatch(H), 0, i, i + 1), {3, 3}), hessian(f)(p), 1e-12);
  }
  // jit(vmap(...)) of each builder: the same values, traced once for two batch sizes.
  const Tensor V = randn({5, 3}, 52);
  auto hv = jit(vmap(hvp(f)));
  auto jac = jit(vmap(jacfwd(f)));
  auto hess = jit(vmap(hessian(f)));
  auto tangent = jit(vmap([&](const Tensor& p, const Tensor& d) { return jvp(f, {p}, {d}).second; }));
  require_close(hess(as_batch(P)), H, 1e-12);
  require_close(hv(as_batch(P), as_batch(V)), vmap(hvp(f))(P, V), 1e-12);
  require_close(jac(as_batch(P)), vmap(grad(f))(P), 1e-12);
  require_close(tangent(as_batch(P), as_batch(V)), sum(vmap(grad(f))(P) * as_batch(V), {0}), 1e-12);
  // An unbatched Hessian and Jacobian under jit.
  const Tensor p0 = reshape(slice(P, 0, 0, 1), {3});
  auto hess_one = jit(hessian(f));
  require_close(hess_one(p0), hessian(f)(p0), 1e-12);
  require_close(jit(jacrev(f))(p0), grad(f)(p0), 1e-12);
  const Tensor P2 = randn({2, 3}, 53) * 0.3;
  require_close(hess(as_batch(P2)), vmap(hessian(f))(P2), 1e-12);
  CHECK(hess.counters().traces == 1);
  CHECK(hess.counters().calls == 2);
}

TEST_CASE("jvp is a forward sweep of tangent rules, and hvp and hessian are forward over reverse",
          "[derivatives][jvp]") {
  const Tensor x = randn({4, 4}, 60), v = randn({4, 4}, 61), b = randn({4, 2}, 62);
  auto f = [&](const Tensor& a) {
    const CholeskyFactor c = cho_factor(spd(a));
    return sum(cho_solve(c, b) * b) + logdet(c);
  };
  {
    OpCounter counter;
    jvp(f, {x}, {v});
    CHECK(counter.adjoints.empty());  // no reverse sweep
    CHECK(counter.tangent("cho_solve") == 1);
    CHECK(counter.tangent("logdet") == 1);
    CHECK(counter.tangent("matmul") == 1);
  }
  {
    // One reverse sweep (the gradient), then tangents through it: each adjoint runs once.
    OpCounter counter;
    hvp(f)(x, v);
    CHECK(counter.adjoint("cho_solve") == 1);
    CHECK(counter.adjoint("logdet") == 1);
    CHECK(counter.tangent("cho_solve") >= 2);  // the forward pass's solve and the adjoint's
    // logdet's adjoint A^-1 is the factor's inverse, differentiated by products: nothing is solved against I.
    CHECK(counter.forward("cholesky_inverse") >= 1);
    CHECK(counter.tangent("cholesky_inverse") == 1);
  }
  {
    // jacfwd runs f once and sweeps once per column: the forward ops of f are not repeated.
    OpCounter counter;
    jacfwd(f)(x);
    CHECK(counter.forward("cho_factor") == 1);
    CHECK(counter.tangent("cho_solve") == 16);
  }
  // A factorization's tangent sees the symmetric part of dA, as its symmetric adjoint implies, and
  // the factor's tangent is lower triangular.
  auto chol = [](const Tensor& m) { return cholesky(m); };
  const Tensor a = spd(x);
  const Tensor dl = jvp(chol, {a}, {v}).second;
  require_close(dl, jvp(chol, {a}, {(v + v.t()) * 0.5}).second, 1e-14);
  require_close(triu(dl, 1), zeros({4, 4}), 0);
}
