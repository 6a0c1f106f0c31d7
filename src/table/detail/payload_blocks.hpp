#pragma once
// How the packing functions place many small payloads (internal): runs of payloads under
// block_share_below bytes share blocks of up to block_bytes, each at an offset aligned to
// block_alignment from the block's start (as a payload allocated on its own starts). A
// partitioning into thousands of parts then costs a few allocations, and payloads placed one
// after another can travel as one message without being gathered (BufferResource::join).

#include <spillway/core/units.hpp>

#include <cstddef>
#include <vector>

namespace spillway::detail {

inline constexpr std::size_t block_share_below = std::size_t{4} << 20;
inline constexpr std::size_t block_bytes = std::size_t{16} << 20;
inline constexpr std::size_t block_alignment = 256;

/// Where a payload placed after one ending at `end` starts in its block.
constexpr std::size_t place_in_block(std::size_t end) {
  return round_up(end, block_alignment);
}

/// Splits payloads [0, n) of sizes size(i) into runs, in order: calls fn(first, last, bytes)
/// for each, where payloads [first, last) share a block of `bytes` (the last's end; the others
/// at block_alignment-aligned offsets, see place_in_block) when last - first > 1, and a run of
/// one is a payload on its own (one of block_share_below bytes or more, or one that has no
/// small neighbour). A block takes from its memory's limit footprint(bytes): a run is cut short
/// where that would be more than a sixteenth above its bytes (host blocks from 4 MiB take whole
/// 2 MiB huge pages), so that blocks cost hardly more memory than payloads of their own.
template <typename Size, typename Footprint, typename Fn>
void for_each_block(std::size_t n, Size&& size, Footprint&& footprint, Fn&& fn) {
  std::vector<std::size_t> ends;  // ends[k]: the run's bytes with its first k + 1 payloads
  for (std::size_t i = 0; i < n;) {
    ends.clear();
    std::size_t total = 0;
    for (std::size_t j = i; j < n && size(j) < block_share_below; ++j) {
      const std::size_t at = place_in_block(total);
      if (j > i && at + size(j) > block_bytes) break;
      total = at + size(j);
      ends.push_back(total);
    }
    if (ends.empty()) {  // a large payload
      fn(i, i + 1, size(i));
      ++i;
      continue;
    }
    std::size_t k = ends.size();
    while (k > 1 && footprint(ends[k - 1]) - ends[k - 1] > ends[k - 1] / 16) --k;
    fn(i, i + k, ends[k - 1]);
    i += k;
  }
}

}  // namespace spillway::detail
