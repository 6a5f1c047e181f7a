// vtape.Tensor: numpy in and out without copies where the layout allows (the buffer protocol, __array__, DLPack),
// inspection, and the conversions every other binding uses.
#include "bindings.hpp"

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

}  // namespace

ReadOnlyArray to_array(const vt::Tensor& t) {
  vt::Tensor host = t.device() == vt::Device::cpu() ? t : t.to(vt::Device::cpu());
  if (host.is_batched()) host = vt::unbatch(host);  // [B, ...]: its own memory, or a copy of a broadcast batch
  const std::vector<std::size_t> shape = stored_shape(host);
  // The array keeps the tensor's storage alive; it is read-only, since tensors never change.
  auto* owner = new vt::Tensor(host);
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<vt::Tensor*>(p); });
  return ReadOnlyArray(const_cast<void*>(host.raw_data()), shape.size(), shape.data(), keep, nullptr,
                       dlpack_dtype(host.dtype()), nb::device::cpu::value);
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

void bind_tensor(nb::module_& m) {
  nb::class_<vt::Tensor>(m, "Tensor",
                         "An immutable tensor: its per-example shape, its dtype, and for a batched tensor (vmap, "
                         "as_batch) its batch.")
      .def_prop_ro("shape", [](const vt::Tensor& t) { return shape_tuple(t.shape()); })
      .def_prop_ro("dtype_name", [](const vt::Tensor& t) { return std::string(vt::name_of(t.dtype())); })
      .def_prop_ro("ndim", [](const vt::Tensor& t) { return t.ndim(); })
      .def_prop_ro("size", [](const vt::Tensor& t) { return t.numel(); })
      .def_prop_ro("device", [](const vt::Tensor& t) { return vt::to_string(t.device()); })
      .def_prop_ro("is_batched", [](const vt::Tensor& t) { return t.is_batched(); })
      .def_prop_ro("batch_size", [](const vt::Tensor& t) { return t.batch_size(); })
      .def("__array_view__", &to_array, "The elements as a read-only numpy array, without a copy where possible.")
      .def("__repr__", [](const vt::Tensor& t) { return fmt::format("{}", t); })
      .def("astype", [](const vt::Tensor& t, nb::handle dtype) { return t.astype(parse_dtype(dtype)); })
      .def("to", [](const vt::Tensor& t, const std::string& device) { return t.to(vt::parse_device(device)); });
  m.def("_from_array", &from_array, nb::arg("array"));
}

}  // namespace vtape_python
