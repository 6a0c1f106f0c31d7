#pragma once
/// @file gpu_join.hpp
/// The local hash join and gather on the GPU, for tables whose columns are in device memory:
/// the same rows as join.hpp's and gather.hpp's (the same multiset of output rows, with the
/// same SQL semantics for nulls and floats), made by kernels.
///
/// The join builds an open-addressed hash table of the right (build) side's rows (slots of
/// 32-bit row hash and row index, filled by compare-and-swap), then probes it with the left
/// rows twice: a pass that counts each left row's output rows, a scan of the counts, and a
/// pass that writes the gather maps at those positions. Every byte, scratch included, comes
/// from the BufferResource's DEVICE tier on the caller's stream; each function synchronizes
/// `stream` where an output's size must be known on the host. In a build without CUDA each
/// throws spillway::logic_error.

#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace spillway::gpu {

/// The rows a GPU join pairs (as spillway::JoinMaps): output row i is left row left[i] with
/// right row right[i], -1 for the null side; `right` is null for semi and anti joins. Both are
/// DEVICE buffers of at least `size` int32 values. Left rows come in their order, a full
/// join's unmatched right rows last in theirs; the matches of one left row come in no
/// particular order.
struct JoinMaps {
  std::unique_ptr<Buffer> left;
  std::unique_ptr<Buffer> right;
  std::size_t size{0};
};

/// The rows `type` pairs, keys left_keys[i] of `left` against right_keys[i] of `right` (device
/// memory). Synchronizes `stream` once, for the output size.
/// @throws spillway::logic_error for keys as spillway::join_maps, a side of 2^31 rows or more,
///         or an output of 2^31 rows or more; spillway::out_of_memory
JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   BufferResource& br, Stream stream);

/// spillway::gather on the GPU: rows[0 .. n) (device memory, int32, -1 for a row of nulls) of
/// `table` (device memory) as a new DEVICE table with the same names and types. The output
/// columns have validity masks when the input column has one or `nulls_possible` (some row is
/// -1). Synchronizes `stream` once when there are STRING columns (for their sizes). Rows are
/// not range-checked: they come from join_maps.
Table gather(const TableView& table, const std::int32_t* rows, std::size_t n, bool nulls_possible,
             BufferResource& br, Stream stream);

/// spillway::hash_join on the GPU: the joined DEVICE table, columns and names as the CPU's.
/// @throws as join_maps
Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, Stream stream);

/// The chunked spillway::hash_join on the GPU: `out` gets DEVICE tables of at most
/// `chunk_rows` rows (valid on `stream`), in order, at least one; only one chunk's gather maps
/// and columns are made at a time, after a count pass of 8 bytes per left row. Synchronizes
/// `stream` once per chunk at most (for string sizes) and a few times in all.
/// @throws as join_maps (but the output may have 2^31 rows or more), spillway::logic_error for
///         chunk_rows 0, what `out` throws
void hash_join(const TableView& left, std::span<const std::size_t> left_keys,
               const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
               BufferResource& br, Stream stream, std::size_t chunk_rows,
               const std::function<void(Table&&)>& out);

}  // namespace spillway::gpu
