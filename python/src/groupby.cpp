// The local group-by of a spillway table (table/groupby.hpp), for spillway.groupby in one
// process, and the distributed one (ops/groupby.hpp), for spillway.groupby with a communicator.
#include "bindings.hpp"
#include "operator_io.hpp"
#include "table.hpp"

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/groupby.hpp>
#include <spillway/table/groupby.hpp>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

namespace spillway::python {

void bind_groupby(nb::module_& m) {
  m.def(
      "groupby_table",
      [](const Table& table, const std::vector<std::size_t>& keys, const AggSpecs& aggs,
         BufferResource& br) {
        const std::vector<Aggregation> a = aggregations_of(aggs);
        SPILLWAY_EXPECTS(on_host(table), "groupby: the table must be in host memory");
        nb::gil_scoped_release nogil;
        return groupby(table.view(), keys, a, br);
      },
      nb::arg("table"), nb::arg("keys"), nb::arg("aggregations"), nb::arg("br"),
      nb::keep_alive<0, 4>(),
      "The local group-by of a host table: key column indices, (column index, op) pairs.");
  m.def(
      "groupby_check",
      [](const Table& table, const std::vector<std::size_t>& keys, const AggSpecs& aggs,
         BufferResource& br) {
        TableView none = table.view();  // the schema without rows: only the checks run
        for (ColumnView& c : none.columns) c.size = 0;
        (void)groupby(none, keys, aggregations_of(aggs), br);
      },
      nb::arg("table"), nb::arg("keys"), nb::arg("aggregations"), nb::arg("br"),
      "Raises what groupby_table would for these keys and aggregations of the table's schema.");
  m.def(
      "groupby_op",
      [](Communicator& comm, BufferResource& br, nb::callable input,
         const std::vector<std::size_t>& keys, const AggSpecs& aggs, std::uint32_t partitions,
         std::uint32_t op, nb::callable out) {
        const std::vector<Aggregation> a = aggregations_of(aggs);
        ops::GroupByOptions o;
        o.partitions = partitions;
        o.op = static_cast<OpID>(op);
        const auto groups = sink_of(std::move(out), br);
        const ops::TableSource source = source_of(std::move(input), "groupby");
        nb::gil_scoped_release nogil;
        ops::groupby(comm, br, source, keys, a, o, groups);
      },
      nb::arg("comm"), nb::arg("br"), nb::arg("input"), nb::arg("keys"), nb::arg("aggregations"),
      nb::arg("partitions"), nb::arg("op"), nb::arg("out"),
      "The distributed group-by of a source (a callable giving the next spillway Table or None) "
      "on key column indices with (column index, op) pairs; calls out(partition, Table) with "
      "each of this rank's partitions' groups, holding the GIL only for the callbacks.");
}

}  // namespace spillway::python
