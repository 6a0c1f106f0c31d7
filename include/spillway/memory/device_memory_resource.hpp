#pragma once
/// @file device_memory_resource.hpp
/// GPU memory through one of three real CUDA allocators (RapidsMPF's -m cuda|async|pool).

#include <spillway/core/options.hpp>
#include <spillway/memory/memory_resource.hpp>

#include <cstddef>

namespace spillway {

/// Device memory on the current GPU. `cuda`: cudaMalloc/cudaFree (synchronous). `async`:
/// cudaMallocAsync/cudaFreeAsync on the device's default pool. `pool`: a dedicated cudaMemPool
/// with `pool_size` bytes mapped up front and never released to the driver. Thread-safe.
class DeviceMemoryResource final : public MemoryResource {
 public:
  /// @throws spillway::cuda_error, or spillway::logic_error without CUDA.
  explicit DeviceMemoryResource(DeviceAllocator kind, std::size_t pool_size = 0);
  ~DeviceMemoryResource() override;
  DeviceMemoryResource(const DeviceMemoryResource&) = delete;
  DeviceMemoryResource& operator=(const DeviceMemoryResource&) = delete;
  DeviceMemoryResource(DeviceMemoryResource&&) = delete;
  DeviceMemoryResource& operator=(DeviceMemoryResource&&) = delete;

  [[nodiscard]] MemoryType mem_type() const noexcept override { return MemoryType::DEVICE; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] DeviceAllocator kind() const noexcept { return kind_; }

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;

  DeviceAllocator kind_;
  std::size_t pool_size_;
  void* pool_{nullptr};
};

}  // namespace spillway
