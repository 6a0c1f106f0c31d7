#pragma once
/// @file groupby.hpp
/// The local hash group-by of a host table (one partition of a distributed group-by, or its
/// pre-aggregation): one output row per distinct key, nulls forming their own group as in SQL's
/// GROUP BY, with count, sum, min, max and mean of value columns.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace spillway {

enum class AggOp : std::uint8_t {
  count,  ///< non-null values, INT64
  sum,    ///< INT64 for signed integers, UINT64 for unsigned ones, FLOAT64 for floats
  min,    ///< the column's type
  max,    ///< the column's type
  mean,   ///< FLOAT64
};

/// "count", "sum", "min", "max", "mean"
const char* to_string(AggOp op) noexcept;

struct Aggregation {
  std::size_t column;
  AggOp op;
};

/// The groups of `table` (host memory) by key columns `keys`, in the order of their first
/// rows: the key columns, then one column per aggregation, named "<column>_<op>". Null values
/// are skipped, as SQL does; a group without any non-null value has a count of 0 and nulls
/// for the others. Keys compare as the join's (NaN = NaN, -0.0 = 0.0), nulls equal each other.
/// @throws spillway::logic_error for columns out of range, sum or mean of BOOL8 or STRING
///         columns, min or max of STRING columns; spillway::out_of_memory
Table groupby(const TableView& table, std::span<const std::size_t> keys,
              std::span<const Aggregation> aggregations, BufferResource& br);

/// The means of groups from their sums (INT64, UINT64 or FLOAT64, as AggOp::sum gives them)
/// and their counts of values (INT64) (host memory): the last step of a mean whose sums and
/// counts were aggregated apart (a distributed group-by's). A FLOAT64 column, null where the
/// count is 0 or the sum is null.
/// @throws spillway::logic_error for other types or lengths; spillway::out_of_memory
Column mean_of(const ColumnView& sums, const ColumnView& counts, BufferResource& br);

}  // namespace spillway
