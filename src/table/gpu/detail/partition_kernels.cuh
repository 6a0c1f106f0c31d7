#pragma once
// The kernels of hash partitioning on the GPU, included by partition.cu (their host drivers
// and the public calls), whose first lines describe the passes.

#include <spillway/table/gpu.hpp>

#include "table/detail/arguments.hpp"
#include "table/detail/pack_format.hpp"
#include "table/gpu/detail/batched_copy.cuh"
#include "table/gpu/detail/device_column.cuh"

#include <cuda_pipeline.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

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
/// of sorting sub-tiles (place_kernel): 0.67 against 0.58 of the copy ceiling at 2 partitions,
/// 0.50 against 0.52 at 4, and worse beyond (bench/NOTES.md).
constexpr std::uint32_t split_partitions = 2;
/// The same for PartitionPlan, which places a few columns per call: the sort pass repeats its
/// per-row work (the sort) for each call, the warp split only its rank computation.
constexpr std::uint32_t plan_split_partitions = 4;
/// Partitions up to which the count pass keeps its counters in shared memory (16 KiB).
constexpr std::size_t shared_count_partitions = 4096;

/// Where partition p's rows of column c go (dest[c * P + p]).
struct Dest {
  std::byte* data;         // first row (fixed width) or character 0 of the partition
  std::int32_t* offsets;   // the partition's offsets (STRING): entry i + 1 is row i's end
  std::uint32_t* mask;     // the bitmap holding the partition's validity bits, as words
  std::uint64_t mask_bit;  // bit of the partition's first row in `mask`
  std::uint64_t char_sub;  // subtracted from global character positions (STRING)
};

struct Tiling {
  std::size_t rows;
  std::uint32_t parts;
  int bits;               // radix sort bits: enough for parts - 1
  std::size_t tile_rows;  // a multiple of sub_rows
  std::size_t tiles;

  Tiling(std::size_t r, std::size_t p)
      : rows{r},
        parts{static_cast<std::uint32_t>(p)},
        bits{std::max(1, static_cast<int>(std::bit_width(p - 1)))},
        // at least 4 rows per partition and tile keeps the histogram at <= 1 byte per row
        tile_rows{std::max<std::size_t>(1, (4 * p + sub_rows - 1) / sub_rows) * sub_rows},
        tiles{(r + tile_rows - 1) / tile_rows} {}
  [[nodiscard]] __host__ __device__ bool shared_counts() const {
    return parts <= shared_count_partitions;
  }
};

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
      atomicAdd(tl.shared_counts() ? &counts[p[i]] : &hist[p[i] * tl.tiles + t],
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
  for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) {
    hist[p * tl.tiles + t] = counts[p];
  }
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

/// starts[p] = scanned[p * tiles] for p <= parts (scanned[parts * tiles] is the total).
__global__ void starts_kernel(const std::uint32_t* scanned, Tiling tl, std::uint32_t* starts) {
  const std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p <= tl.parts) starts[p] = scanned[p * tl.tiles];
}

/// scanned[p * tiles + t] -= starts[p]: where each tile's rows go within their partition.
__global__ void relative_kernel(std::uint32_t* scanned, Tiling tl, const std::uint32_t* starts) {
  const std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (e < tl.parts * tl.tiles) scanned[e] -= starts[e / tl.tiles];
}

template <typename PidT>
struct PlaceShared {
  using Sort = cub::BlockRadixSort<PidT, block_threads, place_items, std::uint16_t>;
  using Scan = cub::BlockScan<std::uint32_t, block_threads>;
  union {
    typename Sort::TempStorage sort;
    typename Scan::TempStorage scan;
    alignas(16) std::byte stage[stage_bytes];  // a group of columns' sub-tile, in input order
  } u;
  PidT pid[sub_rows];           // in sorted order: the partition,
  std::uint16_t src[sub_rows];  // the row within the sub-tile,
  std::uint32_t at[sub_rows];   // its position in partitioned order, or within its partition
};

/// The sorted rows thread j places: j, j + block_threads, ... (row within the sub-tile, its
/// partition, its index within the partition), read once from shared memory for all columns.
struct Placement {
  std::uint16_t src[place_items];
  std::uint32_t pid[place_items];
  std::uint32_t at[place_items];
};

/// Starts copying rows [0, n) of a fixed-width column of the sub-tile into shared memory with
/// every thread of the block: 16 bytes at a time and asynchronously (cp.async, no registers
/// held) where the column is 16-byte aligned, value by value for the rest. The caller commits
/// and waits (__pipeline_commit, __pipeline_wait_prior) and synchronizes the block.
template <typename T>
__device__ void stage_column(std::byte* stage, const T* col, std::uint32_t n) {
  std::uint32_t first = 0;  // the first value copied one by one
  if (reinterpret_cast<std::uintptr_t>(col) % 16 == 0) {
    const std::uint32_t vecs = n * sizeof(T) / 16;
    const auto* src = reinterpret_cast<const std::byte*>(col);
    for (std::uint32_t v = threadIdx.x; v < vecs; v += block_threads) {
      __pipeline_memcpy_async(stage + v * 16, src + v * 16, 16);
    }
    first = vecs * 16 / sizeof(T);
  }
  for (std::uint32_t e = first + threadIdx.x; e < n; e += block_threads) {
    reinterpret_cast<T*>(stage)[e] = col[e];
  }
}

/// Copies a staged column to its partitions in sorted order: consecutive threads store
/// consecutive rows of one partition (coalesced), reading shared memory in the sorted order.
template <typename T>
__device__ void place_staged(const Placement& pl, const std::byte* stage, std::uint32_t n,
                             const Dest* dest) {
  const T* values = reinterpret_cast<const T*>(stage);
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (threadIdx.x + i * block_threads < n) {
      reinterpret_cast<T*>(dest[pl.pid[i]].data)[pl.at[i]] = values[pl.src[i]];
    }
  }
}

/// Sets the validity bit of the row at place `at` of partition destination `d`.
__device__ inline void set_valid(const Dest& d, std::uint32_t at) {
  const std::uint64_t bit = d.mask_bit + at;
  atomicOr(d.mask + bit / 32, 1U << (bit % 32));
}

/// Sets the validity bits of a nullable column's rows of the sub-tile in their partitions.
__device__ void place_mask(const Placement& pl, const DeviceColumn& col, std::size_t sub,
                           std::uint32_t n, const Dest* dest) {
  if (col.mask == nullptr) return;
  for (unsigned i = 0; i < place_items; ++i) {
    if (threadIdx.x + i * block_threads < n && detail::is_valid(col, sub + pl.src[i])) {
      set_valid(dest[pl.pid[i]], pl.at[i]);
    }
  }
}

/// The first fixed-width column at or after `c` (ncols when none).
__device__ std::uint32_t next_fixed(const DeviceColumn* cols, std::uint32_t ncols,
                                    std::uint32_t c) {
  while (c < ncols && cols[c].width == 0) ++c;
  return c;
}

/// The end of the group that starts at fixed-width column `c`: it and the fixed-width columns
/// right after it whose sub-tiles fit one stage together.
__device__ std::uint32_t group_end(const DeviceColumn* cols, std::uint32_t ncols, std::uint32_t c) {
  std::size_t bytes = 0;
  while (c < ncols && cols[c].width != 0 &&
         bytes + std::size_t{cols[c].width} * sub_rows <= stage_bytes) {
    bytes += std::size_t{cols[c].width} * sub_rows;
    ++c;
  }
  return c;
}

/// Starts staging rows [sub, sub + n) of columns [c, e) into `stage`, one after another.
__device__ __forceinline__ void stage_group(std::byte* stage, const DeviceColumn* cols,
                                            std::uint32_t c, std::uint32_t e, std::size_t sub,
                                            std::uint32_t n) {
  for (; c < e; ++c) {
    const std::size_t w = cols[c].width;
    const std::byte* col = cols[c].data + sub * w;
    detail::with_width(cols[c].width, [&]<typename T>() {
      stage_column(stage, reinterpret_cast<const T*>(col), n);
    });
    stage += w * sub_rows;
  }
}

/// Places the staged columns [c, e) of the sub-tile and their validity bits.
__device__ __forceinline__ void place_group(const Placement& pl, const std::byte* stage,
                                            const DeviceColumn* cols, std::uint32_t c,
                                            std::uint32_t e, std::size_t sub, std::uint32_t n,
                                            const Dest* dest, std::uint32_t parts) {
  for (; c < e; ++c) {
    const Dest* d = dest + std::size_t{c} * parts;
    detail::with_width(cols[c].width, [&]<typename T>() { place_staged<T>(pl, stage, n, d); });
    place_mask(pl, cols[c], sub, n, d);
    stage += std::size_t{cols[c].width} * sub_rows;
  }
}

/// Pass 3. `cursors[p * tiles + t]` starts as the scan (Positions: absolute, each row's place
/// in partitioned order goes to `pos`; otherwise relative to the partition's start, see
/// relative_kernel) and is advanced as rows are placed. Otherwise every fixed-width
/// column's values and every validity bit go to `dest`: a group of columns at a time is loaded
/// into shared memory (cp.async, all of the group's loads in flight at once: the pass waits on
/// memory, so bytes in flight are its bandwidth), then placed from there in sorted order.
template <typename PidT, bool Positions>
__global__ void __launch_bounds__(block_threads, place_blocks_per_sm)
    place_kernel(const PidT* pid, Tiling tl, std::uint32_t* cursors, std::uint32_t* pos,
                 const DeviceColumn* cols, std::uint32_t ncols, const Dest* dest) {
  __shared__ PlaceShared<PidT> sh;
  using Sh = PlaceShared<PidT>;
  const std::size_t t = blockIdx.x;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  for (std::size_t sub = t * tl.tile_rows; sub < end; sub += sub_rows) {
    const auto n = static_cast<std::uint32_t>(min(sub_rows, end - sub));
    alignas(16) PidT keys[place_items];
    std::uint16_t idx[place_items];
    if (n == sub_rows) {  // a whole sub-tile: each thread's ids in 16-byte vectors
      static_assert(place_items * sizeof(PidT) % 16 == 0);
      const auto* v = reinterpret_cast<const uint4*>(pid + sub + threadIdx.x * place_items);
#pragma unroll
      for (unsigned i = 0; i < place_items * sizeof(PidT) / 16; ++i) {
        reinterpret_cast<uint4*>(keys)[i] = v[i];
      }
    } else {
      for (unsigned i = 0; i < place_items; ++i) {
        const unsigned j = threadIdx.x * place_items + i;
        keys[i] = j < n ? pid[sub + j] : static_cast<PidT>(~PidT{0});  // padding sorts last
      }
    }
    for (unsigned i = 0; i < place_items; ++i) {
      idx[i] = static_cast<std::uint16_t>(threadIdx.x * place_items + i);
    }
    __syncthreads();  // the previous sub-tile is done with `sh`
    typename Sh::Sort(sh.u.sort).Sort(keys, idx, 0, tl.bits);
    for (unsigned i = 0; i < place_items; ++i) {
      sh.pid[threadIdx.x * place_items + i] = keys[i];
      sh.src[threadIdx.x * place_items + i] = idx[i];
    }
    __syncthreads();
    // Where each run of equal partitions starts (the running max of the run heads).
    std::uint32_t run[place_items];
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      run[i] = (k == 0 || sh.pid[k - 1] != keys[i]) ? k : 0;
    }
    typename Sh::Scan(sh.u.scan).InclusiveScan(run, run, ::cuda::maximum<>{});
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      if (k >= n) continue;
      sh.at[k] = cursors[keys[i] * tl.tiles + t] + (k - run[i]);
    }
    __syncthreads();  // every cursor is read before the run ends advance them
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      if (k < n && (k + 1 == n || sh.pid[k + 1] != keys[i])) {
        cursors[keys[i] * tl.tiles + t] += k - run[i] + 1;
      }
    }
    if constexpr (Positions) {
      for (std::uint32_t k = threadIdx.x; k < n; k += blockDim.x) pos[sub + sh.src[k]] = sh.at[k];
    } else {
      Placement pl;
#pragma unroll
      for (unsigned i = 0; i < place_items; ++i) {
        const unsigned k = threadIdx.x + i * block_threads;
        pl.src[i] = k < n ? sh.src[k] : 0;
        pl.pid[i] = k < n ? static_cast<std::uint32_t>(sh.pid[k]) : 0;
        pl.at[i] = k < n ? sh.at[k] : 0;
      }
      std::uint32_t c = next_fixed(cols, ncols, 0);
      while (c < ncols) {
        const std::uint32_t e = group_end(cols, ncols, c);
        __syncthreads();  // the stage is free: the previous group is placed, the scan is done
        stage_group(sh.u.stage, cols, c, e, sub, n);
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        place_group(pl, sh.u.stage, cols, c, e, sub, n, dest, tl.parts);
        c = next_fixed(cols, ncols, e);
      }
      for (std::uint32_t s = 0; s < ncols; ++s) {  // STRING: string_kernel copies the rest
        if (cols[s].width == 0) place_mask(pl, cols[s], sub, n, dest + std::size_t{s} * tl.parts);
      }
    }
  }
}

/// Copies one fixed-width column's rows of a warp (see split_place_kernel): all loads first
/// (coalesced, in flight together), then the stores to each row's place.
template <typename T>
__device__ __forceinline__ void split_column(const T* col, std::size_t first, std::size_t end,
                                             const std::uint32_t (&p)[place_items],
                                             const std::uint32_t (&at)[place_items],
                                             const Dest* dest) {
  T v[place_items];
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (first + i * 32 < end) v[i] = col[first + i * 32];
  }
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (first + i * 32 < end) reinterpret_cast<T*>(dest[p[i]].data)[at[i]] = v[i];
  }
}

/// Pass 3 for at most split_partitions partitions, without a sort: each warp takes
/// 32 x place_items consecutive rows of a sub-tile, 32 at a time, and ranks each row among
/// the warp's rows of its partition (__match_any_sync). A row's place in its partition is the
/// tile's cursor, plus the rows of that partition in the warps before (per-warp counts,
/// scanned in row order), plus that rank. The loads are coalesced and each warp's stores form
/// one run per partition, which L2 merges with the next warp's; with more than two partitions
/// the runs get too short (split_partitions). `cursors` are relative to the partition starts.
template <typename PidT, std::uint32_t MaxParts>
__global__ void __launch_bounds__(block_threads)
    split_place_kernel(const PidT* pid, Tiling tl, const std::uint32_t* cursors,
                       const DeviceColumn* cols, std::uint32_t ncols, const Dest* dest) {
  constexpr unsigned warps = block_threads / 32;
  __shared__ std::uint32_t counts[warps][MaxParts];  // rows per warp, then its start
  __shared__ std::uint32_t next[MaxParts];           // the tile's next place
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  const unsigned lower = (1U << lane) - 1U;  // the lanes before this one
  const std::size_t t = blockIdx.x;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  if (threadIdx.x < tl.parts) next[threadIdx.x] = cursors[threadIdx.x * tl.tiles + t];
  for (std::size_t sub = t * tl.tile_rows; sub < end; sub += sub_rows) {
    const std::size_t first = sub + warp * (32 * place_items) + lane;  // this lane's first row
    std::uint32_t p[place_items];
    std::uint32_t at[place_items];
#pragma unroll
    for (unsigned i = 0; i < place_items; ++i) {
      p[i] = first + i * 32 < end ? static_cast<std::uint32_t>(pid[first + i * 32]) : no_partition;
    }
    __syncthreads();  // the previous sub-tile's starts are read
    if (lane < tl.parts) counts[warp][lane] = 0;
    __syncwarp();
#pragma unroll
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned peers = __match_any_sync(full_mask, p[i]);
      const bool valid = p[i] != no_partition;
      at[i] = valid ? counts[warp][p[i]] + __popc(peers & lower) : 0;
      __syncwarp();
      if (valid && (peers & lower) == 0) counts[warp][p[i]] += __popc(peers);
      __syncwarp();
    }
    __syncthreads();
    if (threadIdx.x < tl.parts) {  // each warp's start in the partition, in row order
      std::uint32_t s = next[threadIdx.x];
      for (unsigned w = 0; w < warps; ++w) {
        const std::uint32_t n = counts[w][threadIdx.x];
        counts[w][threadIdx.x] = s;
        s += n;
      }
      next[threadIdx.x] = s;
    }
    __syncthreads();
#pragma unroll
    for (unsigned i = 0; i < place_items; ++i) {
      if (p[i] != no_partition) at[i] += counts[warp][p[i]];
    }
    for (std::uint32_t c = 0; c < ncols; ++c) {
      const DeviceColumn& col = cols[c];
      const Dest* d = dest + std::size_t{c} * tl.parts;
      if (col.width != 0) {  // STRING: string_kernel copies the rest
        detail::with_width(col.width, [&]<typename T>() {
          split_column(reinterpret_cast<const T*>(col.data), first, end, p, at, d);
        });
      }
      if (col.mask == nullptr) continue;
#pragma unroll
      for (unsigned i = 0; i < place_items; ++i) {
        if (p[i] != no_partition && detail::is_valid(col, first + i * 32))
          set_valid(d[p[i]], at[i]);
      }
    }
  }
}

/// lengths[pos[row]] = length of row's string; lengths[rows] = 0.
__global__ void lengths_kernel(DeviceColumn col, std::size_t rows, const std::uint32_t* pos,
                               std::uint64_t* lengths) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row < rows) {
    lengths[pos[row]] = static_cast<std::uint64_t>(col.offsets[row + 1] - col.offsets[row]);
  } else if (row == rows) {
    lengths[rows] = 0;
  }
}

/// out[p] = values[starts[p]] for p <= parts.
__global__ void gather_kernel(const std::uint64_t* values, const std::uint32_t* starts,
                              std::uint32_t parts, std::uint64_t* out) {
  const std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p <= parts) out[p] = values[starts[p]];
}

/// A STRING column's offsets and characters; `chars` holds the exclusive scan of the lengths
/// in partitioned order (global character positions).
template <typename PidT>
__global__ void string_kernel(DeviceColumn col, std::size_t c, std::size_t rows,
                              std::uint32_t parts, const PidT* pid, const std::uint32_t* pos,
                              const std::uint32_t* starts, const std::uint64_t* chars,
                              const Dest* dest) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  const std::uint32_t p = pid[row];
  const std::uint32_t at = pos[row];
  const Dest& d = dest[c * parts + p];
  const std::size_t i = at - starts[p];
  const std::uint64_t from = chars[at] - d.char_sub;
  const std::uint64_t to = chars[at + 1] - d.char_sub;
  d.offsets[i + 1] = static_cast<std::int32_t>(to);
  const auto* src = reinterpret_cast<const char*>(col.data) + col.offsets[row];
  auto* dst = reinterpret_cast<char*>(d.data) + from;
  for (std::uint64_t k = 0; k < to - from; ++k) dst[k] = src[k];
}

}  // namespace

}  // namespace spillway::gpu
