#pragma once
/// @file thread_pool.hpp
/// A fixed-size pool of worker threads for parallel file I/O.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <thread>
#include <type_traits>
#include <vector>

namespace spillway::io {

/// A fixed pool of threads running submitted tasks in FIFO order. Thread-safe. The destructor
/// finishes queued tasks and joins the workers.
class ThreadPool {
 public:
  /// `cpus`: the CPUs the workers run on (empty: wherever the OS puts them); io_cpus() gives
  /// the ones near the GPU. @throws spillway::logic_error when `nthreads` is 0.
  explicit ThreadPool(std::size_t nthreads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ThreadPool(ThreadPool&&) = delete;
  ThreadPool& operator=(ThreadPool&&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }
  /// The CPUs the workers are bound to (empty: not bound).
  [[nodiscard]] const std::vector<int>& cpus() const noexcept { return cpus_; }

  /// Queues `f` and returns a future of its result (exceptions travel through the future).
  template <typename F>
  auto submit(F&& f) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    auto fut = task->get_future();
    enqueue([task] { (*task)(); });
    return fut;
  }

  /// Runs fn(0) .. fn(ntasks-1) on the pool and on the calling thread, and waits for all.
  /// The caller takes part, so progress is guaranteed even when every worker is busy.
  /// @throws the first exception any task threw, after all tasks have finished.
  void parallel_for(std::size_t ntasks, const std::function<void(std::size_t)>& fn);

 private:
  void enqueue(std::function<void()> job);
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::queue<std::function<void()>> jobs_;
  bool stopping_{false};
  std::vector<int> cpus_;
  std::vector<std::thread> workers_;
};

/// The CPUs spillway's I/O threads for the current GPU run on: that GPU's NUMA node's CPUs
/// where SPILLWAY_IO_NUMA allows and the machine has several nodes; empty (anywhere) otherwise.
std::vector<int> io_cpus();

}  // namespace spillway::io
