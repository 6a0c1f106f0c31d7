#pragma once
/// @file tag.hpp
/// Ranks, operation ids and message tags.

#include <cstdint>
#include <string>

namespace spillway {

/// A process (or, for the `local` communicator, a thread) taking part in a communicator.
using Rank = int;
/// Identifies one operation (e.g. one shuffle) so that several can run on one communicator.
using OpID = std::uint16_t;

/// A message tag: the operation it belongs to and a stage within it (e.g. metadata, payload).
/// Messages match on (source, destination, tag) and arrive in the order they were sent.
struct Tag {
  OpID op{0};
  std::uint8_t stage{0};

  [[nodiscard]] constexpr std::uint32_t value() const noexcept {
    return (std::uint32_t{op} << 8) | stage;
  }
  friend constexpr bool operator==(Tag a, Tag b) noexcept = default;
};

/// "op 3 stage 1"
std::string to_string(Tag tag);

}  // namespace spillway
