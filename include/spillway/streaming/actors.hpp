#pragma once
/// @file actors.hpp
/// The common local actors: a source of tables, a map (filter or projection), a concatenation
/// of streams and a sink. The collective ones (shuffle, join, group-by, sort) are in
/// ops/actors.hpp.

#include <spillway/memory/memory_type.hpp>
#include <spillway/streaming/message.hpp>
#include <spillway/streaming/network.hpp>
#include <spillway/table/spillable_tables.hpp>

#include <functional>
#include <optional>

namespace spillway::streaming {

/// The next table of an input on this rank, or nullopt after the last (ops::TableSource).
using TableSource = std::function<std::optional<Table>()>;

/// No input, one output: each table of `next` as a message (partition 0, sequence 0, 1, ...),
/// until it returns nullopt. `next` is called in a blocking call (it may read a file), the next
/// time only once the previous table was sent (backpressure reaches the reader).
ActorBody source(TableSource next);

/// One input, one output: `fn` of each message's table, received in `tier` (HOST or DEVICE),
/// sent on with the message's partition and sequence; nullopt drops the message (a filter).
/// `fn` runs on an executor thread: it should compute, not wait.
ActorBody map(std::function<std::optional<Table>(Table&&)> fn, MemoryType tier);

/// Any inputs, one output: every message of input 0, then of input 1, and so on (UNION ALL),
/// received in `tier`, partitions kept, sequence numbers renumbered.
ActorBody concat(MemoryType tier);

/// One input, no output: `fn` of each message, received in `tier`, on an executor thread.
ActorBody sink(std::function<void(Message&&)> fn, MemoryType tier);

/// One input, no output: each message's table kept in `into` (a spillable collection, which
/// must outlive the run), received in `tier`; the tables stay spillable until taken.
ActorBody collect(SpillableTables& into, MemoryType tier);

}  // namespace spillway::streaming
