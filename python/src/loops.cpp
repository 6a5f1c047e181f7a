// The loop ops over flat tensors (autodiff/loops.hpp's detail layer), which vtape/_loops.py drives with pytrees: a
// loop is one op whose body is traced once, as in C++.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace vtape_python {

namespace {

using vt::Tensor;
using Tensors = std::vector<Tensor>;
using vt::detail::FlatBody;

std::vector<vt::Shape> shapes_of(const std::vector<nb::tuple>& shapes) {
  std::vector<vt::Shape> out;
  for (const nb::tuple& s : shapes) out.push_back(shape_of(s));
  return out;
}

std::vector<nb::tuple> tuples_of(const std::vector<vt::Shape>& shapes) {
  std::vector<nb::tuple> out;
  for (const vt::Shape& s : shapes) out.push_back(shape_tuple(s));
  return out;
}

}  // namespace

void bind_loops(nb::module_& m) {
  m.def(
      "_scan_results",
      [](FlatBody body, const Tensor& init, std::optional<Tensor> xs, std::int64_t length, std::int64_t first_index,
         bool reverse, std::int64_t checkpoint_every, const std::string& name) {
        return vt::detail::scan_results(body, init, xs ? *xs : Tensor(), length, first_index, reverse, checkpoint_every,
                                        name.c_str());
      },
      nb::arg("body"), nb::arg("init"), nb::arg("xs").none(), nb::arg("length"), nb::arg("first_index"),
      nb::arg("reverse"), nb::arg("checkpoint_every"), nb::arg("name"));
  m.def("_while_flat", [](const vt::detail::FlatMap& cond, const vt::detail::FlatMap& body, const Tensor& init) {
    return vt::detail::while_flat(cond, body, init);
  });
  // The carry's (or y's) tensors as one flat vector of the loop's dtype, on `like`'s device.
  m.def("_pack", [](const Tensors& leaves, const Tensor& like, const std::string& name, const std::string& what) {
    return vt::detail::pack(leaves, like.dtype(), like.device(), name.c_str(), what.c_str());
  });
  m.def("_pack_init", [](const Tensors& leaves, const std::string& name) {
    if (leaves.empty()) throw vt::Error(name + ": the carry holds no tensor");
    return vt::detail::pack(leaves, vt::detail::loop_dtype(leaves, name.c_str()), leaves[0].device(), name.c_str(),
                            "carry");
  });
  m.def("_pack_rows", [](const Tensors& leaves, std::int64_t length, const Tensor& like, const std::string& name) {
    return vt::detail::pack_rows(leaves, length, like.dtype(), name.c_str());
  });
  m.def("_unpack", [](const Tensor& flat, const std::vector<nb::tuple>& shapes, std::int64_t rows) {
    return vt::detail::unpack(flat, shapes_of(shapes), rows);
  });
  m.def("_leaf_shapes",
        [](const Tensors& leaves, bool per_step) { return tuples_of(vt::detail::leaf_shapes(leaves, per_step)); });
  m.def("_loop_length",
        [](const Tensors& xs, const std::string& name) { return vt::detail::loop_length(xs, name.c_str()); });
  m.def("_check_leaves",
        [](const Tensors& got, const std::vector<nb::tuple>& shapes, const std::string& name, const std::string& what) {
          vt::detail::check_leaves(got, shapes_of(shapes), name.c_str(), what.c_str());
        });
  // A concrete unbatched predicate's truth, or None when it is traced or batched.
  m.def("_concrete_truth", [](const Tensor& pred) -> std::optional<bool> {
    vt::detail::check_predicate(pred, "while_loop");
    bool value = false;
    if (vt::detail::concrete_predicate(pred, value)) return value;
    return std::nullopt;
  });
  m.def("_cond_flat", [](const Tensor& pred, const vt::detail::Branch& on_true, const vt::detail::Branch& on_false) {
    return vt::detail::cond_flat(pred, on_true, on_false);
  });
}

}  // namespace vtape_python
