// The ops of the guide as functions of vtape._vtape: creation, elementwise maps, reductions, layout, indexing,
// gathers and segment sums, linear algebra, batches, npy files. Every tensor argument also takes what
// vtape.asarray takes (ArrayLike), and a Python number beside a tensor is a weak scalar (the tensor's dtype wins),
// as in C++.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace vtape_python {

namespace {

using vt::Tensor;
using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Reduce = Tensor (*)(const Tensor&, const vt::Axes&, bool);

vt::Device device_of(const std::optional<std::string>& device) {
  return device ? vt::parse_device(*device) : vt::Device::cpu();
}

// A C++ op bound with ArrayLike in place of each tensor (and list of tensors) it takes.
template <class T>
struct taking_arrays {
  using type = T;
};
template <>
struct taking_arrays<const Tensor&> {
  using type = const ArrayLike&;
};
template <>
struct taking_arrays<const std::vector<Tensor>&> {
  using type = const std::vector<ArrayLike>&;
};

template <class T>
T&& tensors_of(T&& v) {
  return std::forward<T>(v);
}
Tensor tensors_of(const ArrayLike& v) { return v.tensor(); }
std::vector<Tensor> tensors_of(const std::vector<ArrayLike>& vs) {
  std::vector<Tensor> out;
  for (const ArrayLike& v : vs) out.push_back(v.tensor());
  return out;
}

template <class R, class... A>
auto accepting_arrays(R (*f)(A...)) {
  return [f](typename taking_arrays<A>::type... args) -> R { return f(tensors_of(args)...); };
}

struct UnaryOp {
  const char* name;
  Unary f;
  const char* doc;
};

struct BinaryOp {
  const char* name;
  Binary f;
  const char* doc;
};

}  // namespace

void bind_ops(nb::module_& m) {
  // Creation.
  m.def(
      "zeros",
      [](nb::handle shape, nb::handle dtype, std::optional<std::string> device) {
        return vt::zeros(shape_of(shape), parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "A tensor of zeros (float64 unless dtype says).");
  m.def(
      "ones",
      [](nb::handle shape, nb::handle dtype, std::optional<std::string> device) {
        return vt::ones(shape_of(shape), parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "A tensor of ones (float64 unless dtype says).");
  m.def(
      "full",
      [](nb::handle shape, double value, nb::handle dtype, std::optional<std::string> device) {
        return vt::full(shape_of(shape), value, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "A tensor holding fill_value everywhere (float64 unless dtype says).");
  m.def(
      "eye",
      [](std::int64_t n, nb::handle dtype, std::optional<std::string> device) {
        return vt::eye(n, parse_dtype(dtype), device_of(device));
      },
      nb::arg("n"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(), "The n x n identity.");
  m.def(
      "arange",
      [](double start, double stop, double step, nb::handle dtype, std::optional<std::string> device) {
        return vt::arange(start, stop, step, parse_dtype(dtype), device_of(device));
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1.0, nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none(), "start, start + step, ... below stop (vtape.numpy.arange takes arange(n) too).");
  m.def(
      "linspace",
      [](double start, double stop, std::int64_t num, nb::handle dtype, std::optional<std::string> device) {
        return vt::linspace(start, stop, num, parse_dtype(dtype), device_of(device));
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("num"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "num evenly spaced values from start to stop, both included.");
  m.def(
      "randn",
      [](nb::handle shape, std::uint64_t seed, nb::handle dtype, std::optional<std::string> device) {
        return vt::randn(shape_of(shape), seed, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "Standard normal draws, the same for the same seed on every device.");
  m.def(
      "rand",
      [](nb::handle shape, std::uint64_t seed, nb::handle dtype, std::optional<std::string> device) {
        return vt::rand(shape_of(shape), seed, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "Uniform draws in [0, 1), the same for the same seed on every device.");
  m.def(
      "scalar", [](double value, nb::handle dtype) { return Tensor::scalar(value, parse_dtype(dtype)); },
      nb::arg("value"), nb::arg("dtype") = nb::none(), "A 0-d tensor (float64 unless dtype says).");

  // Elementwise maps of one tensor, and ops of one tensor.
  const UnaryOp unary[] = {
      {"neg", vt::neg, "-x."},
      {"exp", vt::exp, "e**x, elementwise."},
      {"log", vt::log, "The natural logarithm, elementwise."},
      {"log1p", vt::log1p, "log(1 + x), accurate for small x."},
      {"sqrt", vt::sqrt, "The square root, elementwise."},
      {"square", vt::square, "x * x."},
      {"sin", vt::sin, "The sine, elementwise."},
      {"cos", vt::cos, "The cosine, elementwise."},
      {"tan", vt::tan, "The tangent, elementwise."},
      {"tanh", vt::tanh, "The hyperbolic tangent, elementwise."},
      {"sinh", vt::sinh, "The hyperbolic sine, elementwise."},
      {"cosh", vt::cosh, "The hyperbolic cosine, elementwise."},
      {"arcsin", vt::arcsin, "The inverse sine, elementwise."},
      {"arccos", vt::arccos, "The inverse cosine, elementwise."},
      {"arctan", vt::arctan, "The inverse tangent, elementwise."},
      {"arcsinh", vt::arcsinh, "The inverse hyperbolic sine, elementwise."},
      {"arccosh", vt::arccosh, "The inverse hyperbolic cosine, elementwise."},
      {"arctanh", vt::arctanh, "The inverse hyperbolic tangent, elementwise."},
      {"abs", vt::abs, "|x|, elementwise."},
      {"sign", vt::sign, "-1, 0 or 1 by the sign of x (its derivative is zero)."},
      {"floor", vt::floor, "The largest integer not above x, elementwise (its derivative is zero)."},
      {"ceil", vt::ceil, "The smallest integer not below x, elementwise (its derivative is zero)."},
      {"log10", vt::log10, "The base-10 logarithm, elementwise."},
      {"log2", vt::log2, "The base-2 logarithm, elementwise."},
      {"exp2", vt::exp2, "2**x, elementwise."},
      {"exp10", vt::exp10, "10**x, elementwise."},
      {"expm1", vt::expm1, "e**x - 1, accurate for small x."},
      {"erf", vt::erf, "The error function, elementwise."},
      {"erfc", vt::erfc, "1 - erf(x), accurate for large x."},
      {"lgamma", vt::lgamma, "log|Gamma(x)|, elementwise."},
      {"digamma", vt::digamma, "The derivative of lgamma, elementwise."},
      {"trigamma", vt::trigamma, "The derivative of digamma, elementwise."},
      {"sigmoid", vt::sigmoid, "1 / (1 + e**-x), stable for every x."},
      {"softplus", vt::softplus, "log(1 + e**x), stable for every x."},
      {"logical_not", vt::logical_not, "not x, elementwise (a bool tensor)."},
      {"stop_gradient", vt::stop_gradient, "x, through which no derivative flows."},
      {"as_batch", vt::as_batch, "[B, ...] as a batch of B examples of shape [...]."},
      {"unbatch", vt::unbatch, "A batch of B examples of shape [...] as one [B, ...] tensor."},
      {"batch_sum", vt::batch_sum, "The sum over a batch's examples."},
      {"batch_mean", vt::batch_mean, "The mean over a batch's examples."},
      {"batch_max", vt::batch_max, "The maximum over a batch's examples."},
      {"diag", vt::diag, "[..., n] to the [..., n, n] matrices with that diagonal."},
      {"diagonal", vt::diagonal, "The diagonal of [..., n, n] matrices, as [..., n]."},
      {"cholesky", vt::cholesky, "The lower Cholesky factor of symmetric positive-definite [..., n, n] matrices."},
  };
  for (const UnaryOp& op : unary) m.def(op.name, accepting_arrays(op.f), nb::arg("x"), op.doc);

  // Binary maps (broadcasting), with a Python number on either side as a weak scalar of the tensor's dtype.
  const BinaryOp binary_ops[] = {
      {"add", vt::add, "a + b, broadcasting."},
      {"sub", vt::sub, "a - b, broadcasting."},
      {"mul", vt::mul, "a * b, broadcasting."},
      {"div", vt::div, "a / b, broadcasting (integers divide to float64)."},
      {"maximum", vt::maximum, "The larger of a and b, elementwise."},
      {"minimum", vt::minimum, "The smaller of a and b, elementwise."},
      {"less", vt::less, "a < b, elementwise (a bool tensor)."},
      {"less_equal", vt::less_equal, "a <= b, elementwise (a bool tensor)."},
      {"greater", vt::greater, "a > b, elementwise (a bool tensor)."},
      {"greater_equal", vt::greater_equal, "a >= b, elementwise (a bool tensor)."},
      {"equal", vt::equal, "a == b, elementwise (a bool tensor)."},
      {"not_equal", vt::not_equal, "a != b, elementwise (a bool tensor)."},
      {"logical_and", vt::logical_and, "a and b, elementwise (bool tensors)."},
      {"logical_or", vt::logical_or, "a or b, elementwise (bool tensors)."},
      {"logical_xor", vt::logical_xor, "a xor b, elementwise (bool tensors)."},
      {"arctan2", vt::arctan2, "The angle of the point (b, a): arctan(a / b) in the right quadrant."},
  };
  for (const BinaryOp& op : binary_ops)
    m.def(
        op.name, [f = op.f](const ArrayLike& a, const ArrayLike& b) { return binary(f, a, b); }, nb::arg("a"),
        nb::arg("b"), op.doc);
  // pow by a number is its own op (a scalar exponent, a scalar base), with its own derivatives.
  m.def("pow", &power, nb::arg("a"), nb::arg("b"),
        "a ** b, broadcasting (integers to integer powers stay integers, as numpy's).");
  m.def(
      "matmul",
      [](const ArrayLike& a, const ArrayLike& b, bool transpose_a, bool transpose_b) {
        return vt::matmul(a.tensor(), b.tensor(), transpose_a, transpose_b);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("transpose_a") = false, nb::arg("transpose_b") = false,
      "The matrix product a @ b (of a's or b's transpose where asked), batched over leading axes.");
  m.def("clip", accepting_arrays(&vt::clip), nb::arg("x"), nb::arg("lo"), nb::arg("hi"),
        "x limited to [lo, hi], elementwise.");
  m.def(
      "where",
      [](const ArrayLike& cond, const ArrayLike& a, const ArrayLike& b) {
        const Tensor c = cond.tensor();
        if (a.is_number() && !b.is_number()) {
          const Tensor y = b.tensor();
          return vt::where(c, a.weak_like(y), y);
        }
        const Tensor x = a.tensor();
        return vt::where(c, x, b.is_number() ? b.weak_like(x) : b.tensor());
      },
      nb::arg("cond"), nb::arg("a"), nb::arg("b"), "a where cond is true, b elsewhere, broadcasting.");
  m.def(
      "astype", [](const ArrayLike& x, nb::handle dtype) { return vt::astype(x.tensor(), parse_dtype(dtype)); },
      nb::arg("x"), nb::arg("dtype"), "x converted to dtype.");

  // Reductions.
  const std::pair<const char*, Reduce> reductions[] = {{"sum", vt::sum}, {"mean", vt::mean},
                                                       {"max", vt::max}, {"any", vt::any},
                                                       {"all", vt::all}, {"logsumexp", vt::logsumexp}};
  for (const auto& [name, f] : reductions)
    m.def(
        name,
        [f](const ArrayLike& x, nb::handle axis, bool keepdims) { return f(x.tensor(), axes_of(axis), keepdims); },
        nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false,
        fmt::format("The {} over axis (an int, a tuple, or None: every axis); keepdims keeps them as length 1.", name)
            .c_str());
  m.def("cumsum", accepting_arrays(&vt::cumsum), nb::arg("x"), nb::arg("axis"), "The running sums along axis.");

  // Layout and indexing.
  m.def(
      "reshape", [](const ArrayLike& x, nb::handle shape) { return vt::reshape(x.tensor(), shape_of(shape)); },
      nb::arg("x"), nb::arg("shape"), "x's elements in another shape (one axis may be -1).");
  m.def(
      "transpose",
      [](const ArrayLike& x, std::optional<std::vector<std::int64_t>> axes) {
        return axes ? vt::transpose(x.tensor(), *axes) : vt::transpose(x.tensor());
      },
      nb::arg("x"), nb::arg("axes") = nb::none(), "x's axes in the order given (reversed when None).");
  m.def("swapaxes", accepting_arrays(&vt::swapaxes), nb::arg("x"), nb::arg("axis1"), nb::arg("axis2"),
        "x with two axes swapped.");
  m.def(
      "broadcast_to",
      [](const ArrayLike& x, nb::handle shape) { return vt::broadcast_to(x.tensor(), shape_of(shape)); }, nb::arg("x"),
      nb::arg("shape"), "x broadcast to shape (numpy's rules), without a copy.");
  m.def("slice", accepting_arrays(&vt::slice), nb::arg("x"), nb::arg("axis"), nb::arg("start"), nb::arg("stop"),
        nb::arg("step") = 1, "x[start:stop:step] along axis.");
  m.def("concatenate", accepting_arrays(&vt::concatenate), nb::arg("xs"), nb::arg("axis") = 0,
        "The tensors joined along an existing axis.");
  m.def("stack", accepting_arrays(&vt::stack), nb::arg("xs"), nb::arg("axis") = 0,
        "The tensors joined along a new axis.");
  m.def("tril", accepting_arrays(&vt::tril), nb::arg("x"), nb::arg("k") = 0,
        "The matrices' lower triangle (on and below the k-th diagonal), zeros above.");
  m.def("triu", accepting_arrays(&vt::triu), nb::arg("x"), nb::arg("k") = 0,
        "The matrices' upper triangle (on and above the k-th diagonal), zeros below.");
  m.def("take", accepting_arrays(&vt::take), nb::arg("x"), nb::arg("indices"), nb::arg("axis") = 0,
        "The slices of x at integer indices along axis (negative indices count from the end).");
  m.def("scatter_add", accepting_arrays(&vt::scatter_add), nb::arg("x"), nb::arg("indices"), nb::arg("updates"),
        nb::arg("axis") = 0, "x with updates added at indices along axis (repeated indices add up).");
  m.def(
      "scatter_set",
      [](const ArrayLike& x, const ArrayLike& indices, const ArrayLike& updates, std::int64_t axis) {
        return vt::at(x.tensor(), indices.tensor(), axis).set(updates.tensor());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("updates"), nb::arg("axis") = 0,
      "x with updates written at indices along axis (where an index repeats, its last update).");
  m.def("segment_sum", accepting_arrays(&vt::segment_sum), nb::arg("data"), nb::arg("segment_ids"),
        nb::arg("num_segments"), "The sums of data's rows by segment id, num_segments of them.");
  m.def("segment_mean", accepting_arrays(&vt::segment_mean), nb::arg("data"), nb::arg("segment_ids"),
        nb::arg("num_segments"), "The means of data's rows by segment id (0 for an empty segment).");
  m.def("segment_max", accepting_arrays(&vt::segment_max), nb::arg("data"), nb::arg("segment_ids"),
        nb::arg("num_segments"), "The maxima of data's rows by segment id (-inf for an empty segment).");

  // Linear algebra.
  nb::class_<vt::CholeskyFactor>(m, "CholeskyFactor", "A Cholesky factor that remembers its matrix (cho_factor).")
      .def_ro("a", &vt::CholeskyFactor::a, "The factored matrices.")
      .def_ro("l", &vt::CholeskyFactor::l, "Their lower Cholesky factors.");
  m.def("cho_factor", accepting_arrays(&vt::cho_factor), nb::arg("a"),
        "The Cholesky factor of symmetric positive-definite matrices, for cho_solve and logdet.");
  m.def("cho_solve", accepting_arrays(&vt::cho_solve), nb::arg("factor"), nb::arg("b"),
        "A^-1 b from A's cho_factor (b a vector or matrix per A).");
  m.def(
      "logdet",
      [](nb::handle a) {
        if (nb::isinstance<vt::CholeskyFactor>(a)) return vt::logdet(nb::cast<const vt::CholeskyFactor&>(a));
        return vt::logdet(ArrayLike{nb::borrow(a)}.tensor());
      },
      nb::arg("a"), "log det A of symmetric positive-definite matrices, or of a cho_factor.");
  m.def("solve", accepting_arrays(&vt::solve), nb::arg("a"), nb::arg("b"),
        "A^-1 b for symmetric positive-definite A (by Cholesky).");
  m.def("triangular_solve", accepting_arrays(&vt::triangular_solve), nb::arg("t"), nb::arg("b"),
        nb::arg("lower") = true, nb::arg("transpose") = false, nb::arg("left") = true,
        "T^-1 b for triangular T (lower or upper; T^-T b with transpose; b T^-1 where left is false).");
  m.def(
      "cholesky_checked",
      [](const ArrayLike& a) {
        const vt::CheckedCholesky c = vt::cholesky_checked(a.tensor());
        return std::pair{c.l, c.info};
      },
      nb::arg("a"),
      "(L, info): the Cholesky factor and, per matrix, 0 or the order of the first minor that is not positive "
      "definite (LAPACK's info), instead of an error.");
  m.def(
      "qr",
      [](const ArrayLike& a) {
        const vt::QR d = vt::qr(a.tensor());
        return std::pair{d.q, d.r};
      },
      nb::arg("a"), "(Q, R): the reduced QR decomposition of [..., m, n] matrices.");
  m.def(
      "eigh",
      [](const ArrayLike& a) {
        const vt::Eigh d = vt::eigh(a.tensor());
        return std::pair{d.eigenvalues, d.eigenvectors};
      },
      nb::arg("a"), "(eigenvalues ascending, eigenvectors as columns) of symmetric matrices.");

  // Files.
  m.def("load_npy", &vt::load_npy, nb::arg("path"), "A tensor read from a .npy file.");
  m.def("save_npy", accepting_arrays(&vt::save_npy), nb::arg("path"), nb::arg("x"), "x written to a .npy file.");
}

}  // namespace vtape_python
