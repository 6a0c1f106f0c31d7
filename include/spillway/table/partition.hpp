#pragma once
/// @file partition.hpp
/// Hash partitioning (CPU implementation, multi-threaded, host memory).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway {

/// Rows grouped by partition: partition p is rows [offsets[p], offsets[p + 1]).
struct PartitionedTable {
  Table table;
  std::vector<std::size_t> offsets;
};

/// The partition of each row: hash_row(keys) % num_partitions, as cuDF's hash_partition.
/// Rows keep their input order within a partition.
/// @param threads 0: all cores.
/// @throws spillway::logic_error for no partitions or a key index out of range.
PartitionedTable hash_partition(const TableView& table, std::span<const std::size_t> keys,
                                std::size_t num_partitions, BufferResource& br,
                                std::uint32_t seed = default_hash_seed, std::size_t threads = 0);

/// The same partitioning, each partition packed into its own HOST payload straight from the
/// input (no intermediate partitioned table): the extra memory is the outputs plus 2-4 bytes
/// per row of scratch. Without a HOST limit, runs of payloads under 4 MiB share blocks of up to
/// 16 MiB (each payload a view that holds its block, freed with the last of them), as the GPU's
/// do; under a limit each has its own memory, so that spilling any of them frees it.
std::vector<PackedData> partition_and_pack(const TableView& table,
                                           std::span<const std::size_t> keys,
                                           std::size_t num_partitions, BufferResource& br,
                                           std::uint32_t seed = default_hash_seed,
                                           std::size_t threads = 0);

}  // namespace spillway
