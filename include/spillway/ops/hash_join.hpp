#pragma once
/// @file hash_join.hpp
/// The distributed hash join (the shuffle plan): both sides' rows go to the owner of
/// hash(keys) % partitions over two Shufflers of the same modulus and seed, and each local
/// partition pair is joined (table/join.hpp) as soon as both of its sides have arrived, one at
/// a time, while the others wait where they landed, spillable. Tables in device memory are
/// partitioned, concatenated and joined on the GPU (table/gpu_join.hpp), on the buffer
/// resource's stream.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace spillway::ops {

struct HashJoinOptions {
  JoinType type{JoinType::inner};
  /// Partitions of the shuffle; 0: one per rank. More keep each pair (and each local join)
  /// smaller.
  std::uint32_t partitions{0};
  /// The left side's shuffle uses `op`, the right side's op + 1.
  OpID op{0};
  std::uint32_t seed{default_hash_seed};
};

/// Joins the distributed `left` and `right` (each rank its part, host tables of the same
/// schema on every rank) and calls `out(partition, table)` with each of this rank's
/// partitions' joined rows, a HOST table as table/join.hpp makes it. Collective: every rank
/// calls it with the same keys and options.
/// @throws spillway::logic_error for bad keys (as hash_join); spillway::comm_error for a dead
///         or stuck peer; spillway::out_of_memory when one partition pair cannot be joined
///         within the limits
void hash_join(Communicator& comm, BufferResource& br, const TableView& left,
               std::span<const std::size_t> left_keys, const TableView& right,
               std::span<const std::size_t> right_keys, const HashJoinOptions& options,
               const std::function<void(std::uint32_t, Table&&)>& out);

/// hash_join of tables it consumes: host tables as above, or tables in device memory, each
/// partitioned on the GPU into the shuffle (Shuffler::insert_finished of a table, which frees
/// the input as it goes), each partition pair concatenated and joined on the GPU, and the
/// output given as DEVICE tables valid on the buffer resource's stream. Both sides must be
/// in the same kind of memory.
/// @throws as above; spillway::logic_error when one side is in device memory and the other
///         is not
void hash_join(Communicator& comm, BufferResource& br, Table&& left,
               std::span<const std::size_t> left_keys, Table&& right,
               std::span<const std::size_t> right_keys, const HashJoinOptions& options,
               const std::function<void(std::uint32_t, Table&&)>& out);

/// hash_join of inputs given a piece at a time (a side larger than memory): each piece is
/// partitioned (on the GPU for device memory) and inserted into the shuffle, where it stays
/// spillable, before the next is asked for, so that a side need never be whole in memory.
/// Outputs as for tables handed over. Each source must give at least one piece (one without
/// rows for none).
/// @throws as above; spillway::logic_error for a source without pieces, or pieces of another
///         schema or kind of memory than its first
void hash_join(Communicator& comm, BufferResource& br, const TableSource& left,
               std::span<const std::size_t> left_keys, const TableSource& right,
               std::span<const std::size_t> right_keys, const HashJoinOptions& options,
               const std::function<void(std::uint32_t, Table&&)>& out);

}  // namespace spillway::ops
