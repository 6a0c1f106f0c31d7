#pragma once
// Argument checks shared by the CPU and GPU table operations (internal).

#include <spillway/table/column_view.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace spillway::detail {

/// 0, the split points, then `rows`: part p is rows [bounds[p], bounds[p + 1]).
/// @throws spillway::logic_error for split points that are not ascending or beyond `rows`
std::vector<std::size_t> split_bounds(std::size_t rows, std::span<const std::size_t> splits);

/// @throws spillway::logic_error for no partitions, too many, no keys or a key out of range
void check_partition_args(const TableView& table, std::span<const std::size_t> keys,
                          std::size_t num_partitions);

/// The total row count of tables that concat() can join.
/// @throws spillway::logic_error for no tables or schemas (column count, types) that differ
std::size_t check_concat_args(std::span<const TableView> tables);

}  // namespace spillway::detail
