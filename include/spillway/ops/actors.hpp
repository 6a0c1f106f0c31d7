#pragma once
/// @file actors.hpp
/// The distributed operators as actors of a streaming::Network: the hash shuffle, the hash
/// join and the group-by. Collective: every rank's network has the same actor with the same
/// arguments, and the actors of one network use op ids apart from each other's (a join takes
/// options.op to options.op + 2). Each reads its inputs in `tier` (HOST, or DEVICE to run on
/// the GPU) and writes tables of the same kind. The join and the group-by take at least one
/// message on each input on every rank (a table without rows where a rank has none).
///
/// Each holds one thread of the executor's blocking pool while it waits on the shuffle's
/// collective steps (a Shuffler's waits block); the local actors around them hold none.

#include <spillway/comm/tag.hpp>
#include <spillway/memory/memory_type.hpp>
#include <spillway/ops/groupby.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/streaming/network.hpp>
#include <spillway/table/groupby.hpp>
#include <spillway/table/hashing.hpp>

#include <cstdint>
#include <vector>

namespace spillway::ops {

/// One input, one output: each message's rows hash-partitioned on `keys` into `partitions`
/// (0: one per rank) and inserted into a Shuffler as they come (where they stay spillable);
/// each of this rank's partitions is sent on as one message (partition: its id) as soon as all
/// of it has arrived.
streaming::ActorBody shuffle_actor(std::vector<std::size_t> keys, std::uint32_t partitions, OpID op,
                                   MemoryType tier, std::uint32_t seed = default_hash_seed);

/// Two inputs (left, right), one output: ops::hash_join of the two streams, each input's
/// messages taken as its pieces; the output's chunks sent as they are joined (partition: the
/// join's partition), so a consumer starts on the first partition while the others join.
streaming::ActorBody hash_join_actor(std::vector<std::size_t> left_keys,
                                     std::vector<std::size_t> right_keys, HashJoinOptions options,
                                     MemoryType tier);

/// One input, one output: ops::groupby of the stream, each partition's groups sent as soon as
/// they are aggregated (partition: its id).
streaming::ActorBody groupby_actor(std::vector<std::size_t> keys,
                                   std::vector<Aggregation> aggregations, GroupByOptions options,
                                   MemoryType tier);

/// One input, one output: ops::sort of the stream (host tables); this rank's range of the
/// global order sent as one message (partition: the rank) once every rank's rows are in.
streaming::ActorBody sort_actor(std::vector<SortKey> keys, SortOptions options);

}  // namespace spillway::ops
