#include <spillway/comm/progress_thread.hpp>

#include <exception>
#include <vector>

namespace spillway {

ProgressThread::ProgressThread(const Logger& logger, std::chrono::microseconds idle_sleep)
    : logger_{logger}, idle_sleep_{idle_sleep}, thread_{[this] { loop(); }} {}

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
  cv_.notify_all();
  return id;
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
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (functions_.empty()) {
      cv_.wait_for(lock, idle_sleep_ * 10, [&] { return stop_ || !functions_.empty(); });
      continue;
    }
    std::vector<FunctionID> ids;
    for (const auto& [id, f] : functions_) ids.push_back(id);
    for (FunctionID id : ids) {
      auto it = functions_.find(id);
      if (it == functions_.end()) continue;
      running_ = id;
      Function& f = it->second;
      lock.unlock();
      Progress p = Progress::in_progress;
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
      cv_.notify_all();
    }
    if (idle_sleep_.count() > 0) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
  }
}

}  // namespace spillway
