// vtape.Tensor: numpy in and out without copies where the layout allows (the buffer protocol, __array__, DLPack),
// operators, methods and inspection, and the conversions every other binding uses. Indexing, .at and dtypes as numpy
// objects are written in Python (vtape/_tensor.py) and bound here, so that the class is whole in one place.
#include "bindings.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace vtape_python {

namespace {

nb::dlpack::dtype dlpack_dtype(vt::DType d) {
  switch (d) {
    case vt::DType::f32: return nb::dtype<float>();
    case vt::DType::f64: return nb::dtype<double>();
    case vt::DType::i32: return nb::dtype<std::int32_t>();
    case vt::DType::i64: return nb::dtype<std::int64_t>();
    case vt::DType::boolean: return nb::dtype<bool>();
  }
  return nb::dtype<double>();
}

vt::DType dtype_of(const nb::dlpack::dtype& d) {
  if (d == nb::dtype<float>()) return vt::DType::f32;
  if (d == nb::dtype<double>()) return vt::DType::f64;
  if (d == nb::dtype<std::int32_t>()) return vt::DType::i32;
  if (d == nb::dtype<std::int64_t>()) return vt::DType::i64;
  if (d == nb::dtype<bool>()) return vt::DType::boolean;
  throw nb::type_error(
      "vtape: arrays of this dtype are not supported; use float32, float64, int32, int64 or bool (astype first)");
}

std::vector<std::size_t> stored_shape(const vt::Tensor& t) {
  std::vector<std::size_t> shape;
  for (std::int64_t n : t.shape()) shape.push_back(static_cast<std::size_t>(n));
  return shape;
}

std::string describe(const vt::Tensor& t) {
  std::string shape;
  for (std::int64_t n : t.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
  if (t.ndim() == 1) shape += ",";
  return fmt::format("{} tensor of shape ({}){}", vt::name_of(t.dtype()), shape, t.is_batched() ? " per example" : "");
}

// A Python value (bool, float, int, a numpy array) needs the tensor's values. Inside jit there are none yet; under
// vmap there is one per example; under grad a number carries no derivative, so the gradient through it would be
// zero without a word. Each raises ConcretizationError (a vtape.Error and a TypeError, as JAX's) saying what to write.
void need_value(const vt::Tensor& t, const char* use, bool differentiable_ok = false) {
  const bool traced = t.is_symbolic() && !t.impl().deferred;
  std::string why;
  if (traced)
    why = fmt::format(
        "{} of a traced {}: its values exist only when the jitted plan runs (inside jit, vmap under "
        "jit, or a loop body)",
        use, describe(t));
  else if (t.is_batched() && std::string_view(use) != "np.asarray")  // np.asarray of a batch is [B, ...]
    why = fmt::format("{} of a batched {}: under vmap every example has its own value", use, describe(t));
  else if (t.impl().tracked && vt::detail::differentiating() && !differentiable_ok)
    why = fmt::format(
        "{} of a {} that grad differentiates: a Python number or numpy array carries no derivative, so "
        "the gradient through it would be silently zero",
        use, describe(t));
  else return;
  const std::string_view u(use);
  // numpy indexing with a tensor (a captured array's coef[i]) asks for np.asarray of the index.
  const bool index = u == "an index" || (u == "np.asarray" && vt::is_integer(t.dtype()) && t.numel() == 1);
  const char* fix = u == "bool()" ? "; branch with vtape.lax.cond(pred, true_fun, false_fun, *operands) or "
                                    "vtape.numpy.where(pred, a, b), or pass the value as a static argument "
                                    "(jit(f, static_argnums=...))"
                    : index
                        ? " (here perhaps as an index into a numpy array or list)"
                          "; index a tensor instead of a numpy array or list (vtape.numpy.asarray(a)[i], or "
                          "vtape.take), and loop with vtape.lax.fori_loop rather than range()"
                        : "; keep it a tensor: the operators and vtape.numpy's functions take tensors, x.astype(...) "
                          "converts dtypes, and vtape.stop_gradient(x) cuts the gradient on purpose";
  throw ConcretizationError(why + fix);
}

}  // namespace

namespace {

// The array of to_array, for callers that have asked need_value with their own use.
ReadOnlyArray host_array(const vt::Tensor& t) {
  vt::Tensor host = t.device() == vt::Device::cpu() ? t : t.to(vt::Device::cpu());
  if (host.is_batched()) host = vt::unbatch(host);  // [B, ...]: its own memory, or a copy of a broadcast batch
  const std::vector<std::size_t> shape = stored_shape(host);
  // The array keeps the tensor's storage alive; it is read-only, since tensors never change.
  auto* owner = new vt::Tensor(host);
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<vt::Tensor*>(p); });
  return ReadOnlyArray(const_cast<void*>(host.raw_data()), shape.size(), shape.data(), keep, nullptr,
                       dlpack_dtype(host.dtype()), nb::device::cpu::value);
}

}  // namespace

ReadOnlyArray to_array(const vt::Tensor& t) {
  need_value(t, "np.asarray");
  return host_array(t);
}

vt::Tensor from_array(const AnyArray& a) {
  const vt::DType dtype = dtype_of(a.dtype());
  vt::Shape shape;
  for (std::size_t i = 0; i < a.ndim(); ++i) shape.push_back(static_cast<std::int64_t>(a.shape(i)));
  // Row-major (nanobind made a row-major copy of any other layout): borrowed. The array, and so the Python object it
  // came from, lives as long as the tensor's storage; its last reference may go on any thread, and releasing it may
  // run Python.
  std::shared_ptr<void> owner(new AnyArray(a), [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<AnyArray*>(p);
  });
  return vt::Tensor::from_blob(const_cast<void*>(a.data()), shape, dtype, std::move(owner));
}

nb::tuple shape_tuple(const vt::Shape& shape) {
  nb::list out;
  for (std::int64_t n : shape) out.append(n);
  return nb::tuple(out);
}

vt::Shape shape_of(nb::handle shape) {
  vt::Shape out;
  if (nb::isinstance<nb::int_>(shape)) return {nb::cast<std::int64_t>(shape)};
  for (nb::handle n : shape) out.push_back(nb::cast<std::int64_t>(n));
  return out;
}

vt::Axes axes_of(nb::handle axis) {
  if (axis.is_none()) return {};
  if (nb::isinstance<nb::int_>(axis)) return {nb::cast<std::int64_t>(axis)};
  vt::Axes out;
  for (nb::handle a : axis) out.push_back(nb::cast<std::int64_t>(a));
  return out;
}

vt::DType parse_dtype(nb::handle dtype) {
  if (dtype.is_none()) return vt::DType::f64;
  // numpy names every way of writing a dtype (np.float32, "f4", float, ...) alike.
  const std::string name = nb::cast<std::string>(nb::module_::import_("numpy").attr("dtype")(dtype).attr("name"));
  if (name == "float64") return vt::DType::f64;
  if (name == "float32") return vt::DType::f32;
  if (name == "int64") return vt::DType::i64;
  if (name == "int32") return vt::DType::i32;
  if (name == "bool") return vt::DType::boolean;
  throw nb::type_error(
      ("vtape: dtype " + name + " is not supported; use float64, float32, int64, int32 or bool").c_str());
}

vt::Tensor ArrayLike::tensor() const {
  if (nb::isinstance<vt::Tensor>(object)) return nb::cast<vt::Tensor>(object);
  return nb::cast<vt::Tensor>(python_half("asarray")(object));
}

bool ArrayLike::is_number() const {
  return (PyLong_Check(object.ptr()) && !PyBool_Check(object.ptr())) || PyFloat_Check(object.ptr());
}

vt::Tensor ArrayLike::weak_like(const vt::Tensor& like) const {
  if (PyLong_Check(object.ptr())) return vt::detail::weak_scalar(like, nb::cast<std::int64_t>(object));
  return vt::detail::weak_scalar(like, nb::cast<double>(object));
}

vt::Tensor binary(vt::Tensor (*f)(const vt::Tensor&, const vt::Tensor&), const ArrayLike& a, const ArrayLike& b) {
  if (a.is_number() && !b.is_number()) {
    const vt::Tensor y = b.tensor();
    return f(a.weak_like(y), y);
  }
  const vt::Tensor x = a.tensor();
  return f(x, b.is_number() ? b.weak_like(x) : b.tensor());
}

vt::Tensor power(const ArrayLike& a, const ArrayLike& b) {
  // numpy's rules: a float base or exponent makes floats; integers to integer powers stay integers (computed in
  // float64: exact while the power is below 2^53), and a negative Python int exponent of integers is refused.
  using vt::DType;
  const auto as_f64 = [](const vt::Tensor& t) { return vt::is_integer(t.dtype()) ? vt::astype(t, DType::f64) : t; };
  if (b.is_number()) {
    const vt::Tensor x = a.tensor();
    const double e = nb::cast<double>(b.object);
    if (!vt::is_integer(x.dtype())) return vt::pow(x, e);
    if (!PyLong_Check(b.object.ptr())) return vt::pow(as_f64(x), e);
    if (e < 0)
      throw nb::value_error(
          "pow: integers to negative integer powers are not allowed (numpy's rule); make the base a float first");
    return vt::astype(vt::pow(as_f64(x), e), x.dtype());
  }
  if (a.is_number()) {
    const vt::Tensor y = b.tensor();
    const double base = nb::cast<double>(a.object);
    if (!vt::is_integer(y.dtype())) return vt::pow(base, y);
    const vt::Tensor p = vt::pow(base, as_f64(y));
    return PyLong_Check(a.object.ptr()) ? vt::astype(p, y.dtype()) : p;
  }
  const vt::Tensor x = a.tensor(), y = b.tensor();
  const DType d = vt::promote(x.dtype(), y.dtype());
  if (vt::is_integer(d)) return vt::astype(vt::pow(as_f64(x), as_f64(y)), d);
  return vt::pow(vt::astype(x, d), vt::astype(y, d));
}

nb::object python_half(const char* name) { return nb::module_::import_("vtape._tensor").attr(name); }

namespace {

using vt::Tensor;
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Reduce = Tensor (*)(const Tensor&, const vt::Axes&, bool);

nb::object numpy_of(const Tensor& t) { return nb::module_::import_("numpy").attr("asarray")(nb::cast(host_array(t))); }

// One element's value as a Python object (bool, int or float), after need_value.
nb::object element(const Tensor& t, const char* use) {
  need_value(t, use);
  if (t.numel() != 1)
    throw nb::type_error(fmt::format("{}: only a tensor of one element converts, got a {}", use, describe(t)).c_str());
  return numpy_of(t).attr("item")();
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor",
                         "An immutable tensor: its per-example shape, its dtype, and for a batched tensor (vmap, "
                         "as_batch) its batch. Operators follow numpy's rules, with a Python number as a weak scalar "
                         "(it takes the tensor's dtype).");
  cls.def_prop_ro(
         "shape", [](const Tensor& t) { return shape_tuple(t.shape()); }, "The shape (per example).")
      .def_prop_ro(
          "dtype",
          [](const Tensor& t) {
            return nb::module_::import_("numpy").attr("dtype")(std::string(vt::name_of(t.dtype())));
          },
          "The element type, as a numpy dtype.")
      .def_prop_ro(
          "dtype_name", [](const Tensor& t) { return std::string(vt::name_of(t.dtype())); },
          "The element type's name: float64, float32, int64, int32 or bool.")
      .def_prop_ro(
          "ndim", [](const Tensor& t) { return t.ndim(); }, "The number of axes (per example).")
      .def_prop_ro(
          "size", [](const Tensor& t) { return t.numel(); }, "The number of elements (per example).")
      .def_prop_ro(
          "device", [](const Tensor& t) { return vt::to_string(t.device()); }, "Where the values live.")
      .def_prop_ro(
          "is_batched", [](const Tensor& t) { return t.is_batched(); },
          "Whether the tensor holds a batch of examples (vmap, as_batch).")
      .def_prop_ro(
          "batch_size", [](const Tensor& t) { return t.batch_size(); }, "The number of examples.")
      .def_prop_ro(
          "T", [](const Tensor& t) { return vt::transpose(t); }, "The axes reversed.")
      .def_prop_ro(
          "mT", [](const Tensor& t) { return vt::swapaxes(t, -1, -2); }, "The last two axes swapped.")
      .def_prop_ro(
          "at", [](nb::handle t) { return python_half("_At")(t); },
          "JAX's indexed updates, returning new tensors: t.at[i].set(v), .add(v), .multiply(v), .get().")
      .def("__array_view__", &to_array, "The elements as a read-only numpy array, without a copy where possible.")
      .def(
          "__array__",
          [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            need_value(t, "np.asarray");
            nb::object a = numpy_of(t);
            if (!dtype.is_none()) a = a.attr("astype")(dtype, nb::arg("copy") = false);
            return !copy.is_none() && nb::cast<bool>(copy) ? a.attr("copy")() : a;
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none(),
          "The elements as a numpy array (numpy's protocol; read-only where no copy was asked for).")
      .def(
          "numpy",
          [](const Tensor& t) {
            need_value(t, ".numpy()");
            return numpy_of(t);
          },
          "The elements as a read-only numpy array.")
      .def(
          "item", [](const Tensor& t) { return element(t, ".item()"); }, "The one element as a Python number.")
      .def(
          "tolist",
          [](const Tensor& t) {
            need_value(t, ".tolist()");
            return numpy_of(t).attr("tolist")();
          },
          "The elements as nested Python lists.")
      .def("__float__", [](const Tensor& t) { return nb::float_(element(t, "float()")); })
      .def("__int__", [](const Tensor& t) { return nb::int_(element(t, "int()")); })
      .def("__index__",
           [](const Tensor& t) {
             if (!vt::is_integer(t.dtype()) || t.numel() != 1)
               throw nb::type_error(
                   ("only an integer tensor of one element can be used as an index, got a " + describe(t)).c_str());
             return nb::int_(element(t, "an index"));
           })
      .def("__bool__",
           [](const Tensor& t) {
             need_value(t, "bool()", true);
             if (t.numel() != 1)
               throw vt::Error(
                   "the truth value of a tensor with more than one element is ambiguous; use .any() or "
                   ".all()");
             return nb::bool_(PyObject_IsTrue(numpy_of(t).attr("item")().ptr()) == 1);
           })
      .def("__len__",
           [](const Tensor& t) {
             if (t.ndim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return t.shape(0);
           })
      .def(
          "__iter__", [](nb::handle t) { return python_half("_iterate")(t); }, "The rows, one by one.")
      .def(
          "__getitem__", [](nb::handle t, nb::handle index) { return python_half("_getitem")(t, index); },
          nb::arg("index").none(),
          "numpy's indexing: ints, slices (any step), None, ... and one integer array (a take).")
      .def("__repr__", [](const Tensor& t) { return fmt::format("{}", t); })
      .def(
          "astype", [](const Tensor& t, nb::handle dtype) { return t.astype(parse_dtype(dtype)); }, nb::arg("dtype"),
          "The tensor converted to dtype (itself where it already is).")
      .def(
          "to", [](const Tensor& t, const std::string& device) { return t.to(vt::parse_device(device)); },
          nb::arg("device"), "The tensor on another device (\"cpu\", \"cuda\", \"cuda:1\").")
      .def(
          "reshape",
          [](const Tensor& t, nb::args shape) {
            return vt::reshape(t, shape_of(shape.size() == 1 ? shape[0] : nb::handle(shape)));
          },
          "The elements in another shape (one axis may be -1).")
      .def(
          "__dlpack__", [](const Tensor& t, nb::kwargs kw) { return nb::cast(to_array(t)).attr("__dlpack__")(**kw); },
          "DLPack export (CPU).")
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); });
  // == is elementwise, so a tensor is not hashable; numpy's operators on a tensor defer to the tensor's reflected
  // ones.
  cls.attr("__hash__") = nb::none();
  cls.attr("__array_ufunc__") = nb::none();

  const std::pair<const char*, Reduce> reductions[] = {{"sum", vt::sum}, {"mean", vt::mean},
                                                       {"max", vt::max}, {"any", vt::any},
                                                       {"all", vt::all}, {"logsumexp", vt::logsumexp}};
  for (const auto& [name, f] : reductions)
    cls.def(
        name, [f](const Tensor& t, nb::handle axis, bool keepdims) { return f(t, axes_of(axis), keepdims); },
        nb::arg("axis") = nb::none(), nb::arg("keepdims") = false,
        fmt::format("vtape.{}(self, axis, keepdims).", name).c_str());

  // Operators: numpy's, with a Python number as a weak scalar.
  const std::pair<const char*, Binary> arithmetic[] = {
      {"add", vt::add}, {"sub", vt::sub}, {"mul", vt::mul}, {"truediv", vt::div}, {"matmul", vt::matmul}};
  for (const auto& [name, f] : arithmetic) {
    cls.def(fmt::format("__{}__", name).c_str(),
            [f](nb::handle a, const ArrayLike& b) { return binary(f, ArrayLike{nb::borrow(a)}, b); });
    cls.def(fmt::format("__r{}__", name).c_str(),
            [f](nb::handle a, const ArrayLike& b) { return binary(f, b, ArrayLike{nb::borrow(a)}); });
  }
  cls.def("__pow__", [](nb::handle a, const ArrayLike& b) { return power(ArrayLike{nb::borrow(a)}, b); });
  cls.def("__rpow__", [](nb::handle b, const ArrayLike& a) { return power(a, ArrayLike{nb::borrow(b)}); });
  const std::pair<const char*, Binary> comparisons[] = {{"lt", vt::less},    {"le", vt::less_equal},
                                                        {"gt", vt::greater}, {"ge", vt::greater_equal},
                                                        {"eq", vt::equal},   {"ne", vt::not_equal}};
  for (const auto& [name, f] : comparisons)
    cls.def(fmt::format("__{}__", name).c_str(),
            [f](nb::handle a, const ArrayLike& b) { return binary(f, ArrayLike{nb::borrow(a)}, b); });
  // &, |, ^ and ~ are logical on bool tensors (numpy's bitwise meaning for integers is not vtape's), // and % numpy's
  // floor division and remainder: written in vtape/_tensor.py.
  const std::pair<const char*, const char*> written_in_python[] = {{"and", "logical_and"},
                                                                   {"or", "logical_or"},
                                                                   {"xor", "logical_xor"},
                                                                   {"floordiv", "floor_divide"},
                                                                   {"mod", "remainder"}};
  for (const auto& [name, function] : written_in_python) {
    cls.def(fmt::format("__{}__", name).c_str(),
            [function](nb::handle a, nb::handle b) { return python_half(function)(a, b); });
    cls.def(fmt::format("__r{}__", name).c_str(),
            [function](nb::handle a, nb::handle b) { return python_half(function)(b, a); });
  }
  cls.def("__invert__", [](const Tensor& t) {
    if (t.dtype() != vt::DType::boolean)
      throw nb::type_error(fmt::format("~ on a {} tensor: vtape has no bitwise ops; ~ is logical not on bool tensors",
                                       vt::name_of(t.dtype()))
                               .c_str());
    return vt::logical_not(t);
  });
  cls.def("__neg__", [](const Tensor& t) { return vt::neg(t); });
  cls.def("__pos__", [](const Tensor& t) { return t; });
  cls.def("__abs__", [](const Tensor& t) { return vt::abs(t); });

  m.def("_from_array", &from_array, nb::arg("array"));
}

}  // namespace vtape_python
