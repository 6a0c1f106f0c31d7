#pragma once
/// @file join.hpp
/// The local hash join of two host tables (one partition pair of a distributed join): a hash
/// table of the right (build) side, probed by the left rows on all cores, then a gather of the
/// output columns. SQL semantics: a null key matches nothing; floats compare as SQL engines
/// compare them (NaN equals NaN, -0.0 equals 0.0).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace spillway {

enum class JoinType : std::uint8_t {
  inner,      ///< matching pairs
  left,       ///< matching pairs, and each unmatched left row with nulls on the right
  left_semi,  ///< each left row that has a match, once (left columns only)
  left_anti,  ///< each left row that has none (left columns only)
  full,       ///< left, and each unmatched right row with nulls on the left
};

/// "inner", "left", "left_semi", "left_anti", "full"
const char* to_string(JoinType t) noexcept;

/// Which rows a join pairs: output row i is left row left[i] with right row right[i], -1 for
/// the null side (right is empty for semi and anti joins). Left rows come in their order; the
/// matches of one left row in right-row order; a full join's unmatched right rows last.
struct JoinMaps {
  std::vector<std::int64_t> left;
  std::vector<std::int64_t> right;
};

/// The rows `type` pairs, keys left_keys[i] of `left` against right_keys[i] of `right`
/// (host memory). `threads` 0: all cores.
/// @throws spillway::logic_error for keys out of range, of different counts, or of different
///         types on the two sides
JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   std::size_t threads = 0);

/// The joined table (HOST): the left columns, then for inner, left and full joins the right
/// ones (a right name that a left column has already gets the suffix "_right").
/// @throws spillway::logic_error as join_maps; spillway::out_of_memory
Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, std::size_t threads = 0);
/// hash_join's rows in chunks of at most `chunk_rows` rows, so that a join whose output is far
/// larger than its inputs never holds more than one chunk: `out` is called with each (HOST
/// tables, hash_join's columns), in hash_join's order, at least once (one chunk without rows
/// when the join has none). A count pass finds each left row's output rows first (8 bytes per
/// left row, from `br`), so a chunk may split the matches of one left row.
/// @throws as hash_join, spillway::logic_error for chunk_rows 0, what `out` throws
void hash_join(const TableView& left, std::span<const std::size_t> left_keys,
               const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
               BufferResource& br, std::size_t chunk_rows, const std::function<void(Table&&)>& out,
               std::size_t threads = 0);

}  // namespace spillway
