#include "io/detail/bounce_lanes.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/topology.hpp>

namespace spillway::io::detail {

PooledLane::PooledLane(int dev, std::size_t bytes) : device{dev}, size{bytes} {
  // From the memory of the GPU's NUMA node, where there are several (SPILLWAY_IO_NUMA).
  const topology::ScopedPreferredNode near(options::get().io_numa ? topology::numa_node_of_gpu(dev)
                                                                  : -1);
  for (auto& b : lane.buf) b = static_cast<std::byte*>(cuda::malloc_pinned(bytes));
  lane.stream = stream.view();
}

PooledLane::~PooledLane() {
  for (std::byte* b : lane.buf) cuda::free_pinned(b);
}

std::vector<std::unique_ptr<PooledLane>> LanePool::take(int device, std::size_t size,
                                                        std::size_t n) {
  std::vector<std::unique_ptr<PooledLane>> out;
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
  while (out.size() < n) out.push_back(std::make_unique<PooledLane>(device, size));
  return out;
}

void LanePool::give_back(std::vector<std::unique_ptr<PooledLane>>& lanes) {
  std::lock_guard lock(mutex_);
  for (auto& l : lanes) {
    if (free_.size() >= max_kept) break;  // the rest are freed
    free_.push_back(std::move(l));
  }
  lanes.clear();
}

LanePool& lane_pool() {
  static LanePool* pool = new LanePool;  // never destroyed: pinned memory outlives no CUDA context
  return *pool;
}

}  // namespace spillway::io::detail
