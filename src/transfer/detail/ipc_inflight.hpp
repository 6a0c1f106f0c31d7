#pragma once
// What the cuda_ipc backend keeps for the copies on its stream (internal): a slot per batch
// (its events and descriptors), the copies in flight, and the batches a target carries out.

#include <spillway/core/cuda.hpp>

#include <spillway/transfer/gpu_copies.hpp>
#include "transfer/detail/backend.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace spillway::transfer::detail {

/// What a batch on the stream holds until it has run: its event and its descriptors.
struct Slot {
  void* start{cuda::event_create()};  // for the trace log: the batch's time on the GPU
  bool timed{false};                  // start was recorded
  void* event{cuda::event_create()};
  CopyScratch scratch;
  std::chrono::steady_clock::time_point began;  // when the batch's post or request came
  double prepared_us{0};                        // until its copies were queued
  double posted_us{0};                          // from the batch's submission to its post
  Slot() = default;
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() {
    cuda::event_destroy(start);
    cuda::event_destroy(event);
  }
};

/// A copy on the stream: a batch of this engine's, or one a peer asked for.
struct InFlight {
  std::unique_ptr<Slot> slot;
  std::shared_ptr<Op> op;  // this engine's batch; null for a peer's request
  bool last{true};         // the batch's last part: its completion ends the batch
  std::uint64_t reply_to{0};
  std::uint64_t seq{0};
  std::optional<std::uint32_t> imm;
};

/// A batch the target carries out: the requests it was sent as, not yet answered.
struct Awaiting {
  std::shared_ptr<Op> op;
  std::size_t parts{0};
};

}  // namespace spillway::transfer::detail
