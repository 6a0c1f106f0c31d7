// The local hash join of two spillway tables (table/join.hpp), for spillway.join, and the
// distributed one (ops/hash_join.hpp), for spillway.hash_join.
#include "bindings.hpp"
#include "operator_io.hpp"
#include "table.hpp"

#include <spillway/comm/communicator.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/table/join.hpp>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway::python {

void bind_join(nb::module_& m) {
  m.def(
      "join_tables",
      [](const Table& left, const Table& right, const std::vector<std::size_t>& left_keys,
         const std::vector<std::size_t>& right_keys, const std::string& how, BufferResource& br) {
        const JoinType type = join_type(how);
        SPILLWAY_EXPECTS(on_host(left) && on_host(right),
                         "join: both tables must be in host memory");
        nb::gil_scoped_release nogil;
        return hash_join(left.view(), left_keys, right.view(), right_keys, type, br);
      },
      nb::arg("left"), nb::arg("right"), nb::arg("left_keys"), nb::arg("right_keys"),
      nb::arg("how"), nb::arg("br"), nb::keep_alive<0, 6>(),
      "The local hash join of two host tables on key column indices (SQL nulls).");
  m.def(
      "hash_join_op",
      [](Communicator& comm, BufferResource& br, nb::callable left,
         const std::vector<std::size_t>& left_keys, nb::callable right,
         const std::vector<std::size_t>& right_keys, const std::string& how,
         std::uint32_t partitions, std::uint64_t right_bytes, std::size_t output_chunk_bytes,
         std::uint32_t op, nb::callable out) {
        ops::HashJoinOptions o;
        o.type = join_type(how);
        o.partitions = partitions;
        o.right_bytes = right_bytes;
        o.output_chunk_bytes = output_chunk_bytes;
        o.op = static_cast<OpID>(op);
        const auto chunk = sink_of(std::move(out), br);
        const ops::TableSource l = source_of(std::move(left), "hash_join");
        const ops::TableSource r = source_of(std::move(right), "hash_join");
        nb::gil_scoped_release nogil;
        return to_string(ops::hash_join(comm, br, l, left_keys, r, right_keys, o, chunk));
      },
      nb::arg("comm"), nb::arg("br"), nb::arg("left"), nb::arg("left_keys"), nb::arg("right"),
      nb::arg("right_keys"), nb::arg("how"), nb::arg("partitions"), nb::arg("right_bytes"),
      nb::arg("output_chunk_bytes"), nb::arg("op"), nb::arg("out"),
      "The distributed hash join of two sources (callables giving the next spillway Table or "
      "None) on key column indices; calls out(partition, Table) with each output chunk, holding "
      "the GIL only for the callbacks. Returns the plan it ran, in words.");
}

}  // namespace spillway::python
