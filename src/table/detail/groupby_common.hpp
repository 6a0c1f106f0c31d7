#pragma once
// What the CPU and GPU group-bys share (internal to table/): the check of the arguments, and
// each aggregation's output type and name.

#include <spillway/table/column_view.hpp>
#include <spillway/table/groupby.hpp>

#include <span>
#include <string>

namespace spillway::detail {

/// The key columns (with their names), after checking the keys and aggregations: at least
/// one key, columns in range, and an op each value column's type has.
/// @throws spillway::logic_error naming the problem
TableView groupby_keys(const TableView& table, std::span<const std::size_t> keys,
                       std::span<const Aggregation> aggregations);

/// The type of aggregation `op` of a column of type `t`: INT64 for count, the sum type for
/// sum (INT64 for signed integers, UINT64 for unsigned ones, FLOAT64 for floats), FLOAT64 for
/// mean, `t` for min and max.
TypeId aggregate_type(TypeId t, AggOp op) noexcept;

/// The output column's name: "<column>_<op>".
std::string aggregate_name(const TableView& table, const Aggregation& a);

/// The checks of mean_of's arguments. @throws spillway::logic_error naming the problem
void check_mean_of(const ColumnView& sums, const ColumnView& counts);

}  // namespace spillway::detail
