#pragma once
/// @file memory_resource.hpp
/// The allocator interface behind each memory tier (RMM's device_memory_resource shape).

#include <spillway/core/stream.hpp>
#include <spillway/memory/memory_type.hpp>

#include <cstddef>
#include <string>

namespace spillway {

/// Allocates raw bytes of one tier. The public non-virtual methods check arguments and call the
/// private `do_*` virtuals. Implementations are thread-safe. Stream-ordered implementations
/// (cudaMallocAsync, pools) make the memory valid on `stream`; host-visible memory is valid on
/// the host when `allocate` returns.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;
  MemoryResource(MemoryResource&&) = delete;
  MemoryResource& operator=(MemoryResource&&) = delete;

  /// Returns `bytes` bytes (nullptr for 0). @throws spillway::cuda_error or std::bad_alloc
  void* allocate(std::size_t bytes, Stream stream) {
    return bytes == 0 ? nullptr : do_allocate(bytes, stream);
  }
  /// Returns memory from `allocate`; `bytes` must be the allocated size. Never throws.
  void deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept {
    if (ptr != nullptr) do_deallocate(ptr, bytes, stream);
  }
  /// What an allocation of `bytes` takes from the system (rounding, alignment, allocator
  /// headers): what its tier is charged for it. Sizes no allocation can have give `bytes`.
  [[nodiscard]] virtual std::size_t footprint(std::size_t bytes) const noexcept { return bytes; }
  [[nodiscard]] virtual MemoryType mem_type() const noexcept = 0;
  /// A short description ("cudaMallocAsync", "pinned pool", ...).
  [[nodiscard]] virtual std::string describe() const = 0;

 private:
  virtual void* do_allocate(std::size_t bytes, Stream stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept = 0;
};

}  // namespace spillway
