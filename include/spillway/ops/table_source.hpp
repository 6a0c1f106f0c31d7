#pragma once
/// @file table_source.hpp
/// How the distributed operators take an input larger than memory: a piece at a time.

#include <spillway/table/table.hpp>

#include <functional>
#include <optional>

namespace spillway::ops {

/// The next piece of an input's rows on this rank, or nullopt after the last. Pieces are
/// tables of one schema, all in host memory or all in device memory. An operator asks for
/// the next piece once it has put the last one away (partitioned, aggregated, inserted into
/// its shuffle, where it stays spillable), so that an input need never be whole in memory.
using TableSource = std::function<std::optional<Table>()>;

}  // namespace spillway::ops
