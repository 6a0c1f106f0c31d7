#pragma once
/// @file host_memory_resource.hpp
/// Ordinary (pageable) host memory, page-aligned, with a cache of freed large blocks.

#include <spillway/memory/memory_resource.hpp>

#include <cstddef>
#include <map>
#include <mutex>

namespace spillway {

/// Page-aligned host memory from the C++ heap (2 MiB-aligned huge pages from 4 MiB up).
/// Freed blocks of 1 MiB or more are kept, up to `cache_capacity` bytes, and handed out again
/// for the same rounded size: fresh memory costs a page fault and a zeroing pass per page,
/// which is most of the cost of copying into a new buffer. The owner trims the cache so that
/// cached plus used bytes stay within the tier's limit. Thread-safe.
class HostMemoryResource final : public MemoryResource {
 public:
  explicit HostMemoryResource(std::size_t cache_capacity = 0) : capacity_{cache_capacity} {}
  ~HostMemoryResource() override;
  HostMemoryResource(const HostMemoryResource&) = delete;
  HostMemoryResource& operator=(const HostMemoryResource&) = delete;
  HostMemoryResource(HostMemoryResource&&) = delete;
  HostMemoryResource& operator=(HostMemoryResource&&) = delete;

  [[nodiscard]] MemoryType mem_type() const noexcept override { return MemoryType::HOST; }
  [[nodiscard]] std::string describe() const override;
  /// Bytes held in the cache (allocated from the system, not in use).
  [[nodiscard]] std::size_t cached() const;
  /// Returns cached blocks to the system until at most `bytes` stay cached.
  void trim_to(std::size_t bytes) noexcept;

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;

  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // rounded size -> block
  std::size_t cached_{0};
};

}  // namespace spillway
