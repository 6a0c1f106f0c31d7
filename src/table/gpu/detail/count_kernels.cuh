#pragma once
// Pass 1 of hash partitioning on the GPU (see partition.cu): each row's partition and each
// tile's rows per partition, then the scan that turns the counts into cursors.

#include "table/gpu/detail/partition_tiling.cuh"

#include <cub/block/block_scan.cuh>

namespace spillway::gpu {

namespace {  // (one translation unit includes it: partition.cu)

__global__ void hash_kernel(const DeviceColumn* keys, std::uint32_t nkeys, std::uint32_t seed,
                            std::size_t rows, std::uint32_t* out) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row < rows) out[row] = detail::hash_row(keys, nkeys, row, seed);
}

/// Adds a thread's rows' partitions `p` (no_partition for none) to the tile's counts: in shared
/// memory when tl.shared_counts(), else straight into `hist`. Every lane of the warp calls it.
template <unsigned Items>
__device__ void add_counts(const std::uint32_t (&p)[Items], const Tiling& tl, std::size_t t,
                           std::uint32_t* counts, std::uint32_t* hist) {
  const unsigned lane = threadIdx.x % 32;
  if (tl.parts <= few_partitions) {  // one warp sum and one atomic per partition
    for (std::uint32_t q = 0; q < tl.parts; ++q) {
      unsigned mine = 0;
#pragma unroll
      for (unsigned i = 0; i < Items; ++i) mine += p[i] == q ? 1U : 0U;
      const unsigned in_q = __reduce_add_sync(full_mask, mine);
      if (in_q != 0 && lane == 0) atomicAdd(&counts[q], in_q);
    }
    return;
  }
  if (tl.shared_counts()) {  // one shared-memory atomic per row: __match_any_sync per row
                             // made the pass compute-bound (232 us at 64 partitions against
                             // 53 us for the warp sums at 2)
#pragma unroll
    for (unsigned i = 0; i < Items; ++i) {
      if (p[i] != no_partition) atomicAdd(&counts[p[i]], 1U);
    }
    return;
  }
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) {  // one atomic per partition and warp, not per row
    const unsigned peers = __match_any_sync(full_mask, p[i]);
    if (p[i] != no_partition && lane == static_cast<unsigned>(__ffs(peers) - 1)) {
      atomicAdd(&hist[tl.at(t, p[i])], static_cast<std::uint32_t>(__popc(peers)));
    }
  }
}

__device__ inline std::uint32_t partition_of(std::uint32_t h, const Tiling& tl, bool pow2) {
  return pow2 ? (h & (tl.parts - 1)) : (h % tl.parts);
}

__device__ inline void start_counts(const Tiling& tl, std::uint32_t* counts) {
  if (!tl.shared_counts()) return;
  for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) counts[p] = 0;
  __syncthreads();
}

__device__ inline void finish_counts(const Tiling& tl, std::size_t t, const std::uint32_t* counts,
                                     std::uint32_t* hist) {
  if (!tl.shared_counts()) return;
  __syncthreads();
  for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) hist[tl.at(t, p)] = counts[p];
}

/// Pass 1: partitions and per-tile counts, any key columns. `hist` is zeroed.
template <typename PidT>
__global__ void __launch_bounds__(block_threads)
    count_kernel(const DeviceColumn* keys, std::uint32_t nkeys, std::uint32_t seed, Tiling tl,
                 PidT* pid, std::uint32_t* hist) {
  extern __shared__ std::uint32_t counts[];
  const std::size_t t = blockIdx.x;
  start_counts(tl, counts);
  const bool pow2 = (tl.parts & (tl.parts - 1)) == 0;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  // Every lane runs the same number of rounds, for the warp-wide counting.
  for (std::size_t base = t * tl.tile_rows; base < end; base += blockDim.x) {
    const std::size_t row = base + threadIdx.x;
    std::uint32_t p[1] = {no_partition};
    if (row < end) {
      p[0] = partition_of(detail::hash_row(keys, nkeys, row, seed), tl, pow2);
      pid[row] = static_cast<PidT>(p[0]);
    }
    add_counts(p, tl, t, counts, hist);
  }
  finish_counts(tl, t, counts, hist);
}

/// Rows a thread of count_fixed_kernel hashes per round.
constexpr unsigned count_items = 8;

/// Pass 1 for the usual key, one column of 4- or 8-byte values without nulls, 16-byte aligned:
/// each thread loads count_items consecutive keys in 16-byte vectors, hashes them exactly as
/// hash_row does, and stores their partitions in 16-byte vectors. The generic kernel spends
/// ~150 instructions per row on the per-row type dispatch and column lookups; this one a few
/// dozen.
template <typename T, typename PidT>
__global__ void __launch_bounds__(block_threads)
    count_fixed_kernel(const T* __restrict__ key, std::uint32_t seed, Tiling tl,
                       PidT* __restrict__ pid, std::uint32_t* hist) {
  static_assert(count_items * sizeof(T) % 16 == 0 && count_items * sizeof(PidT) % 16 == 0);
  extern __shared__ std::uint32_t counts[];
  const std::size_t t = blockIdx.x;
  start_counts(tl, counts);
  const bool pow2 = (tl.parts & (tl.parts - 1)) == 0;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  for (std::size_t base = t * tl.tile_rows; base < end; base += block_threads * count_items) {
    const std::size_t first = base + threadIdx.x * std::size_t{count_items};
    std::uint32_t p[count_items];
    if (first + count_items <= end) {
      T v[count_items];
#pragma unroll
      for (unsigned i = 0; i < count_items * sizeof(T) / 16; ++i) {
        reinterpret_cast<uint4*>(v)[i] = reinterpret_cast<const uint4*>(key + first)[i];
      }
      PidT out[count_items];
#pragma unroll
      for (unsigned i = 0; i < count_items; ++i) {
        p[i] = partition_of(hash_combine(0U, hash_value(v[i], seed)), tl, pow2);
        out[i] = static_cast<PidT>(p[i]);
      }
#pragma unroll
      for (unsigned i = 0; i < count_items * sizeof(PidT) / 16; ++i) {
        reinterpret_cast<uint4*>(pid + first)[i] = reinterpret_cast<const uint4*>(out)[i];
      }
    } else {  // the tile's last, partial group
#pragma unroll
      for (unsigned i = 0; i < count_items; ++i) {
        p[i] = no_partition;
        if (first + i < end) {
          p[i] = partition_of(hash_combine(0U, hash_value(key[first + i], seed)), tl, pow2);
          pid[first + i] = static_cast<PidT>(p[i]);
        }
      }
    }
    add_counts(p, tl, t, counts, hist);
  }
  finish_counts(tl, t, counts, hist);
}

/// The scan of the counts works on chunks of consecutive tiles: its first and last steps give
/// each thread one partition of one chunk, walking down the chunk's tiles, so that every read
/// and write of the counts is a run over consecutive partitions. scan_threads_wanted threads
/// keep the GPU's memory busy; a chunk takes at least scan_min_tiles tiles.
constexpr std::size_t scan_threads_wanted = std::size_t{1} << 18;
constexpr std::size_t scan_min_tiles = 4;

/// Tiles per chunk of the scan (a single thread walking a long chunk is latency-bound: one
/// block per partition scanning 512 chunks took 98 us at 64 partitions, 16384 tiles).
inline std::size_t scan_tiles(const Tiling& tl) {
  const std::size_t want_chunks = std::max<std::size_t>(1, scan_threads_wanted / tl.parts);
  constexpr std::size_t max_chunks = 65535;  // the grid's y dimension
  return std::max({scan_min_tiles, (tl.tiles + want_chunks - 1) / want_chunks,
                   (tl.tiles + max_chunks - 1) / max_chunks});
}

/// The scan's threads per block for the chunk steps: the partitions, in whole warps, up to
/// block_threads (with two partitions, 256-thread blocks would leave 254 threads idle).
inline unsigned scan_block(const Tiling& tl) {
  return static_cast<unsigned>(
      std::min<std::size_t>(block_threads, (std::size_t{tl.parts} + 31) / 32 * 32));
}

/// Scan, step 1: sums[chunk * parts + p] = chunk's rows of partition p (chunks of `per` tiles).
__global__ void chunk_sums_kernel(const std::uint32_t* counts, Tiling tl, std::size_t per,
                                  std::uint32_t* sums) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= tl.parts) return;
  const std::size_t first = blockIdx.y * per;
  const std::size_t last = min(tl.tiles, first + per);
  std::uint32_t sum = 0;
  for (std::size_t t = first; t < last; ++t) sum += counts[tl.at(t, p)];
  sums[blockIdx.y * std::size_t{tl.parts} + p] = sum;
}

/// Scan, step 2, one block per partition p (blockIdx.x): the chunks' sums of p become the
/// rows of p in the chunks before each; totals[p] = the partition's rows. Block parts (one
/// more) sets totals[parts] = 0, so that the exclusive sum of totals is the partition starts
/// with the row count last.
__global__ void __launch_bounds__(block_threads)
    chunk_scan_kernel(std::uint32_t* sums, Tiling tl, std::size_t chunks, std::uint32_t* totals) {
  using Scan = cub::BlockScan<std::uint32_t, block_threads>;
  __shared__ typename Scan::TempStorage temp;
  const std::uint32_t p = blockIdx.x;
  if (p == tl.parts) {
    if (threadIdx.x == 0) totals[p] = 0;
    return;
  }
  std::uint32_t run = 0;
  for (std::size_t base = 0; base < chunks; base += block_threads) {
    const std::size_t c = base + threadIdx.x;
    const std::uint32_t v = c < chunks ? sums[c * tl.parts + p] : 0;
    std::uint32_t before = 0;
    std::uint32_t total = 0;
    Scan(temp).ExclusiveSum(v, before, total);
    if (c < chunks) sums[c * tl.parts + p] = run + before;
    run += total;
    __syncthreads();  // `temp` is reused by the next round
  }
  if (threadIdx.x == 0) totals[p] = run;
}

/// Scan, step 3: counts[at(t, p)] becomes the rows of partition p in the tiles before t: the
/// tile's first place in the partition (its cursor, relative to the partition's start).
__global__ void cursors_kernel(std::uint32_t* counts, Tiling tl, std::size_t per,
                               const std::uint32_t* sums) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= tl.parts) return;
  const std::size_t first = blockIdx.y * per;
  const std::size_t last = min(tl.tiles, first + per);
  std::uint32_t run = sums[blockIdx.y * std::size_t{tl.parts} + p];
  for (std::size_t t = first; t < last; ++t) {
    const std::uint32_t v = counts[tl.at(t, p)];
    counts[tl.at(t, p)] = run;
    run += v;
  }
}

}  // namespace

}  // namespace spillway::gpu
