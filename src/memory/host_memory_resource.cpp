#include <spillway/memory/host_memory_resource.hpp>

#include <spillway/core/units.hpp>

#include <new>

namespace spillway {

namespace {
// Page alignment keeps host buffers usable for O_DIRECT and for cudaHostRegister later.
constexpr std::size_t host_alignment = 4096;
}  // namespace

void* HostMemoryResource::do_allocate(std::size_t bytes, Stream /*stream*/) {
  return ::operator new(round_up(bytes, host_alignment), std::align_val_t{host_alignment});
}

void HostMemoryResource::do_deallocate(void* ptr, std::size_t /*bytes*/,
                                       Stream /*stream*/) noexcept {
  ::operator delete(ptr, std::align_val_t{host_alignment});
}

}  // namespace spillway
