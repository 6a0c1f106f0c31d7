#pragma once
/// @file progress_thread.hpp
/// A thread that runs registered progress functions in a loop (the shuffler registers one to
/// send, receive and finish its partitions), sleeping briefly when there is nothing to run.

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
  enum class Progress { in_progress, done };
  /// Called repeatedly until it returns done (then it is removed). An exception stops only
  /// that function: it is logged and kept for remove_function() to rethrow.
  using Function = std::function<Progress()>;
  using FunctionID = std::uint64_t;

  /// @param idle_sleep how long the loop sleeps when no function is registered
  explicit ProgressThread(const Logger& logger,
                          std::chrono::microseconds idle_sleep = std::chrono::microseconds(100));
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  FunctionID add_function(Function f);
  /// Blocks until `id` is no longer registered (it returned done or is removed now) and is not
  /// running. Rethrows the exception it ended with, if any.
  void remove_function(FunctionID id);
  /// Blocks until `id` has returned done (or thrown: rethrown here).
  void wait_done(FunctionID id);

 private:
  void loop();

  const Logger& logger_;
  std::chrono::microseconds idle_sleep_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<FunctionID, Function> functions_;
  std::map<FunctionID, std::exception_ptr> errors_;
  FunctionID next_id_{0};
  FunctionID running_{0};  // 0: none (ids start at 1)
  bool stop_{false};
  std::thread thread_;
};

}  // namespace spillway
