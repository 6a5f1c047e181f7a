// Elementwise family: unary maps, broadcasting binary maps, where, astype.
#include "elementwise.hpp"

#include <cmath>
#include <limits>

#include "../core/graph.hpp"
#include "creation.hpp"
#include "reduce.hpp"
#include "stop_gradient.hpp"
#include "tangent.hpp"

namespace vt {

namespace {

// ---------------------------------------------------------------- shape rules
template <const char* Name>
ExampleType broadcast_type(std::span<const ExampleType> in, const Attrs&) {
  Shape s = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) s = broadcast_shapes(s, in[i].shape, Name);
  return {in[0].dtype, s};
}

// ---------------------------------------------------------------- unary
template <UnaryKind K>
void unary_forward(const KernelArgs& k) {
  k.backend.unary(K, k.in[0], k.out);
}

// Maps write each output element from the same element of their inputs, so they run in place.
// The op is defined outside the anonymous namespace so that the ones elementwise.hpp declares are
// the library's (the others stay internal: a const at namespace scope is).
#define VT_UNARY(NAME, KIND, ADJOINT, INTEGERS)                    \
  }                                                                \
  const OpDef NAME##_op{.name = #NAME,                             \
                        .inputs = 1,                               \
                        .infer = same_type,                        \
                        .forward = unary_forward<UnaryKind::KIND>, \
                        .adjoint = ADJOINT,                        \
                        .tangent = self_adjoint_tangent,           \
                        .in_place = true,                          \
                        .integers = INTEGERS,                      \
                        .elementwise = true};                      \
  VT_REGISTER_OP(NAME##_op, #NAME);                                \
  Tensor NAME(const Tensor& x) { return apply(NAME##_op, {x}); }   \
  namespace {

const Tensor& x_of(const Node& n) { return n.inputs[0]; }

// The unary ops, one per entry: the table reads better than clang-format would lay it out.
// clang-format off
VT_UNARY(neg, neg, [](const Node&, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{neg(g)};
}, true)
VT_UNARY(exp, exp, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * y};
}, false)
VT_UNARY(log, log, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / x_of(n)};
}, false)
VT_UNARY(log1p, log1p, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / (x_of(n) + 1.0)};
}, false)
VT_UNARY(sqrt, sqrt, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * 0.5 / y};
}, false)
VT_UNARY(square, square, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (x_of(n) * 2.0)};
}, false)
VT_UNARY(sin, sin, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * cos(x_of(n))};
}, false)
VT_UNARY(cos, cos, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{neg(g * sin(x_of(n)))};
}, false)
VT_UNARY(tanh, tanh, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (1.0 - square(y))};
}, false)
VT_UNARY(abs, abs, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * sign(x_of(n))};
}, true)
VT_UNARY(sign, sign, nullptr, true)

// ---------------------------------------------------------------- special functions
constexpr double ln2 = 0.69314718055994530942, ln10 = 2.30258509299404568402;
constexpr double two_over_sqrt_pi = 1.12837916709551257390;

VT_UNARY(log10, log10, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / (x_of(n) * ln10)};
}, false)
VT_UNARY(log2, log2, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / (x_of(n) * ln2)};
}, false)
VT_UNARY(exp2, exp2, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (y * ln2)};
}, false)
VT_UNARY(exp10, exp10, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (y * ln10)};
}, false)
VT_UNARY(expm1, expm1, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (y + 1.0)};
}, false)
VT_UNARY(erf, erf, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (exp(neg(square(x_of(n)))) * two_over_sqrt_pi)};
}, false)
VT_UNARY(erfc, erfc, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (exp(neg(square(x_of(n)))) * -two_over_sqrt_pi)};
}, false)
VT_UNARY(lgamma, lgamma, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * digamma(x_of(n))};
}, false)
VT_UNARY(digamma, digamma, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * trigamma(x_of(n))};
}, false)
// psi'' (polygamma of order 2) is not implemented: differentiating trigamma raises rather than
// giving a gradient of 0.
[[noreturn]] std::vector<Tensor> trigamma_adjoint(const Node& n, const Tensor&, const Tensor&, const AdjointContext&) {
  fail("trigamma: its derivative (polygamma of order 2) is not implemented; trigamma of shape {} cannot be "
       "differentiated (lgamma can be differentiated twice, digamma once)",
       to_string(x_of(n).shape()));
}
VT_UNARY(trigamma, trigamma, trigamma_adjoint, false)
// y (1 - y), with 1 - y as sigmoid(-x): exact where y rounds to 1.
VT_UNARY(sigmoid, sigmoid, [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (y * sigmoid(neg(x_of(n))))};
}, false)
VT_UNARY(softplus, softplus, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * sigmoid(x_of(n))};
}, false)

// ---------------------------------------------------------------- trigonometric and hyperbolic
// 1 - x^2 as (1 - x)(1 + x), and x^2 - 1 as (x - 1)(x + 1): exact near |x| = 1, where the derivatives blow up.
Tensor one_minus_square(const Tensor& x) { return (1.0 - x) * (x + 1.0); }

VT_UNARY(tan, tan, [](const Node&, const Tensor& y, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * (square(y) + 1.0)};
}, false)
VT_UNARY(arcsin, arcsin, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / sqrt(one_minus_square(x_of(n)))};
}, false)
VT_UNARY(arccos, arccos, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{neg(g / sqrt(one_minus_square(x_of(n))))};
}, false)
VT_UNARY(arctan, arctan, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / (square(x_of(n)) + 1.0)};
}, false)
VT_UNARY(sinh, sinh, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * cosh(x_of(n))};
}, false)
VT_UNARY(cosh, cosh, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g * sinh(x_of(n))};
}, false)
VT_UNARY(arcsinh, arcsinh, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / sqrt(square(x_of(n)) + 1.0)};
}, false)
VT_UNARY(arccosh, arccosh, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / sqrt(neg(one_minus_square(x_of(n))))};
}, false)
VT_UNARY(arctanh, arctanh, [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext&) {
  return std::vector<Tensor>{g / one_minus_square(x_of(n))};
}, false)
VT_UNARY(floor, floor, nullptr, false)
VT_UNARY(ceil, ceil, nullptr, false)
// clang-format on
#undef VT_UNARY

// ---------------------------------------------------------------- binary
template <BinaryKind K>
void binary_forward(const KernelArgs& k) {
  k.backend.binary(K, expand_view(k.in[0], k.out, k.batched), expand_view(k.in[1], k.out, k.batched), k.out);
}

// Cotangent of a broadcast input: the output cotangent summed back to the input's shape.
Tensor to_input(const Node& n, std::size_t i, const Tensor& g) { return sum_to(g, n.inputs[i].shape()); }

constexpr char add_name[] = "add", sub_name[] = "sub", mul_name[] = "mul", div_name[] = "div", pow_name[] = "pow",
               pow_base_grad_name[] = "pow_base_grad", maximum_name[] = "maximum", minimum_name[] = "minimum",
               less_name[] = "less", less_equal_name[] = "less_equal", greater_name[] = "greater",
               greater_equal_name[] = "greater_equal", equal_name[] = "equal", not_equal_name[] = "not_equal",
               arctan2_name[] = "arctan2", where_name[] = "where";

using Adjoint = std::vector<Tensor> (*)(const Node&, const Tensor&, const Tensor&, const AdjointContext&);
using Tangent = Tensor (*)(const Node&, const Tensor&, const std::vector<Tensor>&);

// A broadcasting binary map. Like the unary maps, the arithmetic ones run in place.
// All but div and pow take integers too.
template <BinaryKind Kind, const char* Name>
constexpr OpDef binary_op(Adjoint adjoint, Tangent tangent, bool in_place = true) {
  return {.name = Name,
          .inputs = 2,
          .infer = broadcast_type<Name>,
          .forward = binary_forward<Kind>,
          .adjoint = adjoint,
          .tangent = tangent,
          .in_place = in_place,
          .integers = Kind != BinaryKind::div && Kind != BinaryKind::pow && Kind != BinaryKind::pow_base_grad &&
                      Kind != BinaryKind::arctan2,
          .elementwise = true};
}

// Tangents of the broadcasting maps: each input's tangent times the map's partial derivative in
// that input (the sweep broadcasts a tangent of an input's smaller shape to the output's).
Tensor scaled(const Tensor& t, const Tensor& partial) { return t.defined() ? t * partial : Tensor(); }

}  // namespace
const OpDef add_op = binary_op<BinaryKind::add, add_name>(
    [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, g) : Tensor()};
    },
    [](const Node&, const Tensor&, const std::vector<Tensor>& t) { return add_tangents(t[0], t[1]); });
namespace {
const OpDef sub_op = binary_op<BinaryKind::sub, sub_name>(
    [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, neg(g)) : Tensor()};
    },
    [](const Node&, const Tensor&, const std::vector<Tensor>& t) {
      return t[0].defined() && t[1].defined() ? t[0] - t[1] : t[0].defined() ? t[0] : neg(t[1]);
    });
}  // namespace
const OpDef mul_op = binary_op<BinaryKind::mul, mul_name>(
    [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g * n.inputs[1]) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, g * n.inputs[0]) : Tensor()};
    },
    bilinear_tangent);
const OpDef div_op = binary_op<BinaryKind::div, div_name>(
    [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext& ctx) {
      const Tensor gb = g / n.inputs[1];
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, gb) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, neg(gb * y)) : Tensor()};
    },
    // (da - y db) / b
    [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
      const Tensor& b = n.inputs[1];
      const Tensor top = t[1].defined() ? (t[0].defined() ? t[0] - y * t[1] : neg(y * t[1])) : t[0];
      return top / b;
    });
namespace {
// pow_base_grad(a, b) = b a^(b-1), and 0 where b = 0: pow's derivative in a, one pass over the
// elements (BinaryKind::pow_base_grad). Its own derivatives, for second-order gradients, are ordinary
// ops: d/da = b (b-1) a^(b-2) = b pow_base_grad(a, b - 1) (0 where b = 0), d/db = a^(b-1) (1 + b log a),
// 0 at a = 0 (where pow's exponent gradient is 0 too).
// a with its zeros replaced by 1, for the logs of pow's adjoints: log 0 never reaches them.
Tensor zeros_to_one(const Tensor& a) {
  return where(equal(a, zeros({}, a.dtype(), a.device())), ones({}, a.dtype(), a.device()), a);
}

extern const OpDef pow_base_grad_op;

// pow_base_grad's partial derivatives in a and in b.
Tensor pow_base_grad_in_a(const Tensor& a, const Tensor& b) {
  const Tensor zero = zeros({}, a.dtype(), a.device());
  return where(equal(b, zero), zero, b * apply(pow_base_grad_op, {a, b - 1.0}, {}));
}
Tensor pow_base_grad_in_b(const Tensor& a, const Tensor& b) {
  const Tensor zero = zeros({}, a.dtype(), a.device());
  const Tensor a_or_one = zeros_to_one(a);
  return where(equal(a, zero), zero, pow(a_or_one, b - 1.0) * (1.0 + b * log(a_or_one)));
}

const OpDef pow_base_grad_op = binary_op<BinaryKind::pow_base_grad, pow_base_grad_name>(
    [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
      const Tensor& a = n.inputs[0];
      const Tensor& b = n.inputs[1];
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g * pow_base_grad_in_a(a, b)) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, g * pow_base_grad_in_b(a, b)) : Tensor()};
    },
    [](const Node& n, const Tensor&, const std::vector<Tensor>& t) {
      const Tensor& a = n.inputs[0];
      const Tensor& b = n.inputs[1];
      return add_tangents(t[0].defined() ? scaled(t[0], pow_base_grad_in_a(a, b)) : Tensor(),
                          t[1].defined() ? scaled(t[1], pow_base_grad_in_b(a, b)) : Tensor());
    });

// d/da = b a^(b-1) by pow_base_grad: one pass, which at a = 0 is b 0^(b - 1) (0 for b > 1 and for b = 0,
// as JAX; 1 for b = 1; +-inf for the other b < 1), and where a^b overflows or underflows still b a^(b-1), finite
// where that is. d/db = y log a reuses the output, with a = 0 replaced by 1 in the log: 0 there (the
// limit of y log a for b > 0).
Tensor pow_in_a(const Node& n) { return apply(pow_base_grad_op, {n.inputs[0], n.inputs[1]}, {}); }
Tensor pow_in_b(const Node& n, const Tensor& y) { return y * log(zeros_to_one(n.inputs[0])); }

const OpDef pow_op = binary_op<BinaryKind::pow, pow_name>(
    [](const Node& n, const Tensor& y, const Tensor& g, const AdjointContext& ctx) {
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g * pow_in_a(n)) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, g * pow_in_b(n, y)) : Tensor()};
    },
    [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
      return add_tangents(t[0].defined() ? scaled(t[0], pow_in_a(n)) : Tensor(),
                          t[1].defined() ? scaled(t[1], pow_in_b(n, y)) : Tensor());
    });

// maximum and minimum: a tie shares the derivative evenly. `Pick` is the comparison that selects a.
template <Tensor (*Pick)(const Tensor&, const Tensor&)>
Tensor share_of_a(const Node& n) {
  const DType d = n.inputs[0].dtype();
  return astype(Pick(n.inputs[0], n.inputs[1]), d) + astype(equal(n.inputs[0], n.inputs[1]), d) * 0.5;
}
template <Tensor (*Pick)(const Tensor&, const Tensor&)>
std::vector<Tensor> extremum_adjoint(const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
  const Tensor share_a = share_of_a<Pick>(n);
  return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g * share_a) : Tensor(),
                             ctx.needs[1] ? to_input(n, 1, g * (1.0 - share_a)) : Tensor()};
}
template <Tensor (*Pick)(const Tensor&, const Tensor&)>
Tensor extremum_tangent(const Node& n, const Tensor&, const std::vector<Tensor>& t) {
  const Tensor share_a = share_of_a<Pick>(n);
  return add_tangents(scaled(t[0], share_a), t[1].defined() ? scaled(t[1], 1.0 - share_a) : Tensor());
}

// d/dy atan2(y, x) = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2).
Tensor arctan2_in_y(const Node& n) { return n.inputs[1] / (square(n.inputs[0]) + square(n.inputs[1])); }
Tensor arctan2_in_x(const Node& n) { return neg(n.inputs[0]) / (square(n.inputs[0]) + square(n.inputs[1])); }
const OpDef arctan2_op = binary_op<BinaryKind::arctan2, arctan2_name>(
    [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
      return std::vector<Tensor>{ctx.needs[0] ? to_input(n, 0, g * arctan2_in_y(n)) : Tensor(),
                                 ctx.needs[1] ? to_input(n, 1, g * arctan2_in_x(n)) : Tensor()};
    },
    [](const Node& n, const Tensor&, const std::vector<Tensor>& t) {
      return add_tangents(t[0].defined() ? scaled(t[0], arctan2_in_y(n)) : Tensor(),
                          t[1].defined() ? scaled(t[1], arctan2_in_x(n)) : Tensor());
    });

const OpDef maximum_op =
    binary_op<BinaryKind::maximum, maximum_name>(extremum_adjoint<greater>, extremum_tangent<greater>);
const OpDef minimum_op = binary_op<BinaryKind::minimum, minimum_name>(extremum_adjoint<less>, extremum_tangent<less>);
// Comparisons: booleans of the broadcast shape, from operands of one dtype (any, bool too). No gradient
// flows through them; each writes a buffer of its own (its elements are narrower than its operands').
template <const char* Name>
ExampleType comparison_type(std::span<const ExampleType> in, const Attrs& attrs) {
  return {DType::boolean, broadcast_type<Name>(in, attrs).shape};
}
template <BinaryKind Kind, const char* Name>
constexpr OpDef comparison_op() {
  return {.name = Name,
          .inputs = 2,
          .infer = comparison_type<Name>,
          .forward = binary_forward<Kind>,
          .adjoint = nullptr,
          .tangent = nullptr,
          .in_place = false,
          .integers = true,
          .booleans = true,
          .elementwise = true};
}
const OpDef less_op = comparison_op<BinaryKind::less, less_name>();
const OpDef less_equal_op = comparison_op<BinaryKind::less_equal, less_equal_name>();
const OpDef greater_op = comparison_op<BinaryKind::greater, greater_name>();
const OpDef greater_equal_op = comparison_op<BinaryKind::greater_equal, greater_equal_name>();
const OpDef equal_op = comparison_op<BinaryKind::equal, equal_name>();
const OpDef not_equal_op = comparison_op<BinaryKind::not_equal, not_equal_name>();

// where(cond, a, b): a bool condition, values of one dtype, the three broadcast together.
ExampleType where_type(std::span<const ExampleType> in, const Attrs& attrs) {
  if (in[0].dtype != DType::boolean || in[1].dtype != in[2].dtype)
    fail("where: a {} condition with {} and {} values (vt::where converts them first)", name_of(in[0].dtype),
         name_of(in[1].dtype), name_of(in[2].dtype));
  return {in[1].dtype, broadcast_type<where_name>(in, attrs).shape};
}

const OpDef where_op{
    .name = where_name,
    .inputs = 3,
    .infer = where_type,
    .forward =
        [](const KernelArgs& k) {
          k.backend.select(expand_view(k.in[0], k.out, k.batched), expand_view(k.in[1], k.out, k.batched),
                           expand_view(k.in[2], k.out, k.batched), k.out);
        },
    .adjoint =
        [](const Node& n, const Tensor&, const Tensor& g, const AdjointContext& ctx) {
          const Tensor zero = zeros({}, g.dtype(), g.device());
          const Tensor& c = n.inputs[0];
          return std::vector<Tensor>{Tensor(), ctx.needs[1] ? to_input(n, 1, where(c, g, zero)) : Tensor(),
                                     ctx.needs[2] ? to_input(n, 2, where(c, zero, g)) : Tensor()};
        },
    // The condition's own tangent is ignored: the selection is piecewise constant in it.
    .tangent =
        [](const Node& n, const Tensor& y, const std::vector<Tensor>& t) {
          if (!t[1].defined() && !t[2].defined()) return Tensor();
          const Tensor zero = zeros({}, y.dtype(), y.device());
          return where(n.inputs[0], t[1].defined() ? t[1] : zero, t[2].defined() ? t[2] : zero);
        },
    .mixed_dtypes = true,
    .in_place = true,
    .integers = true,
    .booleans = true,
    .elementwise = true};

// astype's attribute: the dtype to convert to.
struct AstypeAttrs {
  DType dtype;
  auto fields() { return std::tie(dtype); }
};

const OpDef astype_op{
    .name = "astype",
    .inputs = 1,
    .infer =
        [](std::span<const ExampleType> in, const Attrs& a) {
          return ExampleType{unpack_attrs<AstypeAttrs>(a).dtype, in[0].shape};
        },
    .forward = [](const KernelArgs& k) { k.backend.copy(k.in[0], k.out); },
    .adjoint = [](const Node& n, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{astype(g, n.inputs[0].dtype())}; },
    .tangent = linear_tangent,
    .mixed_dtypes = true,
    .integers = true,
    .booleans = true,
    .elementwise = true};

// Promotes two tensors to a common dtype before a binary op.
Tensor binary(const OpDef& op, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail("{}: undefined tensor operand", op.name);
  const DType d = promote(a.dtype(), b.dtype());
  return apply(op, {astype(a, d), astype(b, d)});
}

// Two booleans: + and maximum are or, * and minimum are and (as numpy); - has no meaning for them.
bool both_boolean(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && is_boolean(a.dtype()) && is_boolean(b.dtype());
}

}  // namespace

Tensor astype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return apply(astype_op, {x}, pack_attrs(AstypeAttrs{dtype}));
}

Tensor add(const Tensor& a, const Tensor& b) { return both_boolean(a, b) ? logical_or(a, b) : binary(add_op, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) {
  if (both_boolean(a, b))
    fail("sub: of two bool tensors (shapes {} and {}) is not defined, as in numpy; use logical_xor, or astype first",
         to_string(a.shape()), to_string(b.shape()));
  return binary(sub_op, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) { return both_boolean(a, b) ? logical_and(a, b) : binary(mul_op, a, b); }
Tensor div(const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && !is_floating(promote(a.dtype(), b.dtype())))  // true division
    return binary(div_op, astype(a, DType::f64), astype(b, DType::f64));
  return binary(div_op, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary(pow_op, a, b); }
Tensor arctan2(const Tensor& y, const Tensor& x) {
  if (y.defined() && x.defined() && !is_floating(promote(y.dtype(), x.dtype())))  // as div: in float64
    return binary(arctan2_op, astype(y, DType::f64), astype(x, DType::f64));
  return binary(arctan2_op, y, x);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return both_boolean(a, b) ? logical_or(a, b) : binary(maximum_op, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return both_boolean(a, b) ? logical_and(a, b) : binary(minimum_op, a, b);
}
Tensor less(const Tensor& a, const Tensor& b) { return binary(less_op, a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return binary(less_equal_op, a, b); }
Tensor greater(const Tensor& a, const Tensor& b) { return binary(greater_op, a, b); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return binary(greater_equal_op, a, b); }
Tensor equal(const Tensor& a, const Tensor& b) { return binary(equal_op, a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return binary(not_equal_op, a, b); }

// The logical ops read their operands as booleans (nonzero is true) and are selections or
// comparisons of booleans: one kernel each.
Tensor logical_not(const Tensor& x) {
  if (!x.defined()) fail("logical_not: undefined tensor operand");
  return equal(x, zeros({}, x.dtype(), x.device()));
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail("logical_and: undefined tensor operand");
  return where(a, astype(b, DType::boolean), zeros({}, DType::boolean, b.device()));
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail("logical_or: undefined tensor operand");
  return where(a, ones({}, DType::boolean, b.device()), astype(b, DType::boolean));
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail("logical_xor: undefined tensor operand");
  return not_equal(astype(a, DType::boolean), astype(b, DType::boolean));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!cond.defined() || !a.defined() || !b.defined()) fail("where: undefined tensor operand");
  const DType d = promote(a.dtype(), b.dtype());
  return apply(where_op, {astype(cond, DType::boolean), astype(a, d), astype(b, d)});
}

namespace detail {
Tensor weak_scalar(const Tensor& like, double value) {
  return Tensor::scalar(value, is_floating(like.dtype()) ? like.dtype() : DType::f64, like.device());
}
Tensor weak_scalar(const Tensor& like, std::int64_t value) {
  if (is_integer(like.dtype()) || is_boolean(like.dtype()))
    return Tensor::from_ints({value}, {}, is_boolean(like.dtype()) ? DType::i64 : like.dtype(), like.device());
  return Tensor::scalar(static_cast<double>(value), like.dtype(), like.device());
}
}  // namespace detail

Tensor add(const Tensor& a, double b) { return add(a, detail::weak_scalar(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, detail::weak_scalar(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, detail::weak_scalar(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, detail::weak_scalar(a, b)); }
Tensor pow(const Tensor& a, double b) { return pow(a, detail::weak_scalar(a, b)); }
Tensor pow(double a, const Tensor& b) { return pow(detail::weak_scalar(b, a), b); }

Tensor clip(const Tensor& x, double lo, double hi) {
  if (!x.defined()) fail("clip: undefined tensor operand");
  if (std::isnan(lo) || std::isnan(hi)) fail("clip: the bounds must not be NaN (lo = {}, hi = {})", lo, hi);
  if (lo > hi)
    fail("clip: the lower bound {} is above the upper bound {} (tensor of shape {})", lo, hi, to_string(x.shape()));
  const Tensor low = detail::weak_scalar(x, lo), high = detail::weak_scalar(x, hi);
  // Selecting x itself inside [lo, hi] gives gradient 1 there, bounds included, and keeps NaN.
  return where(less(x, low), low, where(greater(x, high), high, x));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(detail::weak_scalar(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(detail::weak_scalar(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(detail::weak_scalar(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(detail::weak_scalar(b, a), b); }

Tensor Tensor::operator-() const { return neg(*this); }
Tensor Tensor::astype(DType d) const { return vt::astype(*this, d); }

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(add_op, "add");
VT_REGISTER_OP(sub_op, "sub");
VT_REGISTER_OP(mul_op, "mul");
VT_REGISTER_OP(div_op, "div");
VT_REGISTER_OP(pow_base_grad_op, "pow_base_grad");
VT_REGISTER_OP(pow_op, "pow");
VT_REGISTER_OP(arctan2_op, "arctan2");
VT_REGISTER_OP(maximum_op, "maximum");
VT_REGISTER_OP(minimum_op, "minimum");
VT_REGISTER_OP(less_op, "less");
VT_REGISTER_OP(less_equal_op, "less_equal");
VT_REGISTER_OP(greater_op, "greater");
VT_REGISTER_OP(greater_equal_op, "greater_equal");
VT_REGISTER_OP(equal_op, "equal");
VT_REGISTER_OP(not_equal_op, "not_equal");
VT_REGISTER_OP(where_op, "where");
VT_REGISTER_OP(astype_op, "astype", "dtype:dtype");

}  // namespace vt
