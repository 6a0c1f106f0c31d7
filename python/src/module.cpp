// The Python extension spillway._spillway: errors as Python exceptions, the version and the
// GPU, then each part in its own file (memory.cpp, arrow.cpp, dlpack.cpp,
// comm.cpp, shuffle.cpp, join.cpp, groupby.cpp).
#include "bindings.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/setting_by_name.hpp>

#include <nanobind/stl/string.h>

namespace spillway::python {

namespace {

/// The Python classes of spillway's errors (spillway/errors.py registers them at import).
nb::dict& error_classes() {
  static auto* classes = new nb::dict();  // never freed: it may outlive the interpreter
  return *classes;
}

void raise(const char* name, const char* what) {
  PyObject* cls = PyExc_RuntimeError;
  if (error_classes().contains(name)) cls = error_classes()[name].ptr();
  PyErr_SetString(cls, what);
}

}  // namespace

void bind_errors(nb::module_& m) {
  m.def(
      "_register_errors", [](nb::dict classes) { error_classes() = std::move(classes); },
      "Sets the Python classes that spillway's C++ errors become (spillway.errors).");
  // Every spillway error becomes the Python exception of its kind, with the same message.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const out_of_memory& e) {
      raise("OutOfMemory", e.what());
    } catch (const comm_error& e) {
      raise("CommError", e.what());
    } catch (const io_error& e) {
      raise("IoError", e.what());
    } catch (const corrupt_data_error& e) {
      raise("CorruptDataError", e.what());
    } catch (const cuda_error& e) {
      raise("CudaError", e.what());
    } catch (const logic_error& e) {
      raise("UsageError", e.what());
    }
  });
}

}  // namespace spillway::python

NB_MODULE(_spillway, m) {
  using namespace spillway;
  using namespace spillway::python;
  m.doc() = "spillway's C++ core: tiers with limits, Arrow tables, communicators, the shuffle";
  m.attr("__version__") = SPILLWAY_VERSION;
  m.def(
      "cuda_available", [] { return cuda::is_available(); },
      "Whether a GPU is usable (a CUDA build on a machine with a GPU).");
  m.def(
      "settings",
      [] {
        nb::dict d;
        for (const auto& s : options::describe()) d[s.variable.c_str()] = s.current;
        return d;
      },
      "Every SPILLWAY_* setting and its current value.");
  m.def("set_setting", &options::set_by_name, nb::arg("variable"), nb::arg("value"),
        "Sets the setting of a SPILLWAY_* variable from text, checked as the environment's.");
  m.def("setting", &options::get_by_name, nb::arg("variable"),
        "The current value of a SPILLWAY_* variable's setting, as text.");
  bind_errors(m);
  bind_memory(m);
  bind_arrow(m);
  bind_comm(m);
  bind_shuffle(m);
  bind_dlpack(m);
  bind_join(m);
  bind_groupby(m);
  bind_sort(m);
  bind_streaming(m);
}
