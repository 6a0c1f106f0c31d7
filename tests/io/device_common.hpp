#pragma once
// Device memory helpers of the GPU I/O tests (they skip without a GPU before using these).

#include <spillway/core/cuda.hpp>

#include "common.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway::test {

/// Device memory of `n` bytes (at least one), freed at scope end; with a seed, holding that
/// fill_pattern.
struct DeviceBytes {
  explicit DeviceBytes(std::size_t n) : ptr{cuda::malloc_device(std::max<std::size_t>(n, 1))} {}
  DeviceBytes(std::size_t n, std::uint64_t seed) : DeviceBytes(n) {
    std::vector<std::byte> host(n);
    fill_pattern(host.data(), n, seed);
    if (n > 0) {
      cuda::memcpy_async(ptr, host.data(), n, Stream{});
      cuda::stream_synchronize(Stream{});
    }
  }
  ~DeviceBytes() { cuda::free_device(ptr); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* ptr;
};

/// `n` bytes of device memory, copied to the host.
inline std::vector<std::byte> to_host(const void* device, std::size_t n) {
  std::vector<std::byte> out(n);
  if (n > 0) {
    cuda::memcpy_async(out.data(), device, n, Stream{});
    cuda::stream_synchronize(Stream{});
  }
  return out;
}

}  // namespace spillway::test
