#pragma once
/// @file hash_join.hpp
/// The distributed hash join. Two plans (ops/join_plan.hpp):
/// - the shuffle plan: both sides' rows go to the owner of hash(keys) % partitions over two
///   Shufflers of the same modulus and seed, and each local partition pair is joined as soon as
///   both of its sides have arrived, one at a time, while the others wait where they landed,
///   spillable. The partition count is chosen so that one partition's right (build) side fits
///   its budget;
/// - the broadcast plan: the right side, when small, is allgathered, and each rank joins its
///   own left rows against all of it (no shuffle of the left side).
/// The output comes in chunks of bounded size (table/join.hpp's chunked join), so a join whose
/// output is many times its inputs never holds more than one chunk; a consumer that keeps the
/// chunks keeps them spillable in a SpillableTables (table/spillable_tables.hpp). Tables in device
/// memory are partitioned, concatenated and joined on the GPU (table/gpu_join.hpp), on the buffer
/// resource's stream.
#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/join_plan.hpp>
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
  /// Partitions of the shuffle plan; 0: the plan chooses, from the right side's global size
  /// and `partition_bytes` (for sources, whose size is not known ahead: from `right_bytes`, or
  /// 16 per rank without it).
  std::uint32_t partitions{0};
  /// For sources: the right side's bytes over all ranks, when the caller knows them (from file
  /// metadata, say); 0: not known. Tables are measured instead.
  std::uint64_t right_bytes{0};
  /// The right side's bytes per partition the plan aims at; 0: 2 MiB on the CPU (a partition's
  /// hash table stays in cache), 512 MiB on the GPU; at most a sixteenth of the limit of the
  /// tier the join works in (HOST, or DEVICE on the GPU), so that a partition pair, its hash
  /// table and an output chunk fit together.
  std::size_t partition_bytes{0};
  /// The right side is broadcast (allgathered) instead of shuffled when its global size is at
  /// most this and at most an eighth of the tier's limit; 0: never. Not for full joins (a
  /// right row unmatched on one rank may match on another), for sources without
  /// `right_bytes`, nor when `partitions` is set.
  std::size_t broadcast_bytes{std::size_t{16} << 20};
  /// Output chunks of about this many bytes; 0: 64 MiB on the CPU, 256 MiB on the GPU, at most
  /// an eighth of the tier's limit.
  std::size_t output_chunk_bytes{0};
  /// The left side's shuffle uses `op`, the right side's op + 1, the plan's collectives op + 2.
  OpID op{0};
  std::uint32_t seed{default_hash_seed};
};

/// Joins the distributed `left` and `right` (each rank its part, host tables of the same
/// schema on every rank) and calls `out(partition, chunk)` with this rank's joined rows, in
/// chunks (HOST tables as table/join.hpp makes them), each partition's one after another and
/// at least one per partition (without rows when it has none); under the broadcast plan the
/// partition is this rank's number. Collective: every rank calls it with the same keys and
/// options. @returns the plan it ran
/// @throws spillway::logic_error for bad keys (as hash_join); spillway::comm_error for a dead
///         or stuck peer; spillway::out_of_memory when one partition pair cannot be joined
///         within the limits
JoinPlan hash_join(Communicator& comm, BufferResource& br, const TableView& left,
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
JoinPlan hash_join(Communicator& comm, BufferResource& br, Table&& left,
                   std::span<const std::size_t> left_keys, Table&& right,
                   std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                   const std::function<void(std::uint32_t, Table&&)>& out);

/// hash_join of inputs given a piece at a time (a side larger than memory): each piece is
/// partitioned (on the GPU for device memory) and inserted into the shuffle, where it stays
/// spillable, before the next is asked for, so that a side need never be whole in memory.
/// Under the broadcast plan (options.right_bytes small), the right side's pieces are
/// concatenated and allgathered, and each left piece is joined against them as it comes.
/// Outputs as for tables handed over. Each source must give at least one piece (one without
/// rows for none).
/// @throws as above; spillway::logic_error for a source without pieces, or pieces of another
///         schema or kind of memory than its first
JoinPlan hash_join(Communicator& comm, BufferResource& br, const TableSource& left,
                   std::span<const std::size_t> left_keys, const TableSource& right,
                   std::span<const std::size_t> right_keys, const HashJoinOptions& options,
                   const std::function<void(std::uint32_t, Table&&)>& out);

}  // namespace spillway::ops
