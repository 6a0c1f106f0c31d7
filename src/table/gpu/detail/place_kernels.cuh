#pragma once
// Pass 3 of hash partitioning on the GPU (see partition.cu): every row's values to its place
// in its partition (below wide_partitions; scatter_kernels.cuh has the wide pass's scatters),
// and the STRING columns' kernels.

#include "table/gpu/detail/partition_tiling.cuh"

#include "table/gpu/detail/batched_copy.cuh"

#include <cuda_pipeline.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

namespace spillway::gpu {

namespace {  // (one translation unit includes it: partition.cu)

/// The fixed-width columns place_kernel stages together at most (their destinations are
/// in shared memory while they are placed).
constexpr std::uint32_t max_group_columns = 4;

/// The shared memory place_kernel takes beyond its static part: the tile's cursors.
__host__ __device__ inline std::size_t place_cursor_bytes(const Tiling& tl) {
  return tl.shared_counts() ? (std::size_t{tl.parts} * sizeof(std::uint32_t) + 7) / 8 * 8 : 0;
}
/// Columns up to which place_kernel keeps their descriptions in shared memory (it reads them
/// per group and sub-tile: as global loads they were ~9% of its stall samples at 64
/// partitions).
constexpr std::uint32_t shared_columns = 256;
/// ... and, placing columns, a group's destinations (max_group_columns x partitions) and the
/// columns' descriptions (up to shared_columns).
inline std::size_t place_shared_bytes(const Tiling& tl, bool positions, std::size_t ncols) {
  if (positions) return place_cursor_bytes(tl);
  return place_cursor_bytes(tl) + std::size_t{max_group_columns} * tl.parts * sizeof(std::byte*) +
         (ncols <= shared_columns ? ncols * sizeof(DeviceColumn) : 0);
}
/// Whether place_kernel advances the cursors in global memory (each launch needs a copy).
inline bool place_advances(const Tiling& tl) {
  return !tl.shared_counts();
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
/// `to[p]`: partition p's destination (in shared memory).
template <typename T>
__device__ void place_staged(const Placement& pl, const std::byte* stage, std::uint32_t n,
                             std::byte* const* to) {
  const T* values = reinterpret_cast<const T*>(stage);
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (threadIdx.x + i * block_threads < n) {
      reinterpret_cast<T*>(to[pl.pid[i]])[pl.at[i]] = values[pl.src[i]];
    }
  }
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
/// right after it whose sub-tiles fit one stage together, max_group_columns at most.
__device__ std::uint32_t group_end(const DeviceColumn* cols, std::uint32_t ncols, std::uint32_t c) {
  std::size_t bytes = 0;
  const std::uint32_t last = min(ncols, c + max_group_columns);
  while (c < last && cols[c].width != 0 &&
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

/// Places the staged columns [c, e) of the sub-tile and their validity bits; `to` holds their
/// destinations (to[(column - c) * parts + p]).
__device__ __forceinline__ void place_group(const Placement& pl, const std::byte* stage,
                                            std::byte* const* to, const DeviceColumn* cols,
                                            std::uint32_t c, std::uint32_t e, std::size_t sub,
                                            std::uint32_t n, const Dest* dest,
                                            std::uint32_t parts) {
  for (; c < e; ++c, to += parts) {
    const Dest* d = dest + std::size_t{c} * parts;
    detail::with_width(cols[c].width, [&]<typename T>() { place_staged<T>(pl, stage, n, to); });
    place_mask(pl, cols[c], sub, n, d);
    stage += std::size_t{cols[c].width} * sub_rows;
  }
}

/// Places one fixed-width column of the sub-tile, and its validity bits, straight from global
/// memory in sorted order: for a column too wide for the stage (its loads are not coalesced).
__device__ __forceinline__ void place_unstaged(const Placement& pl, const DeviceColumn& col,
                                               std::size_t sub, std::uint32_t n, const Dest* dest) {
  detail::with_width(col.width, [&]<typename T>() {
    const T* values = reinterpret_cast<const T*>(col.data) + sub;
#pragma unroll
    for (unsigned i = 0; i < place_items; ++i) {
      if (threadIdx.x + i * block_threads < n) {
        reinterpret_cast<T*>(dest[pl.pid[i]].data)[pl.at[i]] = values[pl.src[i]];
      }
    }
  });
  place_mask(pl, col, sub, n, dest);
}

/// Pass 3. `cursors` are the scan's (relative to the partition starts; see Tiling), advanced
/// as rows are placed in shared memory, or in place with too many partitions for that (then
/// each launch needs its own copy: place_advances). The launch takes tiles from first_tile
/// on. PosT std::uint32_t: each row's place in partitioned order (the partition's start in
/// `starts` added) goes to `pos`, pos[0] being the first tile's first row's; TileRank: its rank
/// in its tile's partitioned order instead, from `tile_offsets` (tile_offsets_kernel; cursors in
/// shared memory only), for staged_scatter_kernel. PosT void: every fixed-width
/// column's values and every validity bit go to `dest`: a group of columns at a time is loaded
/// into shared memory (cp.async, all of the group's loads in flight at once: the pass waits on
/// memory, so bytes in flight are its bandwidth), then placed from there in sorted order.
template <typename PidT, typename PosT>
__global__ void __launch_bounds__(block_threads, place_blocks_per_sm)
    place_kernel(const PidT* pid, Tiling tl, std::size_t first_tile, std::uint32_t* cursors,
                 const std::uint32_t* starts, const std::uint32_t* tile_offsets, PosT* pos,
                 const DeviceColumn* cols, std::uint32_t ncols, const Dest* dest,
                 std::byte* const* data) {
  constexpr bool Positions = !std::is_void_v<PosT>;
  __shared__ PlaceShared<PidT> sh;
  extern __shared__ std::uint32_t shared_cursors[];  // place_shared_bytes(tl, Positions, ncols)
  // A group's destinations, after the cursors (placing columns)
  auto* to = reinterpret_cast<std::byte**>(reinterpret_cast<std::byte*>(shared_cursors) +
                                           place_cursor_bytes(tl));
  using Sh = PlaceShared<PidT>;
  const std::size_t t = first_tile + blockIdx.x;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  // The tile's cursors, advanced as its rows are placed: a copy in shared memory, or (too many
  // partitions) the tile's run of `cursors` itself.
  std::uint32_t* cur = cursors + tl.at(t, 0);
  if (tl.shared_counts()) {
    for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) shared_cursors[p] = cur[p];
    cur = shared_cursors;  // read after the barrier at the top of the loop
  }
  if (!Positions && ncols <= shared_columns) {  // (also read after that barrier)
    auto* shared_cols = reinterpret_cast<DeviceColumn*>(to + max_group_columns * tl.parts);
    for (std::uint32_t c = threadIdx.x; c < ncols; c += blockDim.x) shared_cols[c] = cols[c];
    cols = shared_cols;
  }
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
      sh.at[k] = cur[keys[i]] + (k - run[i]);
    }
    __syncthreads();  // every cursor is read before the run ends advance them
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      if (k < n && (k + 1 == n || sh.pid[k + 1] != keys[i])) {
        cur[keys[i]] += k - run[i] + 1;
      }
    }
    if constexpr (Positions) {
      const std::size_t row0 = first_tile * tl.tile_rows;  // pos[0] is this row's
      for (std::uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        const std::uint32_t q = sh.pid[k];
        if constexpr (std::is_same_v<PosT, TileRank>) {
          // (the cursors are the tile's first places, unchanged: advanced in shared memory)
          pos[sub - row0 + sh.src[k]] =
              static_cast<TileRank>(tile_offsets[tl.at(t, q)] + (sh.at[k] - cursors[tl.at(t, q)]));
        } else {
          pos[sub - row0 + sh.src[k]] = starts[q] + sh.at[k];
        }
      }
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
        if (e == c) {  // a column whose sub-tile is larger than the stage (16-byte values)
          place_unstaged(pl, cols[c], sub, n, dest + std::size_t{c} * tl.parts);
          c = next_fixed(cols, ncols, c + 1);
          continue;
        }
        __syncthreads();  // the stage is free: the previous group is placed, the scan is done
        stage_group(sh.u.stage, cols, c, e, sub, n);
        for (std::uint32_t j = threadIdx.x; j < (e - c) * tl.parts; j += blockDim.x) {
          // (column c' partition p's destination, with the group's values)
          __pipeline_memcpy_async(to + j, data + std::size_t{c} * tl.parts + j, sizeof(std::byte*));
        }
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        place_group(pl, sh.u.stage, to, cols, c, e, sub, n, dest, tl.parts);
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
  if (threadIdx.x < tl.parts) next[threadIdx.x] = cursors[tl.at(t, threadIdx.x)];
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
