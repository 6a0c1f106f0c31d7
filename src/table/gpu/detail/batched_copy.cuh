#pragma once
// Many copies in one kernel launch (internal): the split_and_pack payloads, the zeroing of the
// validity masks of packed partitions. One launch for any number of ranges: each block takes a
// fixed-size chunk of one range, found by binary search over the ranges' first chunks.

#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace spillway::gpu::detail {

/// dst[0, bytes) = src[0, bytes); src == nullptr: zeros.
struct CopyRange {
  std::byte* dst;
  const std::byte* src;
  std::size_t bytes;
};

/// Bits [src_bit, src_bit + bits) of the bitmap `src` into bits [0, bits) of `dst`; the rest of
/// dst's last byte is zeroed (dst gets mask_bytes(bits) bytes).
struct BitRange {
  std::uint8_t* dst;
  const std::uint8_t* src;
  std::size_t src_bit;
  std::size_t bits;
};

/// dst[i] = src[i] - src[0] + base for i < count (string offsets of a slice, rebased to
/// `base`: 0 for a part of its own, the characters before it in a concatenation).
struct RebaseRange {
  std::int32_t* dst;
  const std::int32_t* src;
  std::size_t count;
  std::int32_t base{0};
};

void copy_ranges(std::span<const CopyRange> ranges, BufferResource& br, Stream stream);
void copy_ranges(std::span<const BitRange> ranges, BufferResource& br, Stream stream);
void copy_ranges(std::span<const RebaseRange> ranges, BufferResource& br, Stream stream);

}  // namespace spillway::gpu::detail
