#include <spillway/io/thread_pool.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/topology.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <utility>

namespace spillway::io {

ThreadPool::ThreadPool(std::size_t nthreads, std::vector<int> cpus) : cpus_{std::move(cpus)} {
  SPILLWAY_EXPECTS(nthreads > 0, "a thread pool needs at least one thread");
  workers_.reserve(nthreads);
  for (std::size_t i = 0; i < nthreads; ++i) {
    workers_.emplace_back([this] {
      if (!topology::bind_this_thread(cpus_)) {
        SPILLWAY_LOG(warn, "io: could not bind an I/O thread to its CPUs; it runs unbound");
      }
      run();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::enqueue(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push(std::move(job));
  }
  cv_.notify_one();
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop();
    }
    job();
  }
}

void ThreadPool::parallel_for(std::size_t ntasks, const std::function<void(std::size_t)>& fn) {
  if (ntasks == 0) return;
  if (ntasks == 1) {
    fn(0);
    return;
  }
  struct Shared {
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::condition_variable done_cv;
    std::size_t done{0};
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  auto worker = [shared, ntasks, &fn] {
    for (std::size_t i = shared->next.fetch_add(1); i < ntasks; i = shared->next.fetch_add(1)) {
      std::exception_ptr err;
      try {
        fn(i);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lock(shared->mutex);
      if (err && !shared->error) shared->error = err;
      // Drop this task's exception under the lock, before the caller can go on: a later error
      // destroyed here would otherwise race with the caller reading the first one (their
      // messages may share a reference-counted string).
      err = nullptr;
      if (++shared->done == ntasks) shared->done_cv.notify_all();
    }
  };
  const std::size_t helpers = std::min(ntasks - 1, workers_.size());
  for (std::size_t h = 0; h < helpers; ++h) enqueue(worker);
  worker();
  std::exception_ptr error;
  {
    std::unique_lock lock(shared->mutex);
    shared->done_cv.wait(lock, [&] { return shared->done == ntasks; });
    // Take the exception out: a helper may drop its reference to `shared` later, and must not
    // release the exception while this thread is using it.
    error = std::exchange(shared->error, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

std::vector<int> io_cpus() {
  if (!options::get().io_numa || !cuda::is_available()) return {};
  return topology::cpus_near_gpu(cuda::current_device());
}

}  // namespace spillway::io
