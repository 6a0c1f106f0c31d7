// Tickets: waiting on a transfer's outcome.

#include <spillway/transfer/ticket.hpp>

#include <spillway/core/error.hpp>

#include "transfer/detail/ticket_state.hpp"

#include <algorithm>
#include <thread>

namespace spillway::transfer {

const char* to_string(Status status) noexcept {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::in_progress:
      return "in progress";
    case Status::timed_out:
      return "timed out";
    case Status::peer_gone:
      return "peer gone";
    case Status::error:
      return "error";
  }
  return "unknown";
}

Status Ticket::poll() const {
  SPILLWAY_EXPECTS(state_ != nullptr, "Ticket::poll on an empty ticket");
  return state_->status.load(std::memory_order_acquire);
}

namespace {

/// Polls `state` until it ends or `for_at_most` has passed; whether it ended.
bool spin(const detail::TicketState& state, std::chrono::nanoseconds for_at_most) {
  const auto from = std::chrono::steady_clock::now();
  while (!state.ended()) {
    if (std::chrono::steady_clock::now() - from >= for_at_most) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

Status Ticket::wait(std::chrono::nanoseconds timeout) const {
  SPILLWAY_EXPECTS(state_ != nullptr, "Ticket::wait on an empty ticket");
  // A short wait is spun out rather than slept: waking a thread from a futex costs 10-30 us,
  // a good part of a small batch.
  constexpr auto kSpin = std::chrono::microseconds(100);
  if (spin(*state_, std::min<std::chrono::nanoseconds>(timeout, kSpin))) {
    return state_->status.load(std::memory_order_acquire);
  }
  std::unique_lock lock(state_->mutex);
  const auto ended = [&] { return state_->ended(); };
  if (timeout == std::chrono::nanoseconds::max()) {
    state_->done.wait(lock, ended);
  } else {
    state_->done.wait_for(lock, timeout, ended);
  }
  return state_->status.load(std::memory_order_acquire);
}

Status Ticket::spin_wait(std::chrono::nanoseconds timeout) const {
  SPILLWAY_EXPECTS(state_ != nullptr, "Ticket::spin_wait on an empty ticket");
  spin(*state_, timeout);
  return state_->status.load(std::memory_order_acquire);
}

std::string Ticket::message() const {
  if (state_ == nullptr) return "empty ticket";
  std::lock_guard lock(state_->mutex);
  return state_->message;
}

}  // namespace spillway::transfer
