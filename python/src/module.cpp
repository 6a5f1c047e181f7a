// vtape._vtape, the compiled half of the Python package `vtape` (python/vtape/ is the other half): vt::Error becomes
// vtape.Error (a ValueError), vt::NotPositiveDefinite vtape.NotPositiveDefinite with its batch_index and minor.
#include "bindings.hpp"

NB_MODULE(_vtape, m) {
  m.doc() = "vtape's C++ core: tensors, ops and the transforms over flat lists of tensors";
  m.attr("__version__") = vt::version();
  // The module holds the two types for as long as the interpreter runs.
  static PyObject* error = nb::exception<vt::Error>(m, "Error", PyExc_ValueError).ptr();
  static PyObject* not_pd = nb::exception<vt::NotPositiveDefinite>(m, "NotPositiveDefinite", error).ptr();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
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
