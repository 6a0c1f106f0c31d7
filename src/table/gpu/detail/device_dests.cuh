#pragma once
// The destinations of one GPU partitioning call (Dest, partition_tiling.cuh) on their way to
// the device. Included by partition_passes.cuh only.
// - DestStaging: written by the host straight into page-locked memory, then one asynchronous
//   copy (hash_partition, PartitionPlan).
// - packed_dests: partition_and_pack's, computed on the device from each payload's address, a
//   thread a partition applying the payload layout's rule (place_column).
// At 4096 partitions of 10 columns they are 40960 Dests (1.6 MB), made while the GPU waits for
// them. Built in a fresh std::vector by the host, copied into a second one with the dense
// `data` array and sent from that pageable memory, they cost ~0.5 ms a call
// (bench/NOTES.md, "The destinations").

#include <spillway/core/cuda.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "table/detail/pack_format.hpp"
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
    const std::size_t bytes = n * (sizeof(Dest) + sizeof(std::byte*));
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
    const std::size_t bytes = n_ * (sizeof(Dest) + sizeof(std::byte*));
    DeviceDests out;
    out.buffer = br_.allocate(MemoryType::DEVICE, bytes, stream_);
    if (bytes > 0) cuda::memcpy_async(out.buffer->data(), bytes_, bytes, stream_);
    out.dest = as<const Dest>(*out.buffer);
    out.data = reinterpret_cast<std::byte* const*>(  // NOLINT: right after the Dests
        static_cast<std::byte*>(out.buffer->data()) + n_ * sizeof(Dest));
    return out;
  }

 private:
  std::size_t n_;
  BufferResource& br_;
  Stream stream_;
  std::unique_ptr<Buffer> pinned_;
  std::unique_ptr<std::byte[]> pageable_;  // NOLINT: where no pinned memory was to be had
  std::byte* bytes_ = nullptr;
};

/// A column of a packed payload as packed_dests_kernel sees it: its shape, and for STRING the
/// global position of each partition's first character (parts + 1, on the device).
struct PackedColumn {
  spillway::detail::ColumnShape shape;
  const std::uint64_t* chars = nullptr;
};

/// Thread p: the destinations of partition p, whose `starts[p + 1] - starts[p]` rows are packed
/// at `bases[p]` (place_column's layout): dest[c * parts + p] and its `data` in `data`.
__global__ void packed_dests_kernel(const PackedColumn* cols, std::uint32_t ncols,
                                    const std::uint32_t* starts, std::byte* const* bases,
                                    std::uint32_t parts, Dest* dest, std::byte** data) {
  const std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p >= parts) return;
  const std::uint64_t rows = starts[p + 1] - starts[p];
  std::byte* base = bases[p];
  std::uint64_t at = 0;
  for (std::uint32_t c = 0; c < ncols; ++c) {
    const PackedColumn& col = cols[c];
    const bool str = col.shape.string;
    const auto s = spillway::detail::place_column(col.shape, rows,
                                                  str ? col.chars[p + 1] - col.chars[p] : 0, at);
    Dest d{base + s.data.offset, nullptr, nullptr, 0, 0};
    if (str) {
      d.offsets = reinterpret_cast<std::int32_t*>(base + s.offsets.offset);
      d.char_sub = col.chars[p];
    }
    if (col.shape.nullable) d.mask = reinterpret_cast<std::uint32_t*>(base + s.mask.offset);
    dest[c * parts + p] = d;
    data[c * parts + p] = d.data;
  }
}

/// The destinations of `bases.size()` packed payloads (partition p's at bases[p]) of a table
/// of columns `cols`, partition p of `starts[p + 1] - starts[p]` rows (`starts` on the device),
/// computed on `stream`.
inline DeviceDests packed_dests(const std::vector<PackedColumn>& cols, const std::uint32_t* starts,
                                const std::vector<std::byte*>& bases, BufferResource& br,
                                Stream stream) {
  const std::size_t parts = bases.size();
  const std::size_t n = cols.size() * parts;
  DeviceDests out;
  out.buffer = br.allocate(MemoryType::DEVICE, n * (sizeof(Dest) + sizeof(std::byte*)), stream);
  out.dest = as<const Dest>(*out.buffer);
  auto* data = reinterpret_cast<std::byte**>(  // NOLINT: right after the Dests
      static_cast<std::byte*>(out.buffer->data()) + n * sizeof(Dest));
  out.data = data;
  if (n == 0) return out;
  const auto d_cols = detail::to_device(cols, br, stream);
  const auto d_bases = detail::to_device(bases, br, stream);
  constexpr unsigned threads = 256;
  packed_dests_kernel<<<detail::blocks_for(parts, threads), threads, 0, detail::raw(stream)>>>(
      as<const PackedColumn>(*d_cols), static_cast<std::uint32_t>(cols.size()), starts,
      as<std::byte* const>(*d_bases), static_cast<std::uint32_t>(parts), as<Dest>(*out.buffer),
      data);
  SPILLWAY_CUDA_TRY(cudaGetLastError());
  return out;
}

}  // namespace

}  // namespace spillway::gpu
