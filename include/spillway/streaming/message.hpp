#pragma once
/// @file message.hpp
/// What flows through a channel of the actor network: a table with its place in the stream.

#include <spillway/table/table.hpp>

#include <cstdint>

namespace spillway::streaming {

/// A table in any tier, with the partition it belongs to (0 where the stream is not
/// partitioned) and its sequence number within what its producer sent.
struct Message {
  std::uint32_t partition{0};
  std::uint64_t sequence{0};
  Table table;
};

}  // namespace spillway::streaming
