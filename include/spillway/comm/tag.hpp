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

/// How many uses of one op id a tag tells apart (Communicator::claim_op): a rank is at most
/// one use of an id ahead of another, since a shuffle ends on a rank only after every rank
/// has joined it.
inline constexpr std::uint8_t op_generations = 8;

/// A message tag: the operation it belongs to, which use of its op id it is (its generation,
/// below op_generations) and a stage within it (e.g. metadata, payload). Messages match on
/// (source, destination, tag) and arrive in the order they were sent.
struct Tag {
  OpID op{0};
  std::uint8_t stage{0};
  std::uint8_t generation{0};

  /// 27 bits: generation, op, stage.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept {
    return (static_cast<std::uint32_t>(generation % op_generations) << 24) |
           (std::uint32_t{op} << 8) | stage;
  }
  friend constexpr bool operator==(Tag a, Tag b) noexcept { return a.value() == b.value(); }
};

/// "op 3 stage 1"
std::string to_string(Tag tag);

}  // namespace spillway
