#pragma once
// What the parts of the extension share.

#include <nanobind/nanobind.h>

namespace spillway::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_memory(nb::module_& m);
void bind_arrow(nb::module_& m);
void bind_comm(nb::module_& m);
void bind_shuffle(nb::module_& m);
void bind_dlpack(nb::module_& m);
void bind_join(nb::module_& m);
void bind_groupby(nb::module_& m);
void bind_sort(nb::module_& m);
void bind_streaming(nb::module_& m);

}  // namespace spillway::python
