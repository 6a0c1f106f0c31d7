#pragma once
// Pinned bounce buffers for reads into and writes from device memory (internal): one lane per
// thread, two page-aligned buffers and a stream, kept for reuse per GPU and task size.

#include <spillway/core/cuda.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>

#include <spillway/io/thread_pool.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace spillway::io::detail {

/// One thread's pipeline: two pinned bounce buffers, a stream and an event per buffer.
struct Lane {
  Lane(int dev, std::size_t bytes);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int device;
  std::size_t size;
  std::array<void*, 2> buf{};
  std::array<Event, 2> done;  // the last copy into or out of buf[i]
  OwningStream stream;        // on `device`
};

/// Lanes kept for reuse (pinned allocations cost milliseconds), per GPU and task size.
class LanePool {
 public:
  /// `n` lanes of `size`-byte buffers on `device`, reused where there are.
  std::vector<std::unique_ptr<Lane>> take(int device, std::size_t size, std::size_t n);
  /// Keeps up to max_kept lanes for later; frees the rest.
  void give_back(std::vector<std::unique_ptr<Lane>>& lanes);

 private:
  static constexpr std::size_t max_kept = 64;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Lane>> free_;
};

/// The process's lanes.
LanePool& lane_pool();

/// Deals `tasks` out in stripes to the caller and `pool` (one stripe per thread, at most one
/// per task) and runs stripe(s, stripes, lane) for each, on a lane of `task_size`-byte buffers
/// of the current GPU. The lanes go back to the pool once every copy on them has finished, also
/// when a stripe throws (then the first error is rethrown).
void run_on_lanes(ThreadPool* pool, std::size_t tasks, std::size_t task_size,
                  const std::function<void(std::size_t, std::size_t, Lane&)>& stripe);

/// fn() on `pool`, on the GPU current in the calling thread (a pool thread's may differ).
template <class F>
auto submit_on_callers_gpu(ThreadPool& pool, F fn) {
  const int device = cuda::is_available() ? cuda::current_device() : -1;
  return pool.submit([device, fn = std::move(fn)] {
    if (device >= 0) cuda::set_device(device);
    return fn();
  });
}

}  // namespace spillway::io::detail
