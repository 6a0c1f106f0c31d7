// The local sort of a spillway table (table/sort.hpp), for spillway.sort in one process, and the
// distributed one (ops/sort.hpp), for spillway.sort with a communicator.
#include "bindings.hpp"
#include "operator_io.hpp"
#include "table.hpp"

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/sort.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <tuple>
#include <vector>

namespace spillway::python {

namespace {

/// (column index, descending, nulls first) per key.
using KeySpecs = std::vector<std::tuple<std::size_t, bool, bool>>;

std::vector<SortKey> keys_of(const KeySpecs& specs) {
  std::vector<SortKey> keys;
  for (const auto& [column, descending, nulls_first] : specs) {
    keys.push_back({column, descending, nulls_first});
  }
  return keys;
}

}  // namespace

void bind_sort(nb::module_& m) {
  m.def(
      "sort_table",
      [](const Table& table, const KeySpecs& specs, BufferResource& br,
         std::optional<std::uint64_t> limit) {
        const std::vector<SortKey> keys = keys_of(specs);
        SPILLWAY_EXPECTS(on_host(table), "sort: the table must be in host memory");
        nb::gil_scoped_release nogil;
        return sort(table.view(), keys, br, limit ? *limit : static_cast<std::size_t>(-1));
      },
      nb::arg("table"), nb::arg("keys"), nb::arg("br"), nb::arg("limit") = nb::none(),
      nb::keep_alive<0, 3>(),
      "The local stable sort of a host table on (column index, descending, nulls first) keys; "
      "`limit` keeps the first rows only.");
  m.def(
      "sort_op",
      [](Communicator& comm, BufferResource& br, nb::callable input, const KeySpecs& specs,
         std::size_t samples, std::optional<std::uint64_t> limit, std::uint32_t op,
         nb::callable out) {
        const std::vector<SortKey> keys = keys_of(specs);
        ops::SortOptions o;
        o.samples_per_rank = samples;
        o.limit = limit;
        o.op = static_cast<OpID>(op);
        const auto sink = sink_of(std::move(out), br);
        const auto rank = static_cast<std::uint32_t>(comm.rank());
        const ops::TableSource source = source_of(std::move(input), "sort");
        nb::gil_scoped_release nogil;
        ops::sort(comm, br, source, keys, o, [&](Table&& t) { sink(rank, std::move(t)); });
      },
      nb::arg("comm"), nb::arg("br"), nb::arg("input"), nb::arg("keys"), nb::arg("samples"),
      nb::arg("limit"), nb::arg("op"), nb::arg("out"),
      "The distributed sort of a source (a callable giving the next spillway Table or None); "
      "calls out(rank, Table) once with this rank's range of the global order, holding the GIL "
      "only for the callbacks.");
}

}  // namespace spillway::python
