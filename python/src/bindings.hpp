#pragma once
// The pieces of the Python module vtape._vtape (nanobind), each binding one part of the C++ API.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vtape/vtape.hpp>

namespace nb = nanobind;

namespace vtape_python {

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
// A dtype given as a numpy dtype, a Python type or a name (None: float64).
vt::DType parse_dtype(nb::handle dtype);

void bind_tensor(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_transforms(nb::module_& m);
void bind_loops(nb::module_& m);

}  // namespace vtape_python
