#include <spillway/memory/device_memory_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

namespace spillway {

DeviceMemoryResource::DeviceMemoryResource(DeviceAllocator kind, std::size_t pool_size)
    : kind_{kind}, pool_size_{pool_size} {
  SPILLWAY_EXPECTS(cuda::is_available(), "device memory needs CUDA and a GPU");
  if (kind_ == DeviceAllocator::pool) pool_ = cuda::pool_create(/*pinned_host=*/false, pool_size);
}

DeviceMemoryResource::~DeviceMemoryResource() {
  if (pool_ != nullptr) cuda::pool_destroy(pool_);
}

std::string DeviceMemoryResource::describe() const {
  switch (kind_) {
    case DeviceAllocator::cuda:
      return "cudaMalloc";
    case DeviceAllocator::pool:
      return "cudaMemPool (" + format_bytes(static_cast<double>(pool_size_)) + " up front)";
    case DeviceAllocator::async:
      break;
  }
  return "cudaMallocAsync";
}

void* DeviceMemoryResource::do_allocate(std::size_t bytes, Stream stream) {
  switch (kind_) {
    case DeviceAllocator::cuda:
      return cuda::malloc_device(bytes);
    case DeviceAllocator::pool:
      return cuda::pool_malloc(pool_, bytes, stream);
    case DeviceAllocator::async:
      break;
  }
  return cuda::malloc_async(bytes, stream);
}

void DeviceMemoryResource::do_deallocate(void* ptr, std::size_t /*bytes*/, Stream stream) noexcept {
  switch (kind_) {
    case DeviceAllocator::cuda:
      cuda::free_device(ptr);
      return;
    case DeviceAllocator::pool:
      cuda::pool_free(ptr, stream);
      return;
    case DeviceAllocator::async:
      break;
  }
  cuda::free_async(ptr, stream);
}

}  // namespace spillway
