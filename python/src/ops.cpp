// The ops of the guide as functions of vtape._vtape: creation, elementwise maps, reductions, layout, indexing,
// gathers and segment sums, linear algebra, batches, npy files. Python numbers mix with tensors as weak scalars
// (the tensor's dtype wins), as in C++.
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

vt::Axes axes_of(nb::handle axis) {
  if (axis.is_none()) return {};
  if (nb::isinstance<nb::int_>(axis)) return {nb::cast<std::int64_t>(axis)};
  vt::Axes out;
  for (nb::handle a : axis) out.push_back(nb::cast<std::int64_t>(a));
  return out;
}

template <class N>
Tensor weak(const Tensor& like, N value) {
  return vt::detail::weak_scalar(like, value);
}

vt::Device device_of(const std::optional<std::string>& device) {
  return device ? vt::parse_device(*device) : vt::Device::cpu();
}

}  // namespace

void bind_ops(nb::module_& m) {
  // Creation.
  m.def(
      "zeros",
      [](nb::handle shape, nb::handle dtype, std::optional<std::string> device) {
        return vt::zeros(shape_of(shape), parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "ones",
      [](nb::handle shape, nb::handle dtype, std::optional<std::string> device) {
        return vt::ones(shape_of(shape), parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "full",
      [](nb::handle shape, double value, nb::handle dtype, std::optional<std::string> device) {
        return vt::full(shape_of(shape), value, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "eye",
      [](std::int64_t n, nb::handle dtype, std::optional<std::string> device) {
        return vt::eye(n, parse_dtype(dtype), device_of(device));
      },
      nb::arg("n"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "arange",
      [](double start, double stop, double step, nb::handle dtype, std::optional<std::string> device) {
        return vt::arange(start, stop, step, parse_dtype(dtype), device_of(device));
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1.0, nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none());
  m.def(
      "linspace",
      [](double start, double stop, std::int64_t num, nb::handle dtype, std::optional<std::string> device) {
        return vt::linspace(start, stop, num, parse_dtype(dtype), device_of(device));
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("num"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "randn",
      [](nb::handle shape, std::uint64_t seed, nb::handle dtype, std::optional<std::string> device) {
        return vt::randn(shape_of(shape), seed, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "rand",
      [](nb::handle shape, std::uint64_t seed, nb::handle dtype, std::optional<std::string> device) {
        return vt::rand(shape_of(shape), seed, parse_dtype(dtype), device_of(device));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def(
      "scalar", [](double value, nb::handle dtype) { return Tensor::scalar(value, parse_dtype(dtype)); },
      nb::arg("value"), nb::arg("dtype") = nb::none());

  // Elementwise maps of one tensor.
  const std::pair<const char*, Unary> unary[] = {{"neg", vt::neg},
                                                 {"exp", vt::exp},
                                                 {"log", vt::log},
                                                 {"log1p", vt::log1p},
                                                 {"sqrt", vt::sqrt},
                                                 {"square", vt::square},
                                                 {"sin", vt::sin},
                                                 {"cos", vt::cos},
                                                 {"tanh", vt::tanh},
                                                 {"abs", vt::abs},
                                                 {"sign", vt::sign},
                                                 {"log10", vt::log10},
                                                 {"log2", vt::log2},
                                                 {"exp2", vt::exp2},
                                                 {"exp10", vt::exp10},
                                                 {"expm1", vt::expm1},
                                                 {"erf", vt::erf},
                                                 {"erfc", vt::erfc},
                                                 {"lgamma", vt::lgamma},
                                                 {"digamma", vt::digamma},
                                                 {"trigamma", vt::trigamma},
                                                 {"sigmoid", vt::sigmoid},
                                                 {"softplus", vt::softplus},
                                                 {"tan", vt::tan},
                                                 {"arcsin", vt::arcsin},
                                                 {"arccos", vt::arccos},
                                                 {"arctan", vt::arctan},
                                                 {"sinh", vt::sinh},
                                                 {"cosh", vt::cosh},
                                                 {"arcsinh", vt::arcsinh},
                                                 {"arccosh", vt::arccosh},
                                                 {"arctanh", vt::arctanh},
                                                 {"floor", vt::floor},
                                                 {"ceil", vt::ceil},
                                                 {"logical_not", vt::logical_not},
                                                 {"stop_gradient", vt::stop_gradient},
                                                 {"as_batch", vt::as_batch},
                                                 {"unbatch", vt::unbatch},
                                                 {"batch_sum", vt::batch_sum},
                                                 {"batch_mean", vt::batch_mean},
                                                 {"batch_max", vt::batch_max},
                                                 {"diag", vt::diag},
                                                 {"diagonal", vt::diagonal},
                                                 {"cholesky", vt::cholesky}};
  for (const auto& [name, f] : unary) m.def(name, f, nb::arg("x"));

  // Binary maps (broadcasting), each also with a Python number on either side: a weak scalar of the tensor's dtype.
  const std::pair<const char*, Binary> binary[] = {{"add", vt::add},
                                                   {"sub", vt::sub},
                                                   {"mul", vt::mul},
                                                   {"div", vt::div},
                                                   {"maximum", vt::maximum},
                                                   {"minimum", vt::minimum},
                                                   {"less", vt::less},
                                                   {"greater", vt::greater},
                                                   {"equal", vt::equal},
                                                   {"less_equal", vt::less_equal},
                                                   {"greater_equal", vt::greater_equal},
                                                   {"not_equal", vt::not_equal},
                                                   {"logical_and", vt::logical_and},
                                                   {"logical_or", vt::logical_or},
                                                   {"logical_xor", vt::logical_xor},
                                                   {"arctan2", vt::arctan2}};
  for (const auto& [name, f] : binary) {
    m.def(name, f, nb::arg("a"), nb::arg("b"));
    // Python ints first (an int stays an int with an integer tensor), then floats.
    m.def(
        name, [f](const Tensor& a, std::int64_t b) { return f(a, weak(a, b)); }, nb::arg("a"), nb::arg("b"));
    m.def(
        name, [f](std::int64_t a, const Tensor& b) { return f(weak(b, a), b); }, nb::arg("a"), nb::arg("b"));
    m.def(
        name, [f](const Tensor& a, double b) { return f(a, weak(a, b)); }, nb::arg("a"), nb::arg("b"));
    m.def(
        name, [f](double a, const Tensor& b) { return f(weak(b, a), b); }, nb::arg("a"), nb::arg("b"));
  }
  // pow by a number is its own op (a scalar exponent, a scalar base), with its own derivatives.
  m.def("pow", nb::overload_cast<const Tensor&, const Tensor&>(&vt::pow), nb::arg("a"), nb::arg("b"));
  m.def("pow", nb::overload_cast<const Tensor&, double>(&vt::pow), nb::arg("a"), nb::arg("b"));
  m.def("pow", nb::overload_cast<double, const Tensor&>(&vt::pow), nb::arg("a"), nb::arg("b"));
  m.def("matmul", nb::overload_cast<const Tensor&, const Tensor&>(&vt::matmul), nb::arg("a"), nb::arg("b"));
  m.def("clip", &vt::clip, nb::arg("x"), nb::arg("lo"), nb::arg("hi"));
  m.def("where", &vt::where, nb::arg("cond"), nb::arg("a"), nb::arg("b"));
  // Python ints first (an int stays an int with an integer tensor), then floats: weak scalars, as the binary maps'.
  m.def("where", [](const Tensor& c, const Tensor& a, std::int64_t b) { return vt::where(c, a, weak(a, b)); });
  m.def("where", [](const Tensor& c, std::int64_t a, const Tensor& b) { return vt::where(c, weak(b, a), b); });
  m.def("where", [](const Tensor& c, const Tensor& a, double b) { return vt::where(c, a, weak(a, b)); });
  m.def("where", [](const Tensor& c, double a, const Tensor& b) { return vt::where(c, weak(b, a), b); });
  m.def(
      "astype", [](const Tensor& x, nb::handle dtype) { return vt::astype(x, parse_dtype(dtype)); }, nb::arg("x"),
      nb::arg("dtype"));
  m.def("matmul", nb::overload_cast<const Tensor&, const Tensor&, bool, bool>(&vt::matmul), nb::arg("a"), nb::arg("b"),
        nb::arg("transpose_a"), nb::arg("transpose_b"));

  // Reductions.
  using Reduce = Tensor (*)(const Tensor&, const vt::Axes&, bool);
  const std::pair<const char*, Reduce> reductions[] = {{"sum", vt::sum}, {"mean", vt::mean},
                                                       {"max", vt::max}, {"any", vt::any},
                                                       {"all", vt::all}, {"logsumexp", vt::logsumexp}};
  for (const auto& [name, f] : reductions)
    m.def(
        name, [f](const Tensor& x, nb::handle axis, bool keepdims) { return f(x, axes_of(axis), keepdims); },
        nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false);
  m.def("cumsum", &vt::cumsum, nb::arg("x"), nb::arg("axis"));

  // Layout and indexing.
  m.def(
      "reshape", [](const Tensor& x, nb::handle shape) { return vt::reshape(x, shape_of(shape)); }, nb::arg("x"),
      nb::arg("shape"));
  m.def("transpose", nb::overload_cast<const Tensor&>(&vt::transpose), nb::arg("x"));
  m.def("transpose", nb::overload_cast<const Tensor&, const std::vector<std::int64_t>&>(&vt::transpose), nb::arg("x"),
        nb::arg("axes"));
  m.def("swapaxes", &vt::swapaxes, nb::arg("x"), nb::arg("axis1"), nb::arg("axis2"));
  m.def(
      "broadcast_to", [](const Tensor& x, nb::handle shape) { return vt::broadcast_to(x, shape_of(shape)); },
      nb::arg("x"), nb::arg("shape"));
  m.def("slice", &vt::slice, nb::arg("x"), nb::arg("axis"), nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1);
  m.def("concatenate", &vt::concatenate, nb::arg("xs"), nb::arg("axis") = 0);
  m.def("stack", &vt::stack, nb::arg("xs"), nb::arg("axis") = 0);
  m.def("tril", &vt::tril, nb::arg("x"), nb::arg("k") = 0);
  m.def("triu", &vt::triu, nb::arg("x"), nb::arg("k") = 0);
  m.def("take", &vt::take, nb::arg("x"), nb::arg("indices"), nb::arg("axis") = 0);
  m.def("scatter_add", &vt::scatter_add, nb::arg("x"), nb::arg("indices"), nb::arg("updates"), nb::arg("axis") = 0);
  m.def(
      "scatter_set",
      [](const Tensor& x, const Tensor& indices, const Tensor& updates, std::int64_t axis) {
        return vt::at(x, indices, axis).set(updates);
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("updates"), nb::arg("axis") = 0);
  m.def("segment_sum", &vt::segment_sum, nb::arg("data"), nb::arg("segment_ids"), nb::arg("num_segments"));
  m.def("segment_mean", &vt::segment_mean, nb::arg("data"), nb::arg("segment_ids"), nb::arg("num_segments"));
  m.def("segment_max", &vt::segment_max, nb::arg("data"), nb::arg("segment_ids"), nb::arg("num_segments"));

  // Linear algebra.
  nb::class_<vt::CholeskyFactor>(m, "CholeskyFactor", "A Cholesky factor that remembers its matrix (cho_factor).")
      .def_ro("a", &vt::CholeskyFactor::a)
      .def_ro("l", &vt::CholeskyFactor::l);
  m.def("cho_factor", &vt::cho_factor, nb::arg("a"));
  m.def("cho_solve", &vt::cho_solve, nb::arg("factor"), nb::arg("b"));
  m.def("logdet", nb::overload_cast<const vt::CholeskyFactor&>(&vt::logdet), nb::arg("factor"));
  m.def("logdet", nb::overload_cast<const Tensor&>(&vt::logdet), nb::arg("a"));
  m.def("solve", &vt::solve, nb::arg("a"), nb::arg("b"));
  m.def("triangular_solve", &vt::triangular_solve, nb::arg("t"), nb::arg("b"), nb::arg("lower") = true,
        nb::arg("transpose") = false, nb::arg("left") = true);
  m.def("cholesky_checked", [](const Tensor& a) {
    const vt::CheckedCholesky c = vt::cholesky_checked(a);
    return std::pair{c.l, c.info};
  });
  m.def("qr", [](const Tensor& a) {
    const vt::QR d = vt::qr(a);
    return std::pair{d.q, d.r};
  });
  m.def("eigh", [](const Tensor& a) {
    const vt::Eigh d = vt::eigh(a);
    return std::pair{d.eigenvalues, d.eigenvectors};
  });

  // Files.
  m.def("load_npy", &vt::load_npy, nb::arg("path"));
  m.def("save_npy", &vt::save_npy, nb::arg("path"), nb::arg("x"));
}

}  // namespace vtape_python
