#pragma once
// The destinations of one GPU partitioning call (Dest, partition_tiling.cuh) on their way to
// the device: written by the host straight into page-locked memory, then one asynchronous
// copy. Included by partition_passes.cuh only.
//
// At 4096 partitions of 10 columns they are 40960 Dests (1.6 MB), written while the GPU waits
// for them. Built in a fresh std::vector, copied into a second one with the dense `data` array
// and sent from that pageable memory, they cost two passes over freshly faulted pages and a
// copy the host waits for (docs/decisions/gpu-partitioning.md).

#include <spillway/core/cuda.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "table/gpu/detail/partition_tiling.cuh"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace spillway::gpu {

namespace {  // (see partition_tiling.cuh)

/// The destinations on the device: dest[c * parts + p] (Dest), and each one's `data` alone in
/// a dense array right after them, of which the place pass copies a group of columns' worth
/// into shared memory per sub-tile (8 bytes each, not a sector of the Dests' 40-byte stride).
struct DeviceDests {
  std::unique_ptr<Buffer> buffer;
  const Dest* dest = nullptr;
  std::byte* const* data = nullptr;
};

/// `n` destinations for the host to fill (dests()), then upload() them on `stream`. From
/// pinned_from bytes they live in PINNED_HOST memory when that tier has room without spilling
/// (its pool frees a buffer in stream order, so the staging outlives the copy), else in
/// pageable memory.
class DestStaging {
 public:
  /// Below this, pageable memory: a few partitions' destinations are not worth a share of a
  /// tier with a limit.
  static constexpr std::size_t pinned_from = std::size_t{64} << 10;

  DestStaging(std::size_t n, BufferResource& br, Stream stream) : n_{n}, br_{br}, stream_{stream} {
    const std::size_t bytes = size();
    if (bytes >= pinned_from && br.is_live(MemoryType::PINNED_HOST)) {
      if (auto res = br.try_reserve(MemoryType::PINNED_HOST, bytes)) {
        pinned_ = br.allocate(*res, bytes, stream);
        bytes_ = pinned_->data();
      }
    }
    if (bytes_ == nullptr) {
      pageable_ = std::make_unique_for_overwrite<std::byte[]>(bytes);  // NOLINT
      bytes_ = pageable_.get();
    }
  }

  /// Where the host writes dest[c * parts + p]; every entry must be written before upload().
  [[nodiscard]] std::span<Dest> dests() noexcept {
    return {reinterpret_cast<Dest*>(bytes_), n_};  // NOLINT: the staging's first n Dests
  }

  /// Adds the dense `data` array and copies both to a device buffer (queued on the stream).
  DeviceDests upload() {
    const std::span<const Dest> d = dests();
    auto* data = reinterpret_cast<std::byte**>(bytes_ + n_ * sizeof(Dest));  // NOLINT
    for (std::size_t i = 0; i < n_; ++i) data[i] = d[i].data;
    const std::size_t bytes = size();
    DeviceDests out;
    out.buffer = br_.allocate(MemoryType::DEVICE, bytes, stream_);
    if (bytes > 0) cuda::memcpy_async(out.buffer->data(), bytes_, bytes, stream_);
    out.dest = as<const Dest>(*out.buffer);
    out.data = reinterpret_cast<std::byte* const*>(  // NOLINT: right after the Dests
        static_cast<std::byte*>(out.buffer->data()) + n_ * sizeof(Dest));
    return out;
  }

 private:
  /// The staging's bytes: the Dests, then the `data` array.
  [[nodiscard]] std::size_t size() const noexcept {
    return n_ * (sizeof(Dest) + sizeof(std::byte*));
  }

  std::size_t n_;
  BufferResource& br_;
  Stream stream_;
  std::unique_ptr<Buffer> pinned_;
  std::unique_ptr<std::byte[]> pageable_;  // NOLINT: where no pinned memory was to be had
  std::byte* bytes_ = nullptr;
};

}  // namespace

}  // namespace spillway::gpu
