#include <spillway/memory/pinned_memory_resource.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>

#include <chrono>
#include <iomanip>
#include <sstream>

namespace spillway {

PinnedMemoryResource::PinnedMemoryResource(std::size_t reserve_bytes) {
  SPILLWAY_EXPECTS(cuda::is_available(), "pinned host memory needs CUDA and a GPU");
  try {
    const auto t0 = std::chrono::steady_clock::now();
    pool_ = cuda::pool_create(/*pinned_host=*/true, reserve_bytes);
    reserve_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    alloc_stream_ = OwningStream();
  } catch (const cuda_error& e) {
    SPILLWAY_LOG(info, "pinned host pool unavailable, using cudaMallocHost: " << e.what());
    pool_ = nullptr;
  }
}

PinnedMemoryResource::~PinnedMemoryResource() {
  if (pool_ != nullptr) cuda::pool_destroy(pool_);
}

std::size_t PinnedMemoryResource::reserved_bytes() const {
  return pool_ != nullptr ? cuda::pool_reserved(pool_) : 0;
}

std::string PinnedMemoryResource::describe() const {
  if (pool_ == nullptr) return "cudaMallocHost";
  std::ostringstream s;
  s << "pinned host cudaMemPool (" << format_bytes(static_cast<double>(reserved_bytes()))
    << " mapped; made in " << std::fixed << std::setprecision(2) << reserve_seconds_ << " s)";
  return s.str();
}

void* PinnedMemoryResource::do_allocate(std::size_t bytes, Stream stream) {
  if (pool_ == nullptr) return cuda::malloc_pinned(bytes);
  // The host may touch the bytes as soon as this returns, so the stream-ordered allocation
  // must have happened. Made on the caller's stream, it waited for all the work queued there:
  // the progress thread allocating a landing buffer on the resource's stream waited for
  // the kernels of the rank's main thread, and transfers stopped meanwhile (tens of ms a run
  // of the spill sweep). The bytes are freed on the buffer's stream.
  (void)stream;
  void* p = cuda::pool_malloc(pool_, bytes, alloc_stream_);
  cuda::stream_synchronize(alloc_stream_);
  return p;
}

void PinnedMemoryResource::do_deallocate(void* ptr, std::size_t /*bytes*/, Stream stream) noexcept {
  if (pool_ == nullptr) {
    cuda::free_pinned(ptr);
  } else {
    cuda::pool_free(ptr, stream);
  }
}

}  // namespace spillway
