#pragma once
/// @file types.hpp
/// The small value types of the transfer engine: peers, chunks, outcomes and deadlines.

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace spillway::transfer {

/// A peer of this engine. Ids are never reused: a peer that leaves and joins again (with new
/// metadata) gets a new id, so nothing addressed to its earlier self can reach it.
using PeerId = std::uint64_t;

/// One contiguous piece of a batch: `length` bytes from `src_offset` in the source region to
/// `dst_offset` in the destination region (offsets relative to each region's start).
struct Chunk {
  std::size_t src_offset{0};
  std::size_t dst_offset{0};
  std::size_t length{0};
};

/// How an operation ended, or that it has not.
enum class Status : std::uint8_t {
  ok,           ///< done: a write's source may be reused (the target learns that its bytes
                ///< are in place from the imm), a read's bytes are here
  in_progress,  ///< not finished yet
  timed_out,    ///< its deadline passed first
  peer_gone,    ///< the peer died, stopped answering or was removed
  error,        ///< anything else; the ticket's message says what
};

/// "ok", "in progress", "timed out", "peer gone" or "error".
const char* to_string(Status status) noexcept;

using Clock = std::chrono::steady_clock;

/// The time by which an operation must have finished.
struct Deadline {
  Clock::time_point at{Clock::time_point::max()};

  /// `timeout` from now.
  static Deadline in(std::chrono::nanoseconds timeout) { return {Clock::now() + timeout}; }
  /// No deadline: the operation still ends when its peer is found gone.
  static Deadline never() { return {}; }
  [[nodiscard]] bool passed(Clock::time_point now = Clock::now()) const { return now >= at; }
};

}  // namespace spillway::transfer
