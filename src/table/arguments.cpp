#include "table/detail/arguments.hpp"

#include <spillway/core/error.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace spillway::detail {

std::vector<std::size_t> split_bounds(std::size_t rows, std::span<const std::size_t> splits) {
  std::vector<std::size_t> bounds{0};
  for (std::size_t s : splits) {
    SPILLWAY_EXPECTS(s >= bounds.back() && s <= rows,
                     "split points must be ascending and at most the row count (" +
                         std::to_string(rows) + "), got " + std::to_string(s));
    bounds.push_back(s);
  }
  bounds.push_back(rows);
  return bounds;
}

void check_partition_args(const TableView& table, std::span<const std::size_t> keys,
                          std::size_t n) {
  SPILLWAY_EXPECTS(n > 0, "hash partitioning needs at least one partition");
  SPILLWAY_EXPECTS(n < std::numeric_limits<std::uint32_t>::max(), "too many partitions");
  SPILLWAY_EXPECTS(!keys.empty(), "hash partitioning needs at least one key column");
  for (std::size_t k : keys) {
    SPILLWAY_EXPECTS(k < table.num_columns(), "key column " + std::to_string(k) +
                                                  " does not exist (the table has " +
                                                  std::to_string(table.num_columns()) + ")");
  }
}

std::size_t check_concat_args(std::span<const TableView> tables) {
  SPILLWAY_EXPECTS(!tables.empty(), "concat needs at least one table");
  const TableView& first = tables.front();
  std::size_t rows = 0;
  for (const TableView& t : tables) {
    SPILLWAY_EXPECTS(t.num_columns() == first.num_columns(),
                     "concat: tables have different numbers of columns");
    for (std::size_t c = 0; c < t.num_columns(); ++c) {
      SPILLWAY_EXPECTS(t.columns[c].type == first.columns[c].type,
                       "concat: column " + std::to_string(c) + " is " +
                           std::string(to_string(t.columns[c].type)) + " in one table and " +
                           std::string(to_string(first.columns[c].type)) + " in another");
    }
    rows += t.num_rows();
  }
  return rows;
}

}  // namespace spillway::detail
