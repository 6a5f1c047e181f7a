// vtape._vtape, the compiled half of the Python package `vtape` (python/vtape/ is the other half): vt::Error becomes
// vtape.Error (a ValueError), vt::NotPositiveDefinite vtape.NotPositiveDefinite with its batch_index and minor.
#include "bindings.hpp"

NB_MODULE(_vtape, m) {
  m.doc() = "vtape's C++ core: tensors, ops and the transforms over flat lists of tensors";
  m.attr("__version__") = vt::version();
  // The module holds the two types for as long as the interpreter runs.
  static PyObject* error = nb::exception<vt::Error>(m, "Error", PyExc_ValueError).ptr();
  static PyObject* not_pd = nb::exception<vt::NotPositiveDefinite>(m, "NotPositiveDefinite", error).ptr();
  nb::handle(error).attr("__doc__") =
      "vtape's error for bad input (a ValueError): the message names the op, the shapes and dtypes and, for batched "
      "linear algebra, the example.";
  nb::handle(not_pd).attr("__doc__") =
      "A factorization met a matrix that is not positive definite: batch_index is the failing example (or matrix), "
      "minor the order of the failing leading minor (1-based, as LAPACK's info).";
  static PyObject* concretization = [&] {
    nb::object bases = nb::make_tuple(nb::handle(error), nb::handle(PyExc_TypeError));
    PyObject* type = PyErr_NewExceptionWithDoc(
        "vtape._vtape.ConcretizationError",
        "A Python value (bool, int, float, a numpy array) asked of a tensor that has none to give: a traced tensor "
        "inside jit, a batched one under vmap, one that grad differentiates. A vtape.Error and a TypeError, as JAX's "
        "ConcretizationTypeError.",
        bases.ptr(), nullptr);
    if (!type) throw nb::python_error();
    m.attr("ConcretizationError") = nb::handle(type);
    return type;
  }();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const vtape_python::ConcretizationError& e) {
      PyErr_SetString(concretization, e.what());
    } catch (const vt::NotPositiveDefinite& e) {
      nb::object instance = nb::handle(not_pd)(e.what());
      instance.attr("batch_index") = e.batch_index;
      instance.attr("minor") = e.minor;
      PyErr_SetObject(not_pd, instance.ptr());
    } catch (const vt::Error& e) {
      PyErr_SetString(error, e.what());
    }
  });
  vtape_python::bind_tensor(m);
  vtape_python::bind_ops(m);
  vtape_python::bind_transforms(m);
  vtape_python::bind_loops(m);
}
