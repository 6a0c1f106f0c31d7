#pragma once
// Device memory a rank sets aside for its peers to write into over CUDA IPC (internal): one
// cudaMalloc allocation, which unlike memory of a stream-ordered pool has an IPC handle, and
// a first-fit allocator of ranges of it. Not thread-safe: its owner locks.

#include <spillway/core/cuda.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace spillway::detail {

/// The bytes a rank sets aside for peers' device writes (a window of the `mpi` or `transfer`
/// communicator) out of `setting`: all of it without a device limit, else at most a quarter of
/// the limit, which the window is charged to (a window of the whole setting left a small
/// limit no room to work in); whole `granule`s.
inline std::size_t window_bytes(std::size_t setting, const BufferResource& br,
                                std::size_t granule) {
  std::size_t bytes = setting;
  if (br.is_live(MemoryType::DEVICE) && br.limit(MemoryType::DEVICE) != unlimited_bytes) {
    bytes = std::min(bytes, br.limit(MemoryType::DEVICE) / 4);
  }
  return granule == 0 ? 0 : bytes / granule * granule;
}

class DeviceWindow {
 public:
  /// @throws spillway::cuda_error when the device has no room for it
  explicit DeviceWindow(std::size_t bytes)
      : data_{static_cast<std::byte*>(cuda::malloc_device(bytes))}, bytes_{bytes} {
    free_[0] = bytes;
  }
  ~DeviceWindow() { cuda::free_device(data_); }
  DeviceWindow(const DeviceWindow&) = delete;
  DeviceWindow& operator=(const DeviceWindow&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

  /// The offset of `n` free bytes (n > 0), now taken; nullopt when no free range is that big.
  std::optional<std::size_t> take(std::size_t n) {
    const std::size_t want = (n + kAlign - 1) / kAlign * kAlign;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < want) continue;
      const std::size_t at = it->first;
      const std::size_t left = it->second - want;
      free_.erase(it);
      if (left > 0) free_[at + want] = left;
      return at;
    }
    return std::nullopt;
  }

  /// Gives back what take(n) returned as `at`.
  void give(std::size_t at, std::size_t n) {
    std::size_t bytes = (n + kAlign - 1) / kAlign * kAlign;
    auto next = free_.lower_bound(at);
    if (next != free_.end() && at + bytes == next->first) {  // joins the range after
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second == at) {  // joins the range before
        prev->second += bytes;
        return;
      }
    }
    free_[at] = bytes;
  }

 private:
  static constexpr std::size_t kAlign = 256;
  std::byte* data_;
  std::size_t bytes_;
  std::map<std::size_t, std::size_t> free_;  // offset -> bytes, none adjacent
};

}  // namespace spillway::detail
