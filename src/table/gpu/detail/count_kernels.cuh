#pragma once
// Pass 1 of hash partitioning on the GPU (see partition.cu): each row's partition and each
// tile's rows per partition, then the scan that turns the counts into cursors.

#include "table/gpu/detail/partition_tiling.cuh"

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
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) {  // one atomic per partition and warp, not per row
    const unsigned peers = __match_any_sync(full_mask, p[i]);
    if (p[i] != no_partition && lane == static_cast<unsigned>(__ffs(peers) - 1)) {
      atomicAdd(tl.shared_counts() ? &counts[p[i]] : &hist[tl.at(t, p[i])],
                static_cast<std::uint32_t>(__popc(peers)));
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

/// Tiles per chunk of the scan of the counts: the scan's blocks each take a chunk of tiles
/// and up to block_threads partitions, one thread per partition walking down the chunk, so
/// every read and write of the counts is a run over consecutive partitions.
constexpr std::size_t scan_tiles = 32;

/// Scan, step 1: sums[chunk * parts + p] = chunk's rows of partition p.
__global__ void chunk_sums_kernel(const std::uint32_t* counts, Tiling tl, std::uint32_t* sums) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= tl.parts) return;
  const std::size_t first = blockIdx.y * scan_tiles;
  const std::size_t last = min(tl.tiles, first + scan_tiles);
  std::uint32_t sum = 0;
  for (std::size_t t = first; t < last; ++t) sum += counts[tl.at(t, p)];
  sums[blockIdx.y * std::size_t{tl.parts} + p] = sum;
}

/// Scan, step 2: each chunk's sums become the rows of its partition in the chunks before it;
/// totals[p] = the partition's rows (totals has parts + 1 entries, the last set to 0, so that
/// its exclusive sum is the partition starts with the row count last).
__global__ void chunk_scan_kernel(std::uint32_t* sums, Tiling tl, std::size_t chunks,
                                  std::uint32_t* totals) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p > tl.parts) return;
  if (p == tl.parts) {
    totals[p] = 0;
    return;
  }
  std::uint32_t run = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint32_t v = sums[c * tl.parts + p];
    sums[c * tl.parts + p] = run;
    run += v;
  }
  totals[p] = run;
}

/// Scan, step 3: counts[at(t, p)] becomes the rows of partition p in the tiles before t: the
/// tile's first place in the partition (its cursor, relative to the partition's start).
__global__ void cursors_kernel(std::uint32_t* counts, Tiling tl, const std::uint32_t* sums) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= tl.parts) return;
  const std::size_t first = blockIdx.y * scan_tiles;
  const std::size_t last = min(tl.tiles, first + scan_tiles);
  std::uint32_t run = sums[blockIdx.y * std::size_t{tl.parts} + p];
  for (std::size_t t = first; t < last; ++t) {
    const std::uint32_t v = counts[tl.at(t, p)];
    counts[tl.at(t, p)] = run;
    run += v;
  }
}

}  // namespace

}  // namespace spillway::gpu
