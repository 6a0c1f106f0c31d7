#include <spillway/memory/host_memory_resource.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <sys/mman.h>

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
constexpr std::size_t cache_threshold = 1 * MiB;

// The class is decided on the page-rounded size, so that two sizes with the same rounded size
// always have the same alignment (a cached block is freed with the alignment it was made with).
std::size_t alignment_for(std::size_t bytes) {
  return round_up(bytes, page) >= huge_threshold ? huge_page : page;
}
std::size_t rounded(std::size_t bytes) {
  return round_up(bytes, alignment_for(bytes));
}

void* system_allocate(std::size_t bytes) {
  // Sizes whose rounding would wrap (within a huge page of SIZE_MAX) are refused, not rounded
  // down to a small block that the caller would then overrun.
  SPILLWAY_EXPECTS(
      bytes <= std::numeric_limits<std::size_t>::max() / 2,
      "a host allocation of " + std::to_string(bytes) + " bytes is larger than any memory",
      out_of_memory);
  const std::size_t align = alignment_for(bytes);
  void* p = nullptr;
  try {
    p = ::operator new (rounded(bytes), std::align_val_t{align});
  } catch (const std::bad_alloc&) {
    SPILLWAY_FAIL(
        "the system refused a host allocation of " + format_bytes(static_cast<double>(bytes)),
        out_of_memory);
  }
  if (align == huge_page) (void)::madvise(p, rounded(bytes), MADV_HUGEPAGE);
  return p;
}
void system_free(void* p, std::size_t bytes) noexcept {
  ::operator delete (p, std::align_val_t{alignment_for(bytes)});
}
}  // namespace

HostMemoryResource::~HostMemoryResource() {
  trim_to(0);
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
  if (bytes >= cache_threshold) {
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
  const std::size_t size = rounded(bytes);
  if (bytes >= cache_threshold) {
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
