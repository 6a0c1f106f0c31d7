#pragma once
// The tiling of hash partitioning on the GPU and what its passes share (constants, the
// destinations), included by count_kernels.cuh and place_kernels.cuh, which partition.cu (the
// host drivers and the public calls, whose first lines describe the passes) includes.

#include <spillway/table/gpu.hpp>

#include "table/gpu/detail/device_column.cuh"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

namespace spillway::gpu {

namespace {  // (one translation unit includes it: partition.cu)

using detail::as;
using detail::DeviceColumn;
using detail::raw;

constexpr unsigned block_threads = 256;
constexpr unsigned full_mask = 0xFFFFFFFFU;
constexpr std::uint32_t no_partition = std::numeric_limits<std::uint32_t>::max();
/// The place pass sorts sub-tiles of block_threads x place_items rows.
constexpr unsigned place_items = 8;
constexpr std::size_t sub_rows = std::size_t{block_threads} * place_items;
/// Shared memory for the fixed-width values of a group of columns of one sub-tile (3 int32
/// columns); more would take the block past 48 KiB of static shared memory, and two stages
/// (loading one group while placing another) measured slower: 1.28-1.38 ms against 1.09.
constexpr std::size_t stage_bytes = 24 * 1024;
/// The place pass's blocks per multiprocessor: lets ptxas take the 80 registers it needs
/// without spilling (left alone it chose 64 and spilled; capped at 4 blocks it was 5% slower).
constexpr unsigned place_blocks_per_sm = 3;
/// Partitions up to which the count pass sums a warp's rows per partition (one warp sum and
/// one atomic each) instead of grouping equal partitions with __match_any_sync.
constexpr std::uint32_t few_partitions = 16;
/// Partitions up to which the place pass ranks rows within warps (split_place_kernel) instead
/// of sorting sub-tiles (place_kernel): faster at 2 partitions, slower from 4
/// (docs/decisions/gpu-partitioning.md).
constexpr std::uint32_t split_partitions = 2;
/// The same for PartitionPlan, which places a few columns per call: the sort pass repeats its
/// per-row work (the sort) for each call, the warp split only its rank computation.
constexpr std::uint32_t plan_split_partitions = 4;
/// Partitions up to which the count pass keeps its counters, and the place pass its cursors,
/// in shared memory (16 KiB).
constexpr std::size_t shared_count_partitions = 4096;
/// Partitions from which pass 3 finds each row's place first and then scatters the columns
/// one at a time (scatter_kernel) instead of writing sorted sub-tiles of every column: the sort
/// wins at 256 partitions and loses from 1024.
constexpr std::uint32_t wide_partitions = 512;
/// The wide pass 3 finds the places of up to this many chunks of rows one after another (each
/// chunk's columns scattered before the next), so that their scratch is a fraction of the rows:
/// as few as keep its scratch, the partition ids and the tiles' counts within this share of the
/// table's bytes (the outputs and they then stay under 1.1x the input; PlaceWide).
constexpr std::size_t wide_chunks = 4;
constexpr double wide_scratch_share = 0.09;
/// Rows per partition in a tile, on average: the counts are one word per partition and tile,
/// so 8 keeps them, and the scan's passes over them, at about half a byte per row (16 measured
/// no faster).
constexpr std::size_t tile_partition_rows = 8;
/// With wide_partitions to wide_tile_partitions partitions, 32 or 16 rows a partition where a
/// tile's values of the widest fixed-width column then take at most wide_tile_bytes: the staged
/// scatter then writes runs of 32 or 16 rows of a partition on average instead of 8, and the
/// tiles' counts (and the peak extra memory) shrink (docs/decisions/gpu-partitioning.md).
constexpr std::size_t wide_tile_partitions = 2048;
constexpr std::size_t wide_tile_bytes = std::size_t{128} << 10;
/// A tile split over a cluster of two blocks (Tiling::split, on GPUs with thread block clusters)
/// holds twice the values: each block stages half the tile's places in its shared memory and
/// the other block's rows reach them through distributed shared memory. Then up to
/// shared_count_partitions partitions (4096: 16 rows a partition of 4-byte columns, not 8)
/// and twice wide_tile_bytes. At most max_staged_tile_rows rows in all.
constexpr unsigned max_split = 2;
/// A row's rank in its tile's partitioned order (place_kernel for staged_scatter_kernel): tiles
/// are staged only with their counts in shared memory (Tiling::shared_counts); a 2-byte rank
/// counts up to 65536 rows.
using TileRank = std::uint16_t;
constexpr std::size_t max_staged_tile_rows = std::size_t{std::numeric_limits<TileRank>::max()} + 1;
/// Rows per partition in a tile of a partitioning into `parts` of a table whose widest
/// fixed-width column has `width` bytes, staged by `split` blocks.
constexpr std::size_t tile_rows_per_partition(std::size_t parts, std::size_t width,
                                              unsigned split = 1) {
  const std::size_t most = split > 1 ? shared_count_partitions : wide_tile_partitions;
  if (parts < wide_partitions || parts > most) return tile_partition_rows;
  for (std::size_t rows = 32; rows > tile_partition_rows; rows /= 2) {
    if (parts * rows <= max_staged_tile_rows &&
        parts * rows * std::max<std::size_t>(width, 1) <= split * wide_tile_bytes) {
      return rows;
    }
  }
  return tile_partition_rows;
}

/// Where partition p's rows of column c go (dest[c * P + p]).
struct Dest {
  std::byte* data;         // first row (fixed width) or character 0 of the partition
  std::int32_t* offsets;   // the partition's offsets (STRING): entry i + 1 is row i's end
  std::uint32_t* mask;     // the bitmap holding the partition's validity bits, as words
  std::uint64_t mask_bit;  // bit of the partition's first row in `mask`
  std::uint64_t char_sub;  // subtracted from global character positions (STRING)
};

/// Each block of the count and place passes owns a tile of consecutive rows. The counts (then
/// the cursors: where each tile's next row of each partition goes, relative to the
/// partition's start) are one word per tile and partition, laid out tile by tile
/// (at(t, p) = t * parts + p): each block reads and writes its own as one run.
struct Tiling {
  std::size_t rows;
  std::uint32_t parts;
  int bits;               // radix sort bits: enough for parts - 1
  unsigned split;         // blocks (a cluster) that stage a tile in staged_scatter_kernel
  std::size_t tile_rows;  // a multiple of sub_rows
  std::size_t tiles;

  /// `r` rows into `p` partitions, the widest fixed-width column `width` bytes, each tile
  /// staged by `s` blocks.
  Tiling(std::size_t r, std::size_t p, std::size_t width, unsigned s = 1)
      : rows{r},
        parts{static_cast<std::uint32_t>(p)},
        bits{std::max(1, static_cast<int>(std::bit_width(p - 1)))},
        split{s},
        tile_rows{std::max<std::size_t>(
                      1, (tile_rows_per_partition(p, width, s) * p + sub_rows - 1) / sub_rows) *
                  sub_rows},
        tiles{(r + tile_rows - 1) / tile_rows} {}
  /// The places of a tile that one block of staged_scatter_kernel stages.
  [[nodiscard]] __host__ __device__ std::size_t block_rows() const { return tile_rows / split; }
  [[nodiscard]] __host__ __device__ bool shared_counts() const {
    return parts <= shared_count_partitions;
  }
  [[nodiscard]] __host__ __device__ std::size_t at(std::size_t t, std::uint32_t p) const {
    return t * parts + p;
  }
  [[nodiscard]] std::size_t counts() const { return tiles * parts; }
};

/// Sets the validity bit of the row at place `at` of partition destination `d`.
__device__ inline void set_valid(const Dest& d, std::uint32_t at) {
  const std::uint64_t bit = d.mask_bit + at;
  atomicOr(d.mask + bit / 32, 1U << (bit % 32));
}

}  // namespace

}  // namespace spillway::gpu
