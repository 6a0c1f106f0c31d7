#pragma once
/// @file host_memory_resource.hpp
/// Ordinary (pageable) host memory, page-aligned, with a cache of freed large blocks.

#include <spillway/memory/memory_resource.hpp>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace spillway {

/// Host memory in two kinds:
/// - up to 2 KiB: slots of a size class (16, 32, ..., 2048 bytes, 16-byte aligned) in 64 KiB
///   slabs mapped from the system, so that many small buffers share pages (one page each
///   made 524 288 buffers of 128 B take 4 GiB); an empty slab goes back to the system;
/// - larger: whole pages mapped from the system (2 MiB-aligned huge pages from 4 MiB up).
/// footprint() is what each takes: the class size (slabs; below 1 MiB, 16 sizes per doubling of
/// whole pages), or the size rounded to its pages. Freed blocks are kept, up to `cache_capacity`
/// bytes, and handed out again for the same rounded size: fresh memory costs a page fault and a
/// zeroing pass per page, which is most of the cost of copying into a new buffer, and giving
/// it back costs a TLB shootdown on every core. The owner trims the cache so that cached plus used
/// bytes stay within the tier's limit. Thread-safe.
class HostMemoryResource final : public MemoryResource {
 public:
  /// The largest size served from slabs (shared pages); larger blocks have pages of their own.
  static constexpr std::size_t largest_slab_size = 2048;

  explicit HostMemoryResource(std::size_t cache_capacity = 0) : capacity_{cache_capacity} {}
  ~HostMemoryResource() override;
  HostMemoryResource(const HostMemoryResource&) = delete;
  HostMemoryResource& operator=(const HostMemoryResource&) = delete;
  HostMemoryResource(HostMemoryResource&&) = delete;
  HostMemoryResource& operator=(HostMemoryResource&&) = delete;

  [[nodiscard]] std::size_t footprint(std::size_t bytes) const noexcept override;
  [[nodiscard]] MemoryType mem_type() const noexcept override { return MemoryType::HOST; }
  [[nodiscard]] std::string describe() const override;
  /// Bytes held in the cache (allocated from the system, not in use).
  [[nodiscard]] std::size_t cached() const;
  /// Returns cached blocks to the system until at most `bytes` stay cached.
  void trim_to(std::size_t bytes) noexcept;

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;

  /// A 64 KiB slab of one size class: slots handed out from `bump`, freed ones on a list
  /// threaded through their first bytes.
  struct Slab {
    std::byte* base{nullptr};
    std::size_t slot{0};
    std::size_t bump{0};  // slots never handed out start here
    std::size_t live{0};
    void* free{nullptr};
  };
  void* slab_allocate(std::size_t bytes);
  void slab_deallocate(void* ptr) noexcept;

  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // rounded size -> block
  std::size_t cached_{0};
  std::map<const std::byte*, Slab> slabs_;         // by base address
  std::array<std::vector<Slab*>, 8> with_room_{};  // per class: slabs with a free slot
};

}  // namespace spillway
