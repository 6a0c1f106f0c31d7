#pragma once
/// @file groupby.hpp
/// The distributed group-by: each piece of a rank's input is aggregated locally (the partial
/// aggregates), the partials go to the owner of hash(keys) % partitions through a Shuffler,
/// and each local partition's partials are aggregated again into its groups as soon as they
/// are all in: counts and sums are summed, minima and maxima taken again, means made from
/// their sums and counts. A partition's partials are merged a batch at a time (merge_bytes of
/// them, the rest held spillable meanwhile), so a partition whose partials outgrow the limit
/// still completes as long as its groups fit. Tables in device memory are aggregated, partitioned
/// and concatenated on the GPU (table/gpu_groupby.hpp), on the buffer resource's stream.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/ops/table_source.hpp>
#include <spillway/table/groupby.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <functional>
#include <span>

namespace spillway::ops {

struct GroupByOptions {
  /// Partitions of the shuffle; 0: one per rank.
  std::uint32_t partitions{0};
  /// Bytes of a partition's packed partials aggregated at a time with the groups so far; 0: an
  /// eighth of the limit of the tier the aggregation runs in (all at once without a limit).
  std::size_t merge_bytes{0};
  OpID op{0};
  std::uint32_t seed{default_hash_seed};
};

/// GROUP BY `keys` with `aggregations` of the distributed `input` (each rank its pieces) and
/// calls `out(partition, table)` with each of this rank's partitions' groups: the key
/// columns, then one column per aggregation, as spillway::groupby names and types them (a
/// DEVICE table valid on the buffer resource's stream for input in device memory, else a
/// HOST one). Every group is in exactly one partition of one rank. Collective: every rank
/// calls it with the same keys, aggregations and options.
/// @throws spillway::logic_error for bad keys or aggregations (as spillway::groupby), a source
///         without pieces or with pieces of another schema; spillway::comm_error for a dead or
///         stuck peer; spillway::out_of_memory when a partition cannot be aggregated within
///         the limits
void groupby(Communicator& comm, BufferResource& br, const TableSource& input,
             std::span<const std::size_t> keys, std::span<const Aggregation> aggregations,
             const GroupByOptions& options, const std::function<void(std::uint32_t, Table&&)>& out);

}  // namespace spillway::ops
