#pragma once
/// @file ticket.hpp
/// A handle to an operation in flight: a write, a read, or an expected count of imms.

#include <spillway/transfer/types.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace spillway::transfer {

namespace detail {
struct TicketState;
}

/// Copyable; every copy refers to the same operation. A default-constructed ticket is empty.
class Ticket {
 public:
  Ticket() = default;
  explicit Ticket(std::shared_ptr<detail::TicketState> state) : state_{std::move(state)} {}

  /// The outcome so far, without blocking.
  [[nodiscard]] Status poll() const;
  /// Blocks until the operation ends (its deadline, its peer's failure and the engine's end all
  /// end it), or `timeout` passes (then in_progress).
  Status wait(std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) const;
  /// As wait(), but never sleeps: it polls, yielding the CPU in between, so that the end is
  /// seen within microseconds, at the cost of a busy core. wait() spins 100 us, then sleeps,
  /// and waking a sleeping thread can cost hundreds of microseconds on virtual CPUs. For callers
  /// bound by latency, and benchmarks; on a machine of few cores the busy core slows the engine's
  /// own threads.
  Status spin_wait(std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) const;
  /// What went wrong, for an outcome other than ok; empty otherwise.
  [[nodiscard]] std::string message() const;
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }
  [[nodiscard]] const std::shared_ptr<detail::TicketState>& state() const noexcept {
    return state_;
  }

 private:
  std::shared_ptr<detail::TicketState> state_;
};

}  // namespace spillway::transfer
