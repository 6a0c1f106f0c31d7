#pragma once
/// @file event.hpp
/// An owned CUDA event, used to tell when asynchronous work on a stream has completed.

#include <spillway/core/stream.hpp>

namespace spillway {

/// A CUDA event, move-only. In a CPU build it never records anything and is always complete.
/// Plain events have timing disabled and come from a per-device pool (cuda::event_acquire):
/// creating and destroying a CUDA event costs 5-15 us of driver time, several times per
/// transfer, while a pooled one costs a lock. `Event::timed()` makes one that can be timed
/// (cuda::event_elapsed_ms), created and destroyed as CUDA's are.
class Event {
 public:
  Event() noexcept = default;
  /// An event whose records can be timed against another timed event's.
  static Event timed() noexcept {
    Event e;
    e.timed_ = true;
    return e;
  }
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept
      : event_{other.event_}, device_{other.device_}, timed_{other.timed_} {
    other.event_ = nullptr;
  }
  Event& operator=(Event&& other) noexcept;

  /// Records the event at the current end of `stream` (creating it on first use, on the
  /// stream's device, whichever device is current: later records must use that device's
  /// streams).
  /// @throws spillway::cuda_error
  void record(Stream stream);
  /// True when nothing was recorded or the recorded work has completed.
  [[nodiscard]] bool is_complete() const;
  /// Blocks until the recorded work has completed.
  void synchronize() const;
  /// Makes work queued on `stream` from now on wait, on the GPU, for the recorded work (no-op
  /// when nothing was recorded).
  void wait_on(Stream stream) const;
  /// The cudaEvent_t as void* (nullptr until recorded).
  [[nodiscard]] void* handle() const noexcept { return event_; }

 private:
  void reset() noexcept;

  void* event_{nullptr};
  int device_{-1};  // the device of a pooled event
  bool timed_{false};
};

}  // namespace spillway
