#pragma once
// The shared state behind a Ticket (internal).

#include <spillway/transfer/types.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

namespace spillway::transfer::detail {

struct TicketState {
  std::atomic<Status> status{Status::in_progress};
  std::mutex mutex;
  std::condition_variable done;
  std::string message;

  /// Ends the operation with `outcome` unless it has ended already; returns whether it did.
  bool finish(Status outcome, std::string why = {}) {
    {
      std::lock_guard lock(mutex);
      if (status.load(std::memory_order_relaxed) != Status::in_progress) return false;
      message = std::move(why);
      status.store(outcome, std::memory_order_release);
    }
    done.notify_all();
    return true;
  }
  [[nodiscard]] bool ended() const noexcept {
    return status.load(std::memory_order_acquire) != Status::in_progress;
  }
};

}  // namespace spillway::transfer::detail
