#pragma once
/// @file executor.hpp
/// The threads a network's actors run on: a few that resume coroutines, and a pool that grows
/// for blocking jobs (a file read, a collective's wait, a user function that blocks).

#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spillway::streaming {

/// Resumes scheduled coroutines on `threads` threads. An actor that waits on a channel is
/// suspended and holds no thread; one that must block hands the blocking call to
/// run_blocking(), whose threads are separate, so that the coroutine threads stay free for the
/// actors that can run. Thread-safe.
class Executor {
 public:
  /// @throws spillway::logic_error for 0 threads
  explicit Executor(std::size_t threads);
  /// Stops and joins every thread; work still queued is dropped.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Resumes `h` on one of the coroutine threads.
  void schedule(std::coroutine_handle<> h);
  /// Runs `job` on a thread of the blocking pool (one more is started when none is idle).
  /// `job` must not throw.
  void run_blocking(std::function<void()> job);

  /// Whether nothing is queued, running or blocking right now: then nothing can wake a
  /// suspended coroutine, and one still suspended waits for ever (a deadlock).
  [[nodiscard]] bool idle() const;
  [[nodiscard]] std::size_t threads() const noexcept { return workers_.size(); }

 private:
  void work();
  void block();

  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::condition_variable blocking_cv_;
  std::deque<std::coroutine_handle<>> ready_;
  std::deque<std::function<void()>> jobs_;
  std::size_t running_{0};
  std::size_t blocking_running_{0};
  std::size_t blocking_idle_{0};
  bool stop_{false};
  std::vector<std::thread> workers_;
  std::vector<std::thread> blocking_;
};

}  // namespace spillway::streaming
