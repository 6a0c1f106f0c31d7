#include <spillway/memory/host_memory_resource.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <string>

namespace spillway {

namespace {
// Page alignment keeps host buffers usable for O_DIRECT and cudaHostRegister. Large buffers are
// aligned to 2 MiB and asked for transparent huge pages: fresh memory is faulted in 512 times
// less often.
constexpr std::size_t page = 4096;
constexpr std::size_t huge_page = 2 * MiB;
constexpr std::size_t huge_threshold = 4 * MiB;
constexpr std::size_t class_threshold = 1 * MiB;
constexpr std::size_t smallest_class = 16;
constexpr std::size_t largest_class = HostMemoryResource::largest_slab_size;
constexpr std::size_t slab_bytes = 64 * KiB;

/// The size class of a small allocation: 0 for up to 16 bytes, 1 for 17-32, ... 7 for 2048.
std::size_t class_of(std::size_t bytes) {
  std::size_t c = 0;
  for (std::size_t size = smallest_class; size < bytes; size *= 2) ++c;
  return c;
}

// The class is decided on the page-rounded size, so that two sizes with the same rounded size
// always have the same alignment (a cached block is freed with the alignment it was made with).
std::size_t alignment_for(std::size_t bytes) {
  return round_up(bytes, page) >= huge_threshold ? huge_page : page;
}
/// Blocks under class_threshold are rounded up to one of 16 sizes per doubling (in pages:
/// 1-32, then 34, 36, ... 64, 68, 72, ...), so that freed blocks of the usual chunk sizes
/// find takers in the cache (an unmap costs a TLB shootdown on every core: a shuffle of 8192
/// chunks of ~10 KiB spent over half its time in munmap). At most 1/16 more than whole pages
/// (4 or 8 per doubling took partition_and_pack's outputs past 1.1 times the input).
std::size_t size_class(std::size_t bytes) {
  const std::size_t pages = round_up(bytes, page) / page;
  if (pages <= 32) return pages * page;
  const int shift = std::bit_width(pages - 1) - 5;
  return round_up(pages, std::size_t{1} << shift) * page;
}
std::size_t rounded(std::size_t bytes) {
  if (bytes < class_threshold) return size_class(bytes);
  return round_up(bytes, alignment_for(bytes));
}

// Blocks beyond the slabs are mapped directly, each its own pages: a heap block aligned to a
// page has a header in the page before it, which doubled what a 4 KiB buffer took.
void* map_aligned(std::size_t size, std::size_t align) {
  // Over-map by the alignment and unmap the ends: an aligned block of exactly `size`.
  const std::size_t span = size + (align > page ? align : 0);
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t start = (at + align - 1) / align * align;
  if (start > at) ::munmap(p, start - at);
  if (const std::uintptr_t end = at + span; end > start + size) {
    ::munmap(reinterpret_cast<void*>(start + size), end - start - size);
  }
  return reinterpret_cast<void*>(start);
}

// Under AddressSanitizer every block comes from the C++ heap (aligned as it would be), where it
// checks overflows and uses after free: slabs and mappings are invisible to it. The charges
// stay the same. (Not under ThreadSanitizer, which checks the slabs' locking.)
#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

void* system_allocate(std::size_t bytes) {
  // Sizes whose rounding would wrap (within a huge page of SIZE_MAX) are refused, not rounded
  // down to a small block that the caller would then overrun.
  SPILLWAY_EXPECTS(
      bytes <= std::numeric_limits<std::size_t>::max() / 2,
      "a host allocation of " + std::to_string(bytes) + " bytes is larger than any memory",
      out_of_memory);
  const std::size_t align = alignment_for(bytes);
  void* p = sanitized ? ::operator new (rounded(bytes), std::align_val_t{align}, std::nothrow)
                      : map_aligned(rounded(bytes), align);
  if (p == nullptr) {
    SPILLWAY_FAIL("the system refused a host allocation of " +
                      format_bytes(static_cast<double>(bytes)) +
                      " (out of memory, or of mappings: vm.max_map_count)",
                  out_of_memory);
  }
  if (align == huge_page) (void)::madvise(p, rounded(bytes), MADV_HUGEPAGE);
  return p;
}
void system_free(void* p, std::size_t bytes) noexcept {
  if constexpr (sanitized) {
    ::operator delete (p, std::align_val_t{alignment_for(bytes)});
  } else {
    ::munmap(p, rounded(bytes));
  }
}
}  // namespace

HostMemoryResource::~HostMemoryResource() {
  trim_to(0);
  for (auto& [base, slab] : slabs_) ::munmap(slab.base, slab_bytes);
}

std::size_t HostMemoryResource::footprint(std::size_t bytes) const noexcept {
  if (bytes == 0) return 0;
  if (bytes <= largest_class) return smallest_class << class_of(bytes);
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) return bytes;  // refused anyway
  return rounded(bytes);
}

void* HostMemoryResource::slab_allocate(std::size_t bytes) {
  const std::size_t c = class_of(bytes);
  std::lock_guard lock(mutex_);
  auto& room = with_room_[c];
  if (room.empty()) {
    void* base =
        ::mmap(nullptr, slab_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      SPILLWAY_FAIL("the system refused a 64 KiB slab for small host buffers", out_of_memory);
    }
    auto* b = static_cast<std::byte*>(base);
    try {
      Slab& slab = slabs_[b];
      slab = Slab{b, smallest_class << c, 0, 0, nullptr};
      room.push_back(&slab);
    } catch (...) {
      slabs_.erase(b);
      ::munmap(base, slab_bytes);
      throw;
    }
  }
  Slab& slab = *room.back();
  void* p = nullptr;
  if (slab.free != nullptr) {
    p = slab.free;
    std::memcpy(&slab.free, p, sizeof(void*));
  } else {
    p = slab.base + slab.bump;
    slab.bump += slab.slot;
  }
  ++slab.live;
  if (slab.free == nullptr && slab.bump + slab.slot > slab_bytes) room.pop_back();  // full
  return p;
}

void HostMemoryResource::slab_deallocate(void* ptr) noexcept {
  const auto* at = static_cast<const std::byte*>(ptr);
  std::lock_guard lock(mutex_);
  auto it = std::prev(slabs_.upper_bound(at));  // the slab whose base is at or before ptr
  Slab& slab = it->second;
  auto& room = with_room_[class_of(slab.slot)];
  const bool was_full = slab.free == nullptr && slab.bump + slab.slot > slab_bytes;
  if (--slab.live == 0) {  // empty: back to the system
    if (!was_full) std::erase(room, &slab);
    ::munmap(slab.base, slab_bytes);
    slabs_.erase(it);
    return;
  }
  std::memcpy(ptr, &slab.free, sizeof(void*));
  slab.free = ptr;
  if (was_full) {
    try {
      room.push_back(&slab);
    } catch (...) {
      // No memory for the list: the slot stays free until the slab's next free.
    }
  }
}

std::string HostMemoryResource::describe() const {
  return "aligned host heap, cache of freed blocks up to " +
         format_bytes(static_cast<double>(capacity_));
}

std::size_t HostMemoryResource::cached() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

void HostMemoryResource::trim_to(std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  while (cached_ > bytes && !free_.empty()) {
    auto it = std::prev(free_.end());  // largest first: fewest frees
    system_free(it->second, it->first);
    cached_ -= it->first;
    free_.erase(it);
  }
}

void* HostMemoryResource::do_allocate(std::size_t bytes, Stream /*stream*/) {
  if (bytes <= largest_class) {
    if constexpr (sanitized) return ::operator new (bytes, std::align_val_t{smallest_class});
    return slab_allocate(bytes);
  }
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(rounded(bytes));
    if (it != free_.end()) {
      void* p = it->second;
      cached_ -= it->first;
      free_.erase(it);
      return p;
    }
  }
  return system_allocate(bytes);
}

void HostMemoryResource::do_deallocate(void* ptr, std::size_t bytes, Stream /*stream*/) noexcept {
  if (bytes <= largest_class) {
    if constexpr (sanitized) {
      ::operator delete (ptr, std::align_val_t{smallest_class});
    } else {
      slab_deallocate(ptr);
    }
    return;
  }
  const std::size_t size = rounded(bytes);
  {
    std::lock_guard lock(mutex_);
    if (cached_ + size <= capacity_) {
      try {
        free_.emplace(size, ptr);
        cached_ += size;
        return;
      } catch (...) {
        // No memory for the map node: free the block instead.
      }
    }
  }
  system_free(ptr, bytes);
}

}  // namespace spillway
