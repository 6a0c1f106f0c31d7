#include <spillway/comm/progress_thread.hpp>

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

namespace spillway {

ProgressThread::ProgressThread(const Logger& logger, Backoff backoff)
    : logger_{logger}, backoff_{backoff}, thread_{[this] { loop(); }} {}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

ProgressThread::FunctionID ProgressThread::add_function(Function f) {
  std::lock_guard lock(mutex_);
  const FunctionID id = ++next_id_;
  functions_.emplace(id, std::move(f));
  woken_ = true;
  cv_.notify_all();
  return id;
}

void ProgressThread::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ProgressThread::remove_function(FunctionID id) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return running_ != id; });
  functions_.erase(id);
  if (auto it = errors_.find(id); it != errors_.end()) {
    auto e = it->second;
    errors_.erase(it);
    std::rethrow_exception(e);
  }
}

void ProgressThread::wait_done(FunctionID id) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return functions_.count(id) == 0; });
  if (auto it = errors_.find(id); it != errors_.end()) {
    auto e = it->second;
    errors_.erase(it);
    std::rethrow_exception(e);
  }
}

void ProgressThread::loop() {
  using clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  std::optional<clock::time_point> idle_since;  // every function idle since
  std::chrono::microseconds sleep{0};
  while (!stop_) {
    if (functions_.empty()) {
      cv_.wait(lock, [&] { return stop_ || !functions_.empty(); });
      continue;
    }
    woken_ = false;
    bool busy = false;
    std::vector<FunctionID> ids;
    for (const auto& [id, f] : functions_) ids.push_back(id);
    for (FunctionID id : ids) {
      auto it = functions_.find(id);
      if (it == functions_.end()) continue;
      running_ = id;
      Function& f = it->second;
      lock.unlock();
      Progress p = Progress::busy;
      std::exception_ptr error;
      try {
        p = f();
      } catch (const std::exception& e) {
        logger_.error(std::string("progress function failed: ") + e.what());
        error = std::current_exception();
      }
      lock.lock();
      running_ = 0;
      if (error) errors_[id] = error;
      if (error || p == Progress::done) functions_.erase(id);
      busy = busy || p != Progress::idle;
      cv_.notify_all();
    }
    const auto now = clock::now();
    if (busy || woken_) {
      idle_since.reset();
      sleep = std::chrono::microseconds{0};
    } else if (!idle_since) {
      idle_since = now;
    }
    if (!idle_since || now - *idle_since < backoff_.spin) {
      // Between rounds the mutex is free for a moment, for remove_function() and add_function().
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    sleep = sleep.count() == 0 ? backoff_.first_sleep : std::min(sleep * 2, backoff_.max_sleep);
    cv_.wait_for(lock, sleep, [&] { return stop_ || woken_; });
  }
}

}  // namespace spillway
