#pragma once
/// @file context.hpp
/// What an actor sees of its network: its channels, the rank's buffer resource and
/// communicator, its statistics, and a way to make a blocking call without holding a thread of
/// the executor.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/streaming/actor_stats.hpp>
#include <spillway/streaming/channel.hpp>
#include <spillway/streaming/executor.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spillway {
class Communicator;
}

namespace spillway::streaming {

/// The awaitable of Context::blocking: runs a call on the executor's blocking pool and
/// resumes the actor with its result (or its exception) on a coroutine thread.
template <class F>
class BlockingAwaiter {
  using R = std::invoke_result_t<F&>;

 public:
  BlockingAwaiter(Executor& ex, F f) : ex_{ex}, f_{std::move(f)} {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    ex_.run_blocking([this, h, ex = &ex_] {
      try {
        if constexpr (std::is_void_v<R>) {
          f_();
        } else {
          result_.emplace(f_());
        }
      } catch (...) {
        error_ = std::current_exception();
      }
      ex->schedule(h);  // last: the awaiter may be gone once h runs
    });
  }
  R await_resume() {
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<R>) return std::move(*result_);
  }

 private:
  Executor& ex_;
  F f_;
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result_{};
  std::exception_ptr error_;
};

/// One actor's view of its network. Made by Network::add; lives as long as the network.
class Context {
 public:
  Context(std::string name, std::vector<Channel*> inputs, std::vector<Channel*> outputs,
          BufferResource& br, Communicator* comm, Executor& ex, const std::atomic<bool>& stopped);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] BufferResource& br() const noexcept { return br_; }
  /// The rank's communicator; nullptr in a network made without one.
  [[nodiscard]] Communicator* comm() const noexcept { return comm_; }
  /// The communicator. @throws spillway::logic_error in a network made without one
  [[nodiscard]] Communicator& communicator() const;
  [[nodiscard]] Executor& executor() const noexcept { return ex_; }
  [[nodiscard]] std::size_t inputs() const noexcept { return inputs_.size(); }
  [[nodiscard]] std::size_t outputs() const noexcept { return outputs_.size(); }
  /// @throws spillway::logic_error for an index out of range
  [[nodiscard]] Channel& input(std::size_t i) const;
  [[nodiscard]] Channel& output(std::size_t i) const;
  [[nodiscard]] ActorStats& stats() noexcept { return stats_; }
  [[nodiscard]] const ActorStats& stats() const noexcept { return stats_; }
  /// Whether the network has stopped (an actor failed): a long blocking call checks it.
  [[nodiscard]] bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }
  /// @throws streaming::cancelled when the network has stopped
  void throw_if_stopped() const;

  /// co_await ctx.send(i, m): Channel::send on output i.
  [[nodiscard]] Channel::SendAwaiter send(std::size_t i, Message&& m) {
    return output(i).send(std::move(m), ex_, stats_);
  }
  /// co_await ctx.receive(i, to): Channel::receive on input i.
  [[nodiscard]] Channel::ReceiveAwaiter receive(std::size_t i, MemoryType to) {
    return input(i).receive(to, ex_, stats_);
  }
  /// From a blocking call of this actor (blocking()): the same, blocking its thread.
  bool send_sync(std::size_t i, Message&& m) { return output(i).send_sync(std::move(m), stats_); }
  std::optional<Message> receive_sync(std::size_t i, MemoryType to) {
    return input(i).receive_sync(to, stats_);
  }
  /// Closes output i for this actor (once; again does nothing). The network closes every
  /// output of an actor that ends.
  void close(std::size_t i);
  void close_outputs();
  /// Tells the producers of every input that this actor reads no more.
  void shutdown_inputs();

  /// co_await ctx.blocking(f): f() on a thread of the blocking pool, its result (or its
  /// exception) back in the actor. For calls that may block: a file read, a wait for memory,
  /// a collective, a user function that waits.
  template <class F>
  [[nodiscard]] BlockingAwaiter<std::decay_t<F>> blocking(F&& f) {
    return BlockingAwaiter<std::decay_t<F>>(ex_, std::forward<F>(f));
  }

 private:
  std::string name_;
  std::vector<Channel*> inputs_;
  std::vector<Channel*> outputs_;
  std::vector<bool> closed_;
  BufferResource& br_;
  Communicator* comm_;
  Executor& ex_;
  const std::atomic<bool>& stopped_;
  ActorStats stats_;
};

}  // namespace spillway::streaming
