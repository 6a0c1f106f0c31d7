#pragma once
/// @file shared_host_memory.hpp
/// Host memory that another process of this node can map: a memfd, mapped here and, where a GPU
/// is usable, page-locked for it (cudaHostRegister). Registered with a TransferEngine as
/// MemoryType::PINNED_HOST, it lets a cuda_ipc peer write into it from its own GPU, one-sided:
/// the peer maps the same pages and copies from its device memory, instead of asking this
/// process to copy out of the peer's memory through CUDA IPC (the path of other host memory).
///
///     auto buffer = SharedHostMemory::allocate(64 << 20);
///     Region r = engine.register_memory(buffer.data(), buffer.size(), MemoryType::PINNED_HOST);
///
/// The memory ends with the object, and with the process: it has no name in any file system.

#include <cstddef>

namespace spillway::transfer {

class SharedHostMemory {
 public:
  /// `bytes` of zeroed memory.
  /// @throws spillway::logic_error for 0 bytes; spillway::io_error when the memfd cannot be
  /// made or mapped (the message says why)
  static SharedHostMemory allocate(std::size_t bytes);

  SharedHostMemory(SharedHostMemory&& other) noexcept;
  SharedHostMemory& operator=(SharedHostMemory&& other) noexcept;
  SharedHostMemory(const SharedHostMemory&) = delete;
  SharedHostMemory& operator=(const SharedHostMemory&) = delete;
  /// Regions of it registered with an engine must have been deregistered.
  ~SharedHostMemory();

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  /// Page-locked for the GPU (false without one).
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }

 private:
  SharedHostMemory(void* data, std::size_t bytes, int fd, bool pinned) noexcept
      : data_{data}, bytes_{bytes}, fd_{fd}, pinned_{pinned} {}
  void release() noexcept;

  void* data_{nullptr};
  std::size_t bytes_{0};
  int fd_{-1};
  bool pinned_{false};
};

}  // namespace spillway::transfer
