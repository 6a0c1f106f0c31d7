#pragma once
// partition_and_pack on the CPU with its payloads placed in a caller's order (for spillway's
// own modules, not a stable API: the Shuffler's, whose chunks for one peer then lie one after
// another and travel as one message without being gathered).

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/packed_data.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace spillway::detail {

/// partition_and_pack(table, keys, num_partitions, br, seed, threads), the payloads placed in
/// the order `order` lists the partitions (each once; empty: partition order): runs of small
/// ones share host blocks in that order (payload_blocks.hpp).
/// @throws spillway::logic_error as partition_and_pack, or for an `order` that is not a
///   permutation of the partitions
std::vector<PackedData> partition_and_pack_ordered(const TableView& table,
                                                   std::span<const std::size_t> keys,
                                                   std::size_t num_partitions, BufferResource& br,
                                                   std::uint32_t seed, std::size_t threads,
                                                   std::span<const std::uint32_t> order);

}  // namespace spillway::detail
