#include <spillway/memory/host_memory_resource.hpp>

#include <spillway/core/units.hpp>

#include <sys/mman.h>

#include <new>

namespace spillway {

namespace {
// Page alignment keeps host buffers usable for O_DIRECT and cudaHostRegister. Large buffers are
// aligned to 2 MiB and asked for transparent huge pages: fresh memory is faulted in 512 times
// less often, which is most of the cost of landing a spilled buffer back in new host memory.
constexpr std::size_t page = 4096;
constexpr std::size_t huge_page = 2 * MiB;
constexpr std::size_t huge_threshold = 4 * MiB;

std::size_t alignment_for(std::size_t bytes) {
  return bytes >= huge_threshold ? huge_page : page;
}
}  // namespace

void* HostMemoryResource::do_allocate(std::size_t bytes, Stream /*stream*/) {
  const std::size_t align = alignment_for(bytes);
  void* p = ::operator new (round_up(bytes, align), std::align_val_t{align});
  if (align == huge_page) (void)::madvise(p, round_up(bytes, align), MADV_HUGEPAGE);
  return p;
}

void HostMemoryResource::do_deallocate(void* ptr, std::size_t bytes, Stream /*stream*/) noexcept {
  ::operator delete (ptr, std::align_val_t{alignment_for(bytes)});
}

}  // namespace spillway
