// The transforms over flat lists of tensors (autodiff/grad.hpp's FlatFunction), which vtape/_transforms.py wraps
// with pytrees, and jit: a plan cache whose calls run with the GIL released.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <any>

#include "bindings.hpp"

namespace vtape_python {

namespace {

using vt::Tensor;
using Tensors = std::vector<Tensor>;

// A Python function of a list of tensors returning a list of tensors, as the C++ transforms take it (called with
// the GIL held, as the transforms are).
vt::detail::FlatFunction flat(nb::callable f) {
  return [f = std::move(f)](const Tensors& args) { return nb::cast<Tensors>(f(args)); };
}

// The structure a jitted function's results are rebuilt with, a Python object kept with each plan: held through a
// shared_ptr, so that the cache copies it without touching Python's reference counts (it runs without the GIL), and
// released with the GIL.
using Skeleton = std::shared_ptr<nb::object>;
Skeleton keep(nb::handle structure) {
  return Skeleton(new nb::object(nb::borrow(structure)), [](nb::object* p) {
    nb::gil_scoped_acquire gil;
    delete p;
  });
}

// A jitted Python function's plans: f is traced by a Python tracer that returns the flat results and the structure
// to rebuild them with (a Python object kept with the plan).
class Jitted {
 public:
  explicit Jitted(const std::string& passes) : cache_(std::make_shared<vt::detail::JitCache>(vt::JitOptions{passes})) {}

  // The results and their structure, or None where the call must run the function op by op: inside a trace, or
  // where a transform needs its derivatives and the plan cannot run as one op (as the C++ Jitted decides).
  nb::object call(const Tensors& inputs, nb::callable tracer) {
    if (vt::detail::tracing()) return nb::none();
    const auto entry = lookup(inputs, tracer, true);
    const Skeleton& skeleton = std::any_cast<const Skeleton&>(entry->skeleton);
    bool tracked = vt::detail::differentiating();
    for (const Tensor& t : inputs) tracked |= t.defined() && t.impl().tracked;
    if (tracked) {
      std::optional<Tensors> out = vt::detail::call_as_op(function(tracer), inputs, entry);
      if (!out) return nb::none();
      return nb::make_tuple(*out, *skeleton);
    }
    if (entry->runs_eagerly) return nb::none();
    Tensors results;
    {
      nb::gil_scoped_release nogil;
      results = vt::detail::run_plan(*entry->plan, inputs);
    }
    return nb::make_tuple(results, *skeleton);
  }

  vt::PlanSummary compile(const Tensors& inputs, nb::callable tracer) { return lookup(inputs, tracer, false)->summary; }

  std::string explain(const Tensors& inputs, nb::callable tracer) {
    return vt::detail::explain(*lookup(inputs, tracer, false)->plan, inputs);
  }

  vt::JitCounters counters() const { return cache_->counters(); }

 private:
  // The GIL is released while the cache is consulted, so that a thread waiting for another's trace does not hold it;
  // the tracer takes it back to run Python.
  std::shared_ptr<const vt::detail::CacheEntry> lookup(const Tensors& inputs, nb::callable& tracer, bool count_call) {
    nb::gil_scoped_release nogil;
    return cache_->get(
        inputs,
        [&tracer](const Tensors& symbolic) {
          nb::gil_scoped_acquire gil;
          nb::tuple traced = nb::cast<nb::tuple>(tracer(symbolic));
          return vt::detail::Traced{nb::cast<Tensors>(traced[0]), std::any(keep(traced[1]))};
        },
        count_call);
  }

  // The function as one op (vt::detail::Function), made on the first call that needs it: this object serves one
  // structure of arguments, so any call's tracer runs the same function. It holds the tracer with the GIL's rules.
  std::shared_ptr<vt::detail::Function> function(nb::callable& tracer) {
    if (!function_) {
      tracer_ = keep(tracer);
      function_ = std::make_shared<vt::detail::Function>();
      function_->code = [t = tracer_](const Tensors& args) {
        nb::gil_scoped_acquire gil;
        return nb::cast<Tensors>(nb::cast<nb::tuple>((*t)(args))[0]);
      };
      function_->cache = cache_;
    }
    return function_;
  }

 public:
  // The garbage collector's view of what this object holds: the tracer (whose function may refer back to the
  // jitted object, a cycle through C++ that the collector would not see otherwise).
  static int traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    if (!nb::inst_ready(self)) return 0;
    const Jitted* j = nb::inst_ptr<Jitted>(self);
    if (j->tracer_) Py_VISIT(j->tracer_->ptr());
    return 0;
  }
  static int clear(PyObject* self) {
    Jitted* j = nb::inst_ptr<Jitted>(self);
    j->function_.reset();
    j->tracer_.reset();
    return 0;
  }

 private:
  std::shared_ptr<vt::detail::JitCache> cache_;
  // Touched with the GIL held. Ops made by the function's calls share them and keep them alive while they live.
  Skeleton tracer_;
  std::shared_ptr<vt::detail::Function> function_;
};

PyType_Slot jitted_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&Jitted::traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(&Jitted::clear)},
                              {0, nullptr}};

nb::dict as_dict(const vt::PlanSummary& s) {
  nb::dict d;
  d["traced_ops"] = s.traced_ops;
  d["steps"] = s.steps;
  d["kernels"] = s.kernels;
  d["constants"] = s.constants;
  d["folded"] = s.folded;
  d["merged"] = s.merged;
  d["fused"] = s.fused;
  d["fused_runs"] = s.fused_runs;
  d["arena_bytes_per_example"] = s.arena_bytes_per_example;
  d["arena_bytes_fixed"] = s.arena_bytes_fixed;
  d["passes"] = s.passes;
  d["rewrites"] = s.rewrites;
  return d;
}

nb::dict as_dict(const vt::JitCounters& c) {
  nb::dict d;
  d["calls"] = c.calls;
  d["traces"] = c.traces;
  d["cache_hits"] = c.cache_hits;
  d["trace_ms"] = c.trace_ms;
  d["plan_ms"] = c.plan_ms;
  d["recordings"] = c.recordings;
  d["replays"] = c.replays;
  d["chunked_calls"] = c.chunked_calls;
  return d;
}

}  // namespace

void bind_transforms(nb::module_& m) {
  m.def(
      "value_and_grad_flat",
      [](nb::callable f, const Tensors& args, const std::vector<int>& argnums) {
        return vt::detail::value_and_grad_flat(flat(std::move(f)), args, argnums);
      },
      nb::arg("f"), nb::arg("args"), nb::arg("argnums"));
  m.def(
      "vjp_flat",
      [](nb::callable f, const Tensors& args) {
        auto [out, pullback] = vt::detail::vjp_flat(flat(std::move(f)), args);
        return std::pair{out, std::function<Tensors(const Tensors&)>(pullback)};
      },
      nb::arg("f"), nb::arg("args"));
  m.def(
      "jvp_flat",
      [](nb::callable f, const Tensors& args, const Tensors& tangents) {
        return vt::detail::jvp_flat(flat(std::move(f)), args, tangents);
      },
      nb::arg("f"), nb::arg("args"), nb::arg("tangents"));
  m.def(
      "jacfwd_flat",
      [](nb::callable f, const Tensors& args, const std::vector<int>& argnums) {
        return vt::detail::jacfwd_flat(flat(std::move(f)), args, argnums);
      },
      nb::arg("f"), nb::arg("args"), nb::arg("argnums"));
  m.def(
      "jacrev_flat",
      [](nb::callable f, const Tensors& args, const std::vector<int>& argnums) {
        return vt::detail::jacrev_flat(flat(std::move(f)), args, argnums);
      },
      nb::arg("f"), nb::arg("args"), nb::arg("argnums"));
  m.def(
      "vmap_flat",
      [](nb::callable f, const Tensors& args, const std::vector<std::optional<std::int64_t>>& in_axes,
         std::int64_t out_axes) { return vt::detail::vmap_flat(flat(std::move(f)), args, in_axes, out_axes); },
      nb::arg("f"), nb::arg("args"), nb::arg("in_axes"), nb::arg("out_axes"));
  m.attr("batched_out") = vt::batched_out;
  m.def("_in_vmap_body", &vt::detail::in_vmap_body);
  m.def("tracking", [](const Tensor& t) { return t.defined() && t.impl().tracked; });

  nb::class_<Jitted>(m, "Jitted", nb::type_slots(jitted_slots))
      .def(nb::init<const std::string&>(), nb::arg("passes") = "")
      .def("call", &Jitted::call, nb::arg("inputs"), nb::arg("tracer"))
      .def(
          "compile", [](Jitted& j, const Tensors& in, nb::callable t) { return as_dict(j.compile(in, std::move(t))); },
          nb::arg("inputs"), nb::arg("tracer"))
      .def("explain", &Jitted::explain, nb::arg("inputs"), nb::arg("tracer"))
      .def("counters", [](const Jitted& j) { return as_dict(j.counters()); });
}

}  // namespace vtape_python
