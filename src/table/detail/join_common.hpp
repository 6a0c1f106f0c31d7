#pragma once
// What the CPU and GPU joins share (internal to table/): the check of the key columns, and
// the output table's columns and names.

#include <spillway/table/column_view.hpp>
#include <spillway/table/table.hpp>

#include <span>
#include <utility>

namespace spillway::detail {

/// The key columns of both sides, after checking them: the same number on each side (at
/// least one), in range, and of the same types pairwise.
/// @throws spillway::logic_error naming the problem
std::pair<TableView, TableView> join_key_views(const TableView& left,
                                               std::span<const std::size_t> left_keys,
                                               const TableView& right,
                                               std::span<const std::size_t> right_keys);

/// The joined table: the left columns, then the right ones (a right name that is already
/// taken gets the suffix "_right").
Table joined_table(Table&& left, Table&& right);

}  // namespace spillway::detail
