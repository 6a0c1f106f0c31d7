#pragma once
/// @file progress_thread.hpp
/// A thread that runs registered progress functions in a loop (the shuffler registers one to
/// send, receive and finish its partitions). While the functions report that nothing moved it
/// spins briefly, then backs off (sleeps of growing length, up to a bound), so that a rank
/// waiting on a slow peer costs almost no CPU; wake() or any function that moves something
/// brings it back to full speed.

#include <spillway/comm/logger.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace spillway {

class ProgressThread {
 public:
  /// What a function's call did: `busy` moved something (posted, completed, received), `idle`
  /// found nothing to do yet (both: call again), `done` finished (then it is removed).
  enum class Progress { busy, idle, done };
  /// Called repeatedly until it returns done. An exception stops only that function: it is
  /// logged and kept for remove_function() to rethrow.
  using Function = std::function<Progress()>;
  using FunctionID = std::uint64_t;

  /// How the loop waits when every function is idle: it goes on polling for `spin`, then sleeps
  /// `first_sleep`, doubling each idle round up to `max_sleep`. The latency a message that
  /// arrives while the loop sleeps sees is at most `max_sleep`.
  struct Backoff {
    std::chrono::microseconds spin{2000};
    std::chrono::microseconds first_sleep{20};
    std::chrono::microseconds max_sleep{1000};
  };

  explicit ProgressThread(const Logger& logger) : ProgressThread(logger, Backoff{}) {}
  ProgressThread(const Logger& logger, Backoff backoff);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  FunctionID add_function(Function f);
  /// Blocks until `id` is no longer registered (it returned done or is removed now) and is not
  /// running. Rethrows the exception it ended with, if any.
  void remove_function(FunctionID id);
  /// Blocks until `id` has returned done (or thrown: rethrown here).
  void wait_done(FunctionID id);
  /// Ends a backoff now: there is new work (a caller queued data for a function). Thread-safe.
  void wake();

 private:
  void loop();

  const Logger& logger_;
  const Backoff backoff_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<FunctionID, Function> functions_;
  std::map<FunctionID, std::exception_ptr> errors_;
  FunctionID next_id_{0};
  FunctionID running_{0};  // 0: none (ids start at 1)
  bool stop_{false};
  bool woken_{false};
  std::thread thread_;
};

}  // namespace spillway
