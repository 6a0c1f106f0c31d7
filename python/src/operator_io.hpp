#pragma once
// How the distributed operators (ops/) meet Python: a callable as an operator's source of
// tables, and one as the callback that takes its output, each called with the GIL taken while
// the operator runs without it.

#include "bindings.hpp"

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/groupby.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spillway::python {

/// `next`, a Python callable that returns the next spillway Table or None after the last, as a
/// source: each call takes the GIL, and the Table is moved out of its Python object (which is
/// left without columns). `what` names the operator in the error for anything else.
ops::TableSource source_of(nb::callable next, const char* what);

/// `out`, a Python callable taking (partition, Table), as an operator's output callback: each
/// table is handed over (moved into a Python object that keeps `br` alive) with the GIL taken.
std::function<void(std::uint32_t, Table&&)> sink_of(nb::callable out, BufferResource& br);

/// The join of `how` ("inner", "left", "left_semi", "left_anti" or "full").
/// @throws spillway::logic_error naming the others
JoinType join_type(const std::string& how);

/// (column index, op name) pairs as aggregations. @throws spillway::logic_error for an op
/// that is not count, sum, min, max or mean
using AggSpecs = std::vector<std::pair<std::size_t, std::string>>;
std::vector<Aggregation> aggregations_of(const AggSpecs& aggs);

}  // namespace spillway::python
