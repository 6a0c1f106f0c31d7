#pragma once
// What the CPU and GPU joins share (internal to table/): the check of the key columns, and
// the output table's columns and names.

#include <spillway/core/host_device.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>

#include <span>
#include <utility>

namespace spillway::detail {

/// Whether a join of type `t` outputs the matching pairs (else one row per left row at most).
SPILLWAY_HOST_DEVICE constexpr bool outputs_pairs(JoinType t) noexcept {
  return t == JoinType::inner || t == JoinType::left || t == JoinType::full;
}

/// The output rows of a left row with `matches` matches (semi and anti joins: 1 at most).
SPILLWAY_HOST_DEVICE constexpr std::uint64_t output_rows(JoinType t,
                                                         std::uint64_t matches) noexcept {
  switch (t) {
    case JoinType::inner:
      return matches;
    case JoinType::left:
    case JoinType::full:
      return matches > 0 ? matches : 1;
    case JoinType::left_semi:
      return matches > 0 ? 1 : 0;
    case JoinType::left_anti:
      return matches > 0 ? 0 : 1;
  }
  return 0;
}

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
