#pragma once
/// @file pinned_memory_resource.hpp
/// Page-locked host memory from a CUDA memory pool.

#include <spillway/core/stream.hpp>
#include <spillway/memory/memory_resource.hpp>

#include <cstddef>

namespace spillway {

/// Pinned host memory from a stream-ordered cudaMemPool of location type Host (reused between
/// allocations, no cudaHostAlloc per buffer). Where the driver cannot make such a pool it falls
/// back to cudaMallocHost per allocation; `describe()` says which. Thread-safe. An allocation
/// is done when allocate() returns (the host may touch the bytes): it is made on a stream of
/// the resource's own and waits for nothing queued elsewhere; the pool reuses memory freed on
/// other streams only once those frees have run (else it grows), never by making the
/// allocation wait for them.
class PinnedMemoryResource final : public MemoryResource {
 public:
  /// @param reserve_bytes memory mapped into the pool up front (0: grow on demand).
  /// @throws spillway::cuda_error, or spillway::logic_error without CUDA.
  explicit PinnedMemoryResource(std::size_t reserve_bytes = 0);
  ~PinnedMemoryResource() override;
  PinnedMemoryResource(const PinnedMemoryResource&) = delete;
  PinnedMemoryResource& operator=(const PinnedMemoryResource&) = delete;
  PinnedMemoryResource(PinnedMemoryResource&&) = delete;
  PinnedMemoryResource& operator=(PinnedMemoryResource&&) = delete;

  [[nodiscard]] MemoryType mem_type() const noexcept override { return MemoryType::PINNED_HOST; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] bool uses_pool() const noexcept { return pool_ != nullptr; }
  /// Bytes the pool holds from the system (in use or kept for reuse); 0 without a pool.
  [[nodiscard]] std::size_t reserved_bytes() const;

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, Stream stream) noexcept override;

  void* pool_{nullptr};
  /// Where the pool allocates: a stream of the resource's own that holds nothing else, so
  /// that an allocation waits for itself alone, not for the caller's queued work.
  OwningStream alloc_stream_{nullptr};
  double reserve_seconds_{0};  // making the pool, with its reserve mapped
};

}  // namespace spillway
