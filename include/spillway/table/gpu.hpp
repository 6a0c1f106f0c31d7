#pragma once
/// @file gpu.hpp
/// The table operations on the GPU: the same results as the CPU versions in hashing.hpp,
/// partition.hpp and pack.hpp, byte for byte (the same row hashes, the same rows in the same
/// order, the same metadata and payload bytes), for tables whose columns are in device memory.
///
/// Every function runs on the caller's `stream` and allocates every byte, scratch included,
/// through the BufferResource (outputs on the DEVICE tier, valid on `stream`, except packed
/// outputs that find no room there, as partition_and_pack says). They
/// synchronize `stream` once, where the sizes of the outputs must be known on the host
/// (partition sizes, string lengths). In a build without CUDA each throws spillway::logic_error.

#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/partition.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace spillway::gpu {

/// The row hash of every row over `keys` (device memory) into a DEVICE buffer of num_rows
/// uint32 values, equal to spillway::hash_rows.
std::unique_ptr<Buffer> hash_rows(const TableView& keys, std::uint32_t seed, BufferResource& br,
                                  Stream stream);

/// spillway::hash_partition on the GPU: a DEVICE table with the rows grouped by partition.
/// @throws spillway::logic_error for bad arguments or more than 2^32 - 1 rows.
PartitionedTable hash_partition(const TableView& table, std::span<const std::size_t> keys,
                                std::size_t num_partitions, BufferResource& br, Stream stream,
                                std::uint32_t seed = default_hash_seed);

/// spillway::partition_and_pack on the GPU: one payload per partition, written straight from
/// the input. Each payload is on the DEVICE tier, spilling what is spillable there; when even
/// that leaves no room, the kernels write it into pinned host memory, else into HOST memory
/// mapped for the GPU during the call (counted as `pack-into-host-memory`), so that packing
/// completes whenever some tier has room and no limit is exceeded. Payloads under 4 MiB share
/// DEVICE blocks of up to 16 MiB when the GPU has room for a block without spilling (one
/// allocation for many partitions): each is then a view that holds its block, whose memory is
/// freed, or freed by spilling, with the last of them. Extra memory: the outputs, 2
/// bytes per row (4 beyond 65535 partitions) and a histogram of at most 1 byte per row; with STRING
/// columns 4 bytes per row more and 8 per row and STRING column.
std::vector<PackedData> partition_and_pack(const TableView& table,
                                           std::span<const std::size_t> keys,
                                           std::size_t num_partitions, BufferResource& br,
                                           Stream stream, std::uint32_t seed = default_hash_seed);

/// hash_partition one group of columns at a time, for a caller that puts the first columns'
/// output to use while the others are placed (Shuffler::insert_finished of a table to hash
/// sends each column as soon as it is placed). The constructor hashes the keys and counts each
/// partition's rows (synchronizing `stream` once, for the sizes); place() then writes columns
/// in partition order, the same rows in the same order as hash_partition. Fixed-width columns
/// without masks only. Extra memory while it lives: 2 bytes per row (4 beyond 65535
/// partitions) and a histogram of at most 1 byte per row. The table's columns must stay valid
/// until the place() calls that read them have run.
class PartitionPlan {
 public:
  /// @throws spillway::logic_error for bad arguments, more than 2^32 - 1 rows, or a column
  ///         that is not fixed-width without a mask
  PartitionPlan(const TableView& table, std::span<const std::size_t> keys,
                std::size_t num_partitions, BufferResource& br, Stream stream,
                std::uint32_t seed = default_hash_seed);
  ~PartitionPlan();
  PartitionPlan(PartitionPlan&&) noexcept;
  PartitionPlan& operator=(PartitionPlan&&) noexcept;

  /// Partition p is rows [offsets()[p], offsets()[p + 1]) of every placed column.
  [[nodiscard]] const std::vector<std::size_t>& offsets() const noexcept;
  /// Writes columns [first, last) in partition order on `stream` (which must follow the
  /// constructor's): column first + i into outs[i], device memory of num_rows values.
  /// @throws spillway::logic_error for columns out of range or a wrong number of outputs
  void place(std::size_t first, std::size_t last, std::span<std::byte* const> outs, Stream stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
/// The group of column `c` of `columns` when they are split into `groups` contiguous groups
/// (place_partitions; the shuffle tags each group's pieces by it).
[[nodiscard]] constexpr std::uint32_t column_group(std::size_t c, std::size_t columns,
                                                   std::uint32_t groups) noexcept {
  return static_cast<std::uint32_t>(c * groups / columns);
}

/// A table placed in partition order by place_partitions.
struct PlacedPartitions {
  /// Partition p is rows [offsets[p], offsets[p + 1]) of every column.
  std::vector<std::size_t> offsets;
  /// parts[p][c]: partition p's rows of column c, a DEVICE view into its column group's placed
  /// copy (which the views keep alive), on a stream that completes once that group is placed.
  std::vector<std::vector<std::unique_ptr<Buffer>>> parts;
  /// The column groups it was placed in: at most the columns (column_group).
  std::uint32_t groups{1};
};

/// hash_partition of a table of fixed-width columns without masks in device memory, in
/// `groups` column groups (column_group), for a caller that puts each group to use as soon as
/// it is placed (Shuffler::insert_finished of a table to hash sends it): a group's views wait
/// for its placement alone, not for groups placed later. The table is consumed: each group's
/// partitioned copy replaces its input columns in stream order (their memory is freed, on
/// their streams, once the group is placed), so the input and its copy take about one table's
/// memory. Queued writes into the table must be done or on `stream`. Profiled as
/// "partition_and_pack".
/// @throws spillway::logic_error for bad keys, columns that are not fixed-width without a
///         mask or not in device memory, or `groups` of 0
PlacedPartitions place_partitions(Table&& table, std::span<const std::size_t> keys,
                                  std::size_t num_partitions, BufferResource& br, Stream stream,
                                  std::uint32_t seed = default_hash_seed, std::uint32_t groups = 1);

/// spillway::split_and_pack on the GPU: payloads on the DEVICE tier, or lower when it has no
/// room even after spilling (as partition_and_pack's).
std::vector<PackedData> split_and_pack(const TableView& table, std::span<const std::size_t> splits,
                                       BufferResource& br, Stream stream);

/// spillway::unpack for a payload the GPU can read (DEVICE, or PINNED_HOST, which is mapped for
/// it): the metadata is checked on the host, the string offsets in the payload on the GPU; the
/// views point into the payload. Synchronizes `stream`.
/// @throws spillway::corrupt_data_error naming the problem
UnpackedTable unpack(PackedData packed, Stream stream);

/// spillway::concat of tables in device memory: a new DEVICE table, the same bytes.
/// @throws spillway::logic_error when the schemas differ
Table concat(std::span<const TableView> tables, BufferResource& br, Stream stream);

/// spillway::unpack_and_concat on the GPU: a DEVICE table. Room for the output is held on the
/// GPU while the chunks that landed on the host or were spilled come up; a chunk that then finds
/// no room on the GPU is read from pinned host memory by the concatenation (brought there first
/// from HOST or DISK; counted as `unpack-from-host-memory`). When the GPU cannot hold the output
/// beside the chunks it holds, those go down to pinned host memory first
/// (`unpack-chunks-moved-down`): the GPU needs room for one partition, not two. A single chunk
/// is not copied (spillway::to_table of it) and must come up to the GPU. Like concat, the
/// output is written in stream order on `stream`: synchronize it before reading the output
/// from elsewhere. Profiled as "unpack_and_concat".
/// @throws spillway::out_of_memory naming the step and the tiers tried
Table unpack_and_concat(std::vector<PackedData> packed, BufferResource& br, Stream stream);

/// unpack_and_concat, but nullopt where it would throw out_of_memory: the chunks then stay in
/// `packed` (some perhaps moved to another tier), for the caller to unpack elsewhere; on
/// success `packed` is consumed.
std::optional<Table> try_unpack_and_concat(std::vector<PackedData>& packed, BufferResource& br,
                                           Stream stream);

/// A partition's chunks as one table in the first tier that can hold it: on the GPU as
/// unpack_and_concat, else, when the GPU cannot hold even the output alone, on the CPU into
/// HOST memory (spillway::unpack_and_concat; counted as `unpacked-on-the-host`). For a
/// consumer that would rather have a partition on the host than fail: look at the columns'
/// tier. @throws spillway::out_of_memory when the host cannot hold it either
Table unpack_and_concat_or_host(std::vector<PackedData> packed, BufferResource& br, Stream stream);

/// dsts[i][0, sizes[i]) = srcs[i][0, sizes[i]) for every i, in device memory (or memory the GPU
/// maps), in one kernel launch on `stream`: many small copies cost one launch and one upload of
/// their descriptors (cudaMemcpyBatchAsync took ~8 us of host time a copy; the
/// shuffle gathers small chunks for a peer with it).
/// @throws spillway::logic_error where the spans' lengths differ
void copy_batch(std::span<void* const> dsts, std::span<const void* const> srcs,
                std::span<const std::size_t> sizes, BufferResource& br, Stream stream);

/// spillway::checksum of a table in device memory (the same value). Synchronizes `stream`.
TableChecksum checksum(const TableView& table, BufferResource& br, Stream stream);

/// Adds the checksum of `table` (device memory) into slot `slot` of `sums`, a DEVICE buffer of
/// TableChecksum values (zeroed by the caller), without waiting: checksums of many tables
/// accumulate on `stream` and are copied back once. @throws spillway::logic_error when the
/// slot is outside `sums`
void add_checksum(const TableView& table, Buffer& sums, std::size_t slot, BufferResource& br,
                  Stream stream);

/// spillway::random_int32_table made on the GPU: a DEVICE table with the same bytes.
/// @throws spillway::logic_error when min > max
Table random_int32_table(std::size_t rows, std::size_t columns, std::int32_t min, std::int32_t max,
                         std::uint64_t seed, BufferResource& br, Stream stream);

}  // namespace spillway::gpu
