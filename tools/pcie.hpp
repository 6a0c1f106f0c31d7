#pragma once
// The pinned host <-> device copy ceiling of the current GPU, measured in the same run as the
// figures printed beside it (spillway-readspeed, spillway-bench-shuffle). Its buffers are
// allocated and freed here, outside any BufferResource's accounting.

#include <spillway/core/cuda.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/core/units.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace spillway::tools {

/// GB/s of `bytes` (at most 1 GiB) copied from pinned host memory to the device (or back):
/// the median of 5 copies after one to warm up.
inline double pcie_ceiling(std::size_t bytes, bool to_device) {
  const std::size_t n = std::min<std::size_t>(bytes, GiB);
  std::unique_ptr<void, void (*)(void*)> host(cuda::malloc_pinned(n), cuda::free_pinned);
  std::unique_ptr<void, void (*)(void*)> dev(cuda::malloc_device(n), cuda::free_device);
  std::memset(host.get(), 1, n);
  cuda::memset_device(dev.get(), 1, n);
  std::vector<double> gbps;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (to_device) {
      cuda::memcpy_async(dev.get(), host.get(), n, Stream{});
    } else {
      cuda::memcpy_async(host.get(), dev.get(), n, Stream{});
    }
    cuda::stream_synchronize(Stream{});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) gbps.push_back(static_cast<double>(n) / s / 1e9);  // the first warms up
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

}  // namespace spillway::tools
