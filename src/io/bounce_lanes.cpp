#include "io/detail/bounce_lanes.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/topology.hpp>

#include "io/detail/tasks.hpp"

#include <algorithm>

namespace spillway::io::detail {

Lane::Lane(int dev, std::size_t bytes) : device{dev}, size{bytes} {
  // From the memory of the GPU's NUMA node, where there are several (SPILLWAY_IO_NUMA).
  const topology::ScopedPreferredNode near(options::get().io_numa ? topology::numa_node_of_gpu(dev)
                                                                  : -1);
  for (auto& b : buf) b = cuda::malloc_pinned(bytes);  // page-aligned
}

Lane::~Lane() {
  for (void* b : buf) cuda::free_pinned(b);
}

std::vector<std::unique_ptr<Lane>> LanePool::take(int device, std::size_t size, std::size_t n) {
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

void LanePool::give_back(std::vector<std::unique_ptr<Lane>>& lanes) {
  std::lock_guard lock(mutex_);
  for (auto& l : lanes) {
    if (free_.size() >= max_kept) break;  // the rest are freed
    free_.push_back(std::move(l));
  }
  lanes.clear();
}

void run_on_lanes(ThreadPool* pool, std::size_t tasks, std::size_t task_size,
                  const std::function<void(std::size_t, std::size_t, Lane&)>& stripe) {
  const std::size_t stripes = std::min(tasks, pool != nullptr ? pool->size() + 1 : 1);
  if (stripes == 0) return;
  auto lanes = lane_pool().take(cuda::current_device(), task_size, stripes);
  try {
    run_tasks(pool, stripes, [&](std::size_t s) { stripe(s, stripes, *lanes[s]); });
  } catch (...) {
    for (auto& l : lanes) l->stream.view().synchronize();  // no copy still uses a buffer
    lane_pool().give_back(lanes);
    throw;
  }
  lane_pool().give_back(lanes);
}

LanePool& lane_pool() {
  static LanePool* pool = new LanePool;  // never destroyed: pinned memory outlives no CUDA context
  return *pool;
}

}  // namespace spillway::io::detail
