#pragma once
/// @file channel.hpp
/// A bounded queue of messages between actors, with backpressure, whose messages stay
/// spillable while they wait.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/streaming/actor_stats.hpp>
#include <spillway/streaming/executor.hpp>
#include <spillway/streaming/message.hpp>
#include <spillway/table/spillable_tables.hpp>

#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spillway::streaming {

/// Thrown into an actor whose network stopped (another actor failed): it ends the actor; the
/// network reports the first error, not this.
class cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChannelOptions {
  /// A sender waits while more than this many messages are queued...
  std::size_t max_messages{4};
  /// ...or while the queued tables hold more than this many bytes (a message larger than the
  /// bound still goes through alone).
  std::size_t max_bytes{std::size_t{1} << 30};
  /// The spill priority of the queued tables (higher spills first).
  int spill_priority{0};
};

/// A queue of messages from one or more producers to one consumer. A message sent is kept at
/// once in a SpillableTables of the buffer resource: its buffers stay where they are, and the
/// spill policy may move them down to disk while it waits, so a slow consumer never makes its
/// producer run out of memory. A sender then waits (suspended, holding no thread) until the
/// queue is back within its bounds: that is the backpressure that stops a fast producer.
/// Receiving brings the oldest message up into the tier the receiver asks for.
///
/// The channel closes when every producer has closed it; a receiver then gets nullopt once the
/// queue is empty. A consumer that stops early shuts it: queued and later messages are dropped
/// and senders no longer wait. Cancelling (the network's first error) wakes every waiter with
/// streaming::cancelled. Thread-safe; one consumer at a time.
class Channel {
 public:
  /// @param producers how many producers must close the channel before it is closed
  Channel(std::string name, BufferResource& br, ChannelOptions options = {},
          std::size_t producers = 1);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const ChannelOptions& options() const noexcept { return options_; }
  /// Sets the producers that must close it (the network does, from its graph).
  void set_producers(std::size_t n);

  /// co_await: queues `m` (counted in `stats`), then suspends while the queue is over its
  /// bounds. Yields false when the consumer has shut the channel (`m` is dropped).
  /// @throws streaming::cancelled; spillway::logic_error after the channel closed
  class SendAwaiter;
  [[nodiscard]] SendAwaiter send(Message&& m, Executor& ex, ActorStats& stats);
  /// co_await: suspends until a message is queued or the channel is closed; yields the oldest
  /// message moved up into `to` (HOST or DEVICE), or nullopt once closed and empty.
  /// @throws streaming::cancelled; spillway::out_of_memory when `to` cannot hold it even after
  ///         spilling (it then stays queued)
  class ReceiveAwaiter;
  [[nodiscard]] ReceiveAwaiter receive(MemoryType to, Executor& ex, ActorStats& stats);

  /// send, blocking the calling thread (a blocking job's).
  bool send_sync(Message&& m, ActorStats& stats);
  /// receive, blocking the calling thread (a blocking job's).
  std::optional<Message> receive_sync(MemoryType to, ActorStats& stats);

  /// One producer is done.
  void close();
  /// The consumer reads no more: what is queued is dropped, later sends are dropped.
  void shutdown();
  /// Wakes every waiter with streaming::cancelled; later calls throw it too.
  void cancel();

  /// Messages queued now.
  [[nodiscard]] std::size_t queued() const;
  /// Queued bytes that are in tier `t` now (to see them spill).
  [[nodiscard]] std::size_t bytes_in(MemoryType t) const;
  /// Messages that went through so far.
  [[nodiscard]] std::uint64_t delivered() const;

 private:
  struct Queued {
    std::uint32_t partition;
    std::uint64_t sequence;
    std::size_t bytes;
  };
  using Lock = std::unique_lock<std::mutex>;

  /// Queues `m` (lock held); false when shut (dropped). @throws as send
  bool push(Message&& m, ActorStats& stats);
  [[nodiscard]] bool over_bounds() const;  // lock held
  [[nodiscard]] bool receivable() const;   // lock held
  /// The oldest message in `to`; nullopt when closed and empty. @throws as receive
  std::optional<Message> pop(Lock& lock, MemoryType to, ActorStats& stats);
  void throw_if_cancelled() const;  // lock held
  /// Wakes the waiting receiver, or the waiting senders (lock held).
  void wake_receiver();
  void wake_senders();

  std::string name_;
  ChannelOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;  // for the sync callers
  std::deque<Queued> queue_;
  std::size_t bytes_{0};
  std::size_t open_producers_;
  std::uint64_t delivered_{0};
  bool shut_{false};
  bool cancelled_{false};
  std::coroutine_handle<> receiver_;
  Executor* receiver_executor_{nullptr};
  std::vector<std::pair<std::coroutine_handle<>, Executor*>> senders_;
  SpillableTables tables_;

 public:
  class SendAwaiter {
   public:
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h);
    bool await_resume();

   private:
    friend class Channel;
    SendAwaiter(Channel& c, Message&& m, Executor& ex, ActorStats& s)
        : ch_{c}, msg_{std::move(m)}, ex_{ex}, stats_{s} {}
    Channel& ch_;
    Message msg_;
    Executor& ex_;
    ActorStats& stats_;
    bool queued_{false};
    std::exception_ptr error_;
    std::chrono::steady_clock::time_point since_{};
  };

  class ReceiveAwaiter {
   public:
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h);
    std::optional<Message> await_resume();

   private:
    friend class Channel;
    ReceiveAwaiter(Channel& c, MemoryType to, Executor& ex, ActorStats& s)
        : ch_{c}, to_{to}, ex_{ex}, stats_{s} {}
    Channel& ch_;
    MemoryType to_;
    Executor& ex_;
    ActorStats& stats_;
    std::chrono::steady_clock::time_point since_{};
  };
};

}  // namespace spillway::streaming
