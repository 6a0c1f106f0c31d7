#pragma once
/// @file actor_stats.hpp
/// What one actor of a network did: what went in and out, and how long it waited for what.

#include <chrono>
#include <cstdint>

namespace spillway::streaming {

/// One actor's counters. Written only by the actor itself (its coroutine or a blocking job of
/// it, never both at once); read once the network has stopped.
struct ActorStats {
  using Duration = std::chrono::steady_clock::duration;

  std::uint64_t messages_in{0};
  std::uint64_t rows_in{0};
  std::uint64_t bytes_in{0};
  std::uint64_t messages_out{0};
  std::uint64_t rows_out{0};
  std::uint64_t bytes_out{0};
  /// Waiting for a message (an empty input channel).
  Duration blocked_input{};
  /// Waiting for room (a full output channel: backpressure).
  Duration blocked_output{};
  /// Bringing received messages up into the tier asked for (unspilling, waiting for memory).
  Duration blocked_memory{};
  /// From the network's start to the actor's first step and to its end.
  Duration started{};
  Duration ended{};
};

}  // namespace spillway::streaming
