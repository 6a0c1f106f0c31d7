#pragma once
// Where the GPU packing functions put their outputs (internal): on the GPU when it has room,
// else on the next tier its kernels can write, so that packing under a device limit completes
// whenever some tier has room, and no limit is exceeded.

#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace spillway::gpu::detail {

/// The payloads of one packing call. Each goes to DEVICE, spilling what is spillable there;
/// when even that leaves no room, to PINNED_HOST (kernels write it over PCIe), else to HOST
/// memory that is page-locked and mapped for the GPU for the duration of the call
/// (cudaHostRegister). Bytes that went to a host tier are counted as the statistic
/// `pack-into-host-memory`. finish() must be called once every kernel that writes the
/// payloads has been queued on `stream`: it waits for them only when HOST memory was mapped,
/// to undo the mapping. Not thread-safe (one call's helper).
class PackedOutputs {
 public:
  PackedOutputs(BufferResource& br, Stream stream) : br_{br}, stream_{stream} {}
  ~PackedOutputs();
  PackedOutputs(const PackedOutputs&) = delete;
  PackedOutputs& operator=(const PackedOutputs&) = delete;
  PackedOutputs(PackedOutputs&&) = delete;
  PackedOutputs& operator=(PackedOutputs&&) = delete;

  /// A payload of `bytes` that the GPU can write on `stream`.
  /// @throws spillway::out_of_memory naming every tier tried when none has room
  std::unique_ptr<Buffer> allocate(std::size_t bytes);
  /// Payloads of `sizes` bytes, in order. Runs of small ones (under 4 MiB) share a device block of
  /// up to 16 MiB when the GPU has room for it without spilling: each is then a view that
  /// holds its block, whose memory is freed with the last of them (spilling one alone frees
  /// nothing yet). A device allocation and its free cost ~2 us: a quarter of a
  /// partition_and_pack into 4096 parts.
  /// @throws spillway::out_of_memory as allocate()
  std::vector<std::unique_ptr<Buffer>> allocate_all(std::span<const std::size_t> sizes);
  /// allocate_all in two steps: place_all() allocates and returns where each payload begins,
  /// take() makes their Buffers (once). The addresses are all the kernels need, so the GPU can
  /// be given them first: the 4096 views of a partitioning cost ~0.2 ms of host time.
  std::vector<std::byte*> place_all(std::span<const std::size_t> sizes);
  std::vector<std::unique_ptr<Buffer>> take();
  /// Waits for the kernels queued on `stream` if HOST memory was mapped, then unmaps it.
  void finish();

 private:
  /// A payload of place_all(): a buffer of its own, or `bytes` at `at` in blocks_[block].
  struct Placed {
    std::unique_ptr<Buffer> own;
    std::size_t block = 0;
    std::size_t at = 0;
    std::size_t bytes = 0;
  };

  BufferResource& br_;
  Stream stream_;
  std::vector<void*> registered_;
  std::vector<std::shared_ptr<Buffer>> blocks_;
  std::vector<Placed> placed_;
};

}  // namespace spillway::gpu::detail
