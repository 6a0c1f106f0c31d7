#pragma once
// The lanes a staged copy runs on (internal): two host buffers, their events and a stream per
// thread, either carved from the caller's staging or taken from the process's pool of pinned
// lanes (kept for reuse per GPU and piece size).

#include <spillway/core/cuda.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/io/staged_copy.hpp>
#include <spillway/io/thread_pool.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace spillway::io::detail {

/// One thread's pipeline: two staging buffers, an event per buffer (the last copy into or out
/// of it) and the stream the copies run on.
struct Lane {
  std::array<std::byte*, 2> buf{};
  std::array<Event, 2> done;
  Stream stream;
};

/// A lane of the process's pool: pinned buffers and a stream of its own.
struct PooledLane {
  PooledLane(int dev, std::size_t bytes);
  ~PooledLane();
  PooledLane(const PooledLane&) = delete;
  PooledLane& operator=(const PooledLane&) = delete;

  int device;
  std::size_t size;
  OwningStream stream;  // on `device`
  Lane lane;
};

/// Pooled lanes kept for reuse (pinned allocations cost milliseconds), per GPU and piece size.
class LanePool {
 public:
  /// `n` lanes of `size`-byte buffers on `device`, reused where there are.
  std::vector<std::unique_ptr<PooledLane>> take(int device, std::size_t size, std::size_t n);
  /// Keeps up to max_kept lanes for later; frees the rest.
  void give_back(std::vector<std::unique_ptr<PooledLane>>& lanes);

 private:
  static constexpr std::size_t max_kept = 64;
  std::mutex mutex_;
  std::vector<std::unique_ptr<PooledLane>> free_;
};

/// The process's lanes.
LanePool& lane_pool();

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
