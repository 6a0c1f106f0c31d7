#include "arguments.hpp"

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

}  // namespace spillway::detail
