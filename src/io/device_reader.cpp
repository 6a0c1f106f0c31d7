#include <spillway/io/device_reader.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>

#include "tasks.hpp"

#include <fcntl.h>

#include <array>
#include <memory>
#include <mutex>
#include <vector>

namespace spillway::io {

namespace {

using detail::direct_align;

/// One thread's pipeline: two pinned bounce buffers, a stream and an event per buffer.
struct Lane {
  Lane(int dev, std::size_t bytes) : device{dev}, size{bytes} {
    for (auto& b : buf) b = cuda::malloc_pinned(bytes);  // page-aligned
  }
  ~Lane() {
    for (void* b : buf) cuda::free_pinned(b);
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int device;
  std::size_t size;
  std::array<void*, 2> buf{};
  std::array<Event, 2> done;  // the copy out of buf[i]
  OwningStream stream;        // on `device`
};

/// Lanes kept for reuse (pinned allocations cost milliseconds), per GPU and task size.
class LanePool {
 public:
  std::vector<std::unique_ptr<Lane>> take(int device, std::size_t size, std::size_t n) {
    std::vector<std::unique_ptr<Lane>> out;
    {
      std::lock_guard lock(mutex_);
      for (auto it = free_.begin(); it != free_.end() && out.size() < n;) {
        if ((*it)->device == device && (*it)->size == size) {
          out.push_back(std::move(*it));
          it = free_.erase(it);
        } else {
          ++it;
        }
      }
    }
    while (out.size() < n) out.push_back(std::make_unique<Lane>(device, size));
    return out;
  }
  void give_back(std::vector<std::unique_ptr<Lane>>& lanes) {
    std::lock_guard lock(mutex_);
    for (auto& l : lanes) {
      if (free_.size() >= max_kept) break;  // the rest are freed
      free_.push_back(std::move(l));
    }
    lanes.clear();
  }

 private:
  static constexpr std::size_t max_kept = 64;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Lane>> free_;
};

LanePool& lane_pool() {
  static LanePool* pool = new LanePool;  // never destroyed: pinned memory outlives no CUDA context
  return *pool;
}

}  // namespace

DevicePath read_file_to_device(const std::string& path, void* dst, std::size_t bytes,
                               std::uint64_t offset, ThreadPool* pool, const ReadOptions& options) {
  SPILLWAY_EXPECTS(cuda::is_available(), "read_file_to_device needs a GPU");
  SPILLWAY_EXPECTS(options.task_size > 0, "read_file_to_device: the task size must be positive");
  if (cuda::reads_pageable_memory()) {
    read_file(path, dst, bytes, offset, pool, options);
    return DevicePath::pageable;
  }
  FileHandle buffered(path, O_RDONLY);
  FileHandle direct;
  if (options.direct && options.task_size % direct_align == 0) direct = detail::open_direct(path);
  const std::size_t tasks = (bytes + options.task_size - 1) / options.task_size;
  const std::size_t stripes = std::min(tasks, pool != nullptr ? pool->size() + 1 : 1);
  if (stripes == 0) return DevicePath::bounce;
  auto lanes = lane_pool().take(cuda::current_device(), options.task_size, stripes);
  auto* out = static_cast<std::byte*>(dst);
  auto stripe = [&](std::size_t s) {
    Lane& lane = *lanes[s];
    std::size_t k = 0;
    for (std::size_t t = s; t < tasks; t += stripes, ++k) {
      const std::size_t begin = t * options.task_size;
      const std::size_t len = std::min(options.task_size, bytes - begin);
      const std::uint64_t at = offset + begin;
      const std::size_t slot = k & 1U;
      lane.done[slot].synchronize();  // the copy out of this buffer, two tasks ago
      const bool aligned = at % direct_align == 0 && len % direct_align == 0;
      (direct.is_open() && aligned ? direct : buffered).pread(lane.buf[slot], len, at);
      cuda::memcpy_async(out + begin, lane.buf[slot], len, lane.stream);
      lane.done[slot].record(lane.stream);
    }
    lane.stream.view().synchronize();
  };
  try {
    detail::run_tasks(pool, stripes, stripe);
  } catch (...) {
    for (auto& l : lanes) l->stream.view().synchronize();  // no copy still reads a buffer
    lane_pool().give_back(lanes);
    throw;
  }
  lane_pool().give_back(lanes);
  return DevicePath::bounce;
}

}  // namespace spillway::io
