#pragma once
/// @file sort.hpp
/// The local sort of a host table on several keys, ascending or descending, nulls first or
/// last, stable; and the order of rows of two tables, for range partitioning. SQL semantics as
/// DuckDB's ORDER BY: floats order NaN after every number and -0.0 equal to 0.0; strings order
/// by their bytes; booleans false before true.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace spillway {

struct SortKey {
  std::size_t column{0};
  bool descending{false};
  /// Where null keys go; SQL's default (DuckDB's too) is last for ascending keys.
  bool nulls_first{false};
};

/// Compares a row of one table with a row of another on `keys` (the same columns of the same
/// types in both: a table and the splitters sampled from it, say). Host memory; the tables'
/// data must outlive it (their TableViews need not).
class RowOrder {
 public:
  /// @throws spillway::logic_error for a key out of range or of another type in `b`
  RowOrder(const TableView& a, const TableView& b, std::span<const SortKey> keys);
  /// <0: row i of a goes before row j of b; 0: equal keys; >0: after.
  [[nodiscard]] int compare(std::size_t i, std::size_t j) const;

 private:
  std::vector<std::function<int(std::size_t, std::size_t)>> columns_;
};

/// The row indices of `table` in sorted order; rows of equal keys keep their order (stable).
/// Host memory. `threads` 0: all cores.
/// @throws spillway::logic_error for no keys or a key out of range
std::vector<std::int64_t> sort_order(const TableView& table, std::span<const SortKey> keys,
                                     std::size_t threads = 0);

/// `table`'s rows in sorted order (HOST), stable. `limit` keeps only the first rows (top-k: the
/// rest are never ordered among themselves).
/// @throws as sort_order; spillway::out_of_memory
Table sort(const TableView& table, std::span<const SortKey> keys, BufferResource& br,
           std::size_t limit = static_cast<std::size_t>(-1), std::size_t threads = 0);

}  // namespace spillway
