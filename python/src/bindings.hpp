#pragma once
// The pieces of the Python module vtape._vtape (nanobind), each binding one part of the C++ API.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vtape/vtape.hpp>

namespace nb = nanobind;

namespace vtape_python {

// An argument that takes a tensor or anything vtape.asarray takes (numpy arrays, Python numbers and sequences,
// DLPack): bound functions accept arrays as jax.numpy's do. It converts when the function runs, so a refused input
// (a complex array) raises asarray's error rather than "incompatible function arguments".
struct ArrayLike {
  nb::object object;
  vt::Tensor tensor() const;
  // A Python int or float (bool is not one): a weak scalar beside a tensor, which keeps the tensor's dtype.
  bool is_number() const;
  // The number as a scalar of `like`'s kind (a weak scalar; an int stays an int beside an integer tensor).
  vt::Tensor weak_like(const vt::Tensor& like) const;
};

// A Python value asked of a tensor that has none to give (vtape.ConcretizationError: a vtape.Error and a TypeError).
struct ConcretizationError : vt::Error {
  using vt::Error::Error;
};

// Read-only: a tensor never writes to memory it borrows.
using AnyArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using ReadOnlyArray = nb::ndarray<nb::numpy, nb::ro>;

// A tensor's elements as a read-only numpy array that keeps the tensor alive (copied only where a batch is stored
// once for all its examples, or the tensor is on a GPU).
ReadOnlyArray to_array(const vt::Tensor& t);
// An array's elements as a tensor: borrowed where it is row-major, copied otherwise.
vt::Tensor from_array(const AnyArray& a);
// A shape as a Python tuple, and a Python int or sequence of ints as a shape.
nb::tuple shape_tuple(const vt::Shape& shape);
vt::Shape shape_of(nb::handle shape);
// Reduction axes given as None (every axis), an int or a sequence of ints.
vt::Axes axes_of(nb::handle axis);
// A dtype given as a numpy dtype, a Python type or a name (None: float64).
vt::DType parse_dtype(nb::handle dtype);

// f(a, b) of two operands, with a Python number beside a tensor as a weak scalar (of two numbers, the first becomes
// a tensor): the rule of the binary ops and of Tensor's operators.
vt::Tensor binary(vt::Tensor (*f)(const vt::Tensor&, const vt::Tensor&), const ArrayLike& a, const ArrayLike& b);
// a ** b by numpy's rules (integers to integer powers stay integers), a number beside a tensor as in binary.
vt::Tensor power(const ArrayLike& a, const ArrayLike& b);
// A function of vtape._tensor, the Python half of Tensor's methods (indexing, .at, dtypes as numpy's).
nb::object python_half(const char* name);

void bind_tensor(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_transforms(nb::module_& m);
void bind_loops(nb::module_& m);

}  // namespace vtape_python

namespace nanobind::detail {
template <>
struct type_caster<vtape_python::ArrayLike> {
  NB_TYPE_CASTER(vtape_python::ArrayLike, const_name("vtape._vtape.Tensor | numpy.typing.ArrayLike"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    value.object = borrow(src);
    return true;
  }
  static handle from_cpp(const vtape_python::ArrayLike& v, rv_policy, cleanup_list*) noexcept {
    return v.object.inc_ref();
  }
};
}  // namespace nanobind::detail
