#include <spillway/core/error.hpp>
#include <spillway/streaming/executor.hpp>

namespace spillway::streaming {

Executor::Executor(std::size_t threads) {
  if (threads == 0) throw logic_error("streaming::Executor: 0 threads");
  workers_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

Executor::~Executor() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  ready_cv_.notify_all();
  blocking_cv_.notify_all();
  for (auto& t : workers_) t.join();
  for (auto& t : blocking_) t.join();
}

void Executor::schedule(std::coroutine_handle<> h) {
  {
    std::lock_guard lock(mutex_);
    ready_.push_back(h);
  }
  ready_cv_.notify_one();
}

void Executor::run_blocking(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  jobs_.push_back(std::move(job));
  ++blocking_running_;
  if (blocking_idle_ > 0) {
    --blocking_idle_;
    blocking_cv_.notify_one();
  } else {
    blocking_.emplace_back([this] { block(); });
  }
}

bool Executor::idle() const {
  std::lock_guard lock(mutex_);
  return ready_.empty() && running_ == 0 && blocking_running_ == 0;
}

void Executor::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ready_cv_.wait(lock, [&] { return stop_ || !ready_.empty(); });
    if (stop_) return;
    std::coroutine_handle<> h = ready_.front();
    ready_.pop_front();
    ++running_;
    lock.unlock();
    h.resume();
    lock.lock();
    --running_;
  }
}

void Executor::block() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // A job was counted for this thread when it was started or woken.
    blocking_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;
    lock.lock();
    --blocking_running_;
    ++blocking_idle_;
  }
}

}  // namespace spillway::streaming
