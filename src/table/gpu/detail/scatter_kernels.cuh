#pragma once
// Pass 3 of hash partitioning on the GPU with many partitions (wide_partitions; see
// partition.cu): each row's place is found first (place_kernel with Positions), then the
// columns are scattered one at a time, staged a tile at a time in shared memory where it fits.

#include "core/detail/cuda_try.hpp"
#include "table/gpu/detail/partition_tiling.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>

namespace spillway::gpu {

namespace {  // (see partition_tiling.cuh)

/// Rows a thread of scatter_kernel moves.
constexpr unsigned scatter_items = 4;

/// Pass 3 with many partitions (wide_partitions), for rows [row0, row0 + rows): each row's
/// value of column blockIdx.y goes straight to its place, pos[row - row0] (its place in
/// partitioned order, from place_kernel<Positions>). The sorted sub-tiles of place_kernel give
/// runs of 2048 / P rows, too short to write whole sectors, and with every column written at
/// once the sectors left open across the blocks in flight outgrow L2 (1024 partitions: 0.04
/// of the copy ceiling). One column at a time, the rows in flight are a window of
/// consecutive rows, so each partition's writes are one short run that L2 completes before it
/// writes it back.
/// Contiguous: the partitions of each column are one run in partition order (hash_partition,
/// PartitionPlan), so a row's place is pos itself in partition 0's destination, with no
/// partition id, start or destination to look up per row.
template <typename PidT, bool Contiguous>
__global__ void __launch_bounds__(block_threads)
    scatter_kernel(const PidT* pid, const std::uint32_t* pos, const std::uint32_t* starts,
                   std::size_t row0, std::size_t rows, const DeviceColumn* cols,
                   std::uint32_t parts, const Dest* dest) {
  const DeviceColumn& col = cols[blockIdx.y];
  const Dest* d = dest + std::size_t{blockIdx.y} * parts;
  const std::size_t first = blockIdx.x * std::size_t{block_threads} * scatter_items + threadIdx.x;
  std::uint32_t p[scatter_items];
  std::uint32_t at[scatter_items];
#pragma unroll
  for (unsigned i = 0; i < scatter_items; ++i) {
    const std::size_t r = first + i * block_threads;
    if constexpr (Contiguous) {
      p[i] = 0;
      at[i] = r < rows ? pos[r] : 0;
    } else {
      p[i] = r < rows ? static_cast<std::uint32_t>(pid[row0 + r]) : 0;
      at[i] = r < rows ? pos[r] - starts[p[i]] : 0;
    }
  }
  if (col.width != 0) {  // STRING: string_kernel
    detail::with_width(col.width, [&]<typename T>() {
      const T* src = reinterpret_cast<const T*>(col.data) + row0;
      T v[scatter_items];
#pragma unroll
      for (unsigned i = 0; i < scatter_items; ++i) {
        const std::size_t r = first + i * block_threads;
        if (r < rows) v[i] = src[r];
      }
#pragma unroll
      for (unsigned i = 0; i < scatter_items; ++i) {
        if (first + i * block_threads < rows) reinterpret_cast<T*>(d[p[i]].data)[at[i]] = v[i];
      }
    });
  }
  if (col.mask == nullptr) return;
#pragma unroll
  for (unsigned i = 0; i < scatter_items; ++i) {
    const std::size_t r = first + i * block_threads;
    if (r < rows && detail::is_valid(col, row0 + r)) set_valid(d[p[i]], at[i]);
  }
}

/// tile_offsets[at(t, p)]: where partition p's rows start in tile t's partitioned order (the
/// exclusive sum over partitions of the tile's rows per partition, from the cursors). One
/// block per tile.
__global__ void __launch_bounds__(block_threads)
    tile_offsets_kernel(const std::uint32_t* cursors, const std::uint32_t* starts, Tiling tl,
                        std::uint32_t* tile_offsets) {
  using Scan = cub::BlockScan<std::uint32_t, block_threads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ std::uint32_t carry;
  const std::size_t t = blockIdx.x;
  if (threadIdx.x == 0) carry = 0;
  for (std::uint32_t base = 0; base < tl.parts; base += block_threads) {
    const std::uint32_t p = base + threadIdx.x;
    std::uint32_t rows = 0;
    if (p < tl.parts) {
      const std::uint32_t next =
          t + 1 < tl.tiles ? cursors[tl.at(t + 1, p)] : starts[p + 1] - starts[p];
      rows = next - cursors[tl.at(t, p)];
    }
    std::uint32_t before = 0;
    std::uint32_t total = 0;
    __syncthreads();  // `carry` from the last round is written
    const std::uint32_t c = carry;
    Scan(temp).ExclusiveSum(rows, before, total);
    if (p < tl.parts) tile_offsets[tl.at(t, p)] = c + before;
    __syncthreads();  // every thread read `carry`
    if (threadIdx.x == 0) carry = c + total;
  }
}

/// The shared memory a block of staged_scatter_kernel needs: its values of a tile (its
/// Tiling::block_rows places), and per partition its base (where place 0 of the tile's order
/// would go in it) and, without labels (each staged value's partition, `label_width` bytes; 0:
/// none), its start in the tile's order.
inline std::size_t staged_bytes(const Tiling& tl, std::size_t width, std::size_t label_width) {
  return tl.block_rows() * width + std::size_t{tl.parts} * sizeof(std::uintptr_t) +
         (label_width != 0 ? tl.block_rows() * label_width
                           : std::size_t{tl.parts} * sizeof(std::uint32_t));
}
/// The most shared memory a block of the current device may take (227 KiB on sm_90).
inline std::size_t staged_max_bytes() {
  int device = 0;
  int bytes = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&device));
  SPILLWAY_CUDA_TRY(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(bytes);
}
/// staged_scatter_kernel's threads: with 4096 partitions a block takes most of a
/// multiprocessor's shared memory, so its threads are all the loads in flight there; with
/// 1024 partitions (56 KiB) two blocks share one.
constexpr unsigned staged_threads = 1024;
/// Rows each thread of staged_scatter_kernel loads at once.
constexpr unsigned staged_items = 4;
/// 4-byte values with 2-byte partition ids: runs of four rows each thread of
/// staged_scatter_kernel loads at once, as one 16-byte load of values and 8-byte loads of their
/// ranks and ids (staged_items rows cost three loads each).
constexpr unsigned staged_quads = 2;

/// A block's rank in its cluster, another block's shared memory, and the cluster's barrier
/// (staged_scatter_kernel with Split: the host launches it only where the kernel was built for
/// thread block clusters, sm_90 on; see split_tiles_available).
__device__ inline unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  __trap();
  return 0;
#endif
}
template <typename T>
__device__ inline T* cluster_shared(T* local, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(local, rank);
#else
  __trap();
  return local;
#endif
}
__device__ inline void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}
/// The cluster's barrier in two halves: arrive (relaxed: it orders no memory, it only says that
/// this block runs), and later wait until every block of the cluster has arrived.
__device__ inline void cluster_arrive_relaxed() {
#if __CUDA_ARCH__ >= 900
  __cluster_barrier_arrive_relaxed();
#else
  __trap();
#endif
}
__device__ inline void cluster_wait() {
#if __CUDA_ARCH__ >= 900
  __cluster_barrier_wait();
#else
  __trap();
#endif
}

/// Where staged_scatter_kernel stages a tile's values and (with labels) their partitions, in
/// the tile's partitioned order: Split, place k in the shared memory of the cluster's block k /
/// half (its own or the other's), at k % half; otherwise all in the block's own (`values`,
/// `labels`). (Pointers, not arrays of them: an array indexed per row went to local memory.)
template <typename T, typename PidT, bool Split>
struct StagedTile {
  T* values;  // Split: block 0's
  PidT* labels;
  T* upper_values;  // Split: block 1's
  PidT* upper_labels;
  std::uint32_t half;  // places a block holds

  __device__ void put(std::uint32_t k, T v) const { store(values, upper_values, k, v); }
  __device__ void label(std::uint32_t k, PidT p) const { store(labels, upper_labels, k, p); }
  /// Place k of `lower` (block 0's) and `upper` (block 1's) becomes `v`.
  template <typename U>
  __device__ void store(U* lower, U* upper, std::uint32_t k, U v) const {
    if constexpr (Split) {
      const bool up = k >= half;
      (up ? upper : lower)[up ? k - half : k] = v;
    } else {
      lower[k] = v;
    }
  }
};

/// staged_scatter_kernel's loads of 4-byte values (`src`, n of them), their ranks and (Labels)
/// partition ids into the staged tile, `staged_quads` runs of four rows a thread at once: the
/// kernel is latency-bound, and vector loads put more bytes in flight in fewer
/// registers. Every pointer 16-byte aligned; the last n % 4 rows are left to the caller.
template <bool Labels, typename Tile>
__device__ inline void stage_quads(const std::uint32_t* src, const TileRank* ranks,
                                   const std::uint16_t* ids, std::uint32_t n, const Tile& to) {
  const std::uint32_t quads = n / 4;
  for (std::uint32_t q0 = 0; q0 < quads; q0 += staged_threads * staged_quads) {
    uint4 v[staged_quads];
    uint2 k[staged_quads];
    [[maybe_unused]] uint2 l[staged_quads];
#pragma unroll
    for (unsigned j = 0; j < staged_quads; ++j) {
      const std::uint32_t q = q0 + j * staged_threads + threadIdx.x;
      if (q < quads) {
        v[j] = reinterpret_cast<const uint4*>(src)[q];
        k[j] = reinterpret_cast<const uint2*>(ranks)[q];
        if constexpr (Labels) l[j] = reinterpret_cast<const uint2*>(ids)[q];
      }
    }
#pragma unroll
    for (unsigned j = 0; j < staged_quads; ++j) {
      if (q0 + j * staged_threads + threadIdx.x >= quads) continue;
      // (little-endian: row 4q + 0 is the low half of the first word)
      to.put(k[j].x & 0xFFFFU, v[j].x);
      to.put(k[j].x >> 16, v[j].y);
      to.put(k[j].y & 0xFFFFU, v[j].z);
      to.put(k[j].y >> 16, v[j].w);
      if constexpr (Labels) {
        to.label(k[j].x & 0xFFFFU, static_cast<std::uint16_t>(l[j].x));
        to.label(k[j].x >> 16, static_cast<std::uint16_t>(l[j].x >> 16));
        to.label(k[j].y & 0xFFFFU, static_cast<std::uint16_t>(l[j].y));
        to.label(k[j].y >> 16, static_cast<std::uint16_t>(l[j].y >> 16));
      }
    }
  }
}

/// Pass 3 with many partitions, for the tiles from first_tile: block b moves column b % ncols
/// of tile first_tile + b / ncols (Split: cluster b, of two blocks), so the blocks in flight are
/// a few tiles' columns, which read each tile's ranks and labels from DRAM once (later from L2;
/// with the tiles varying fastest, 1024 partitions were 10% slower). Its values go into shared
/// memory in the tile's partitioned order (rank[row], from place_kernel with tile_offsets), then
/// out in that order, so consecutive threads store consecutive rows of a partition: runs of the
/// tile's rows per partition (8 to 32 on average), not one store per row (scatter_kernel).
/// Validity bits are set per row. Labels: each staged value's partition goes into shared memory
/// beside it, so the way out reads it (one load); otherwise (where they do not fit) it is found
/// by a binary search of the partitions' starts in the tile (12 dependent loads: the kernel was
/// compute-bound on them). Split: the two blocks of a cluster share the tile, block h staging
/// its places [h * half, (h + 1) * half) and loading its rows [h * half, (h + 1) * half), whose
/// values of the other block's places go to that block's shared memory (a tile's block takes a
/// multiprocessor's shared memory then: one block a multiprocessor, up to 64 registers).
template <typename PidT, bool Contiguous, bool Labels, bool Split>
__global__ void __launch_bounds__(staged_threads, Split ? 1 : 2)
    staged_scatter_kernel(const PidT* pid, const TileRank* rank, const std::uint32_t* cursors,
                          const std::uint32_t* starts, const std::uint32_t* tile_offsets, Tiling tl,
                          std::size_t first_tile, const DeviceColumn* cols, std::uint32_t ncols,
                          const Dest* dest) {
  extern __shared__ __align__(16) std::byte staged[];
  // Split: both blocks run before either writes into the other's shared memory (the CUDA
  // programming guide's condition for distributed shared memory): each says so at once and
  // waits for the other only before its first such store. (A whole cluster barrier before the
  // staging made every thread wait for the slowest one's partition table below, and lost
  // the split's whole gain.)
  if constexpr (Split) cluster_arrive_relaxed();
  const unsigned h = Split ? cluster_rank() : 0;
  const std::uint32_t b = Split ? blockIdx.x / max_split : blockIdx.x;
  const std::size_t t = first_tile + b / ncols;
  const std::uint32_t c = b % ncols;
  const DeviceColumn& col = cols[c];
  const Dest* d = dest + std::size_t{c} * tl.parts;
  const std::size_t row0 = t * tl.tile_rows;  // rank[0] is first_tile's first row's
  const std::size_t rank0 = first_tile * tl.tile_rows;
  const auto n = static_cast<std::uint32_t>(min(tl.tile_rows, tl.rows - row0));
  const auto half = static_cast<std::uint32_t>(tl.tile_rows / (Split ? max_split : 1));
  const std::uint32_t lo = Split ? min(n, h * half) : 0;  // the block's places and rows: [lo, hi)
  const std::uint32_t hi = Split ? min(n, lo + half) : n;
  const std::size_t width = col.width;
  // Per partition: base[p] + i * width is where place i of the tile's order goes when it is
  // partition p's (the arithmetic wraps; only places of p are formed), offs[p] where p starts
  // in the tile's order (without labels).
  auto* base = reinterpret_cast<std::uintptr_t*>(staged);
  std::byte* values = reinterpret_cast<std::byte*>(base + tl.parts);  // places [lo, lo + half)
  auto* labels = reinterpret_cast<PidT*>(values + std::size_t{half} * width);
  auto* offs = reinterpret_cast<std::uint32_t*>(values + std::size_t{half} * width);
  for (std::uint32_t p = threadIdx.x; p < tl.parts; p += staged_threads) {
    const std::uint32_t off = tile_offsets[tl.at(t, p)];
    const std::uint32_t place = cursors[tl.at(t, p)] + (Contiguous ? starts[p] : 0);
    const auto ptr = reinterpret_cast<std::uintptr_t>(Contiguous ? d[0].data : d[p].data);
    base[p] = ptr + (place - static_cast<std::uintptr_t>(off)) * width;
    if constexpr (!Labels) offs[p] = off;
  }
  if constexpr (Split) cluster_wait();  // the other block runs (see the top)
  const bool fixed = width != 0;        // STRING: string_kernel (only its mask here)
  const TileRank* ranks = rank + (row0 - rank0);
  if (fixed) {  // the block's rows' values to their ranks, staged_items loads in flight a thread
    detail::with_width(col.width, [&]<typename T>() {
      const T* src = reinterpret_cast<const T*>(col.data) + row0 + lo;
      const TileRank* ks = ranks + lo;
      const PidT* ids = pid + row0 + lo;
      T* const mine = reinterpret_cast<T*>(values);
      StagedTile<T, PidT, Split> to{mine, labels, nullptr, nullptr, half};
      if constexpr (Split) {
        to = {cluster_shared(mine, 0), cluster_shared(labels, 0), cluster_shared(mine, 1),
              cluster_shared(labels, 1), half};
      }
      const std::uint32_t rows = hi - lo;
      std::uint32_t first = 0;  // rows before it staged by quads
      if constexpr (sizeof(T) == 4 && sizeof(PidT) == 2 && sizeof(TileRank) == 2) {
        const auto aligned = [](const void* ptr) {
          return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
        };
        if (aligned(src) && aligned(ks) && (!Labels || aligned(ids))) {
          stage_quads<Labels>(reinterpret_cast<const std::uint32_t*>(src), ks,
                              reinterpret_cast<const std::uint16_t*>(ids), rows, to);
          first = rows / 4 * 4;
        }
      }
      for (std::uint32_t i0 = first; i0 < rows; i0 += staged_threads * staged_items) {
        T v[staged_items];
        std::uint32_t k[staged_items];
        [[maybe_unused]] PidT q[staged_items];
#pragma unroll
        for (unsigned j = 0; j < staged_items; ++j) {
          const std::uint32_t i = i0 + j * staged_threads + threadIdx.x;
          if (i < rows) {
            v[j] = src[i];
            k[j] = ks[i];
            if constexpr (Labels) q[j] = ids[i];
          }
        }
#pragma unroll
        for (unsigned j = 0; j < staged_items; ++j) {
          if (i0 + j * staged_threads + threadIdx.x < rows) {
            to.put(k[j], v[j]);
            if constexpr (Labels) to.label(k[j], q[j]);
          }
        }
      }
    });
  }
  for (std::uint32_t i = lo + threadIdx.x; i < hi && col.mask != nullptr; i += staged_threads) {
    const std::uint32_t k = ranks[i];
    if (detail::is_valid(col, row0 + i)) {
      const std::uint32_t p = pid[row0 + i];
      // (from global memory: the tables above are complete only after the barrier below)
      const std::uint32_t at =
          cursors[tl.at(t, p)] + (Contiguous ? starts[p] : 0) + (k - tile_offsets[tl.at(t, p)]);
      set_valid(Contiguous ? d[0] : d[p], at);
    }
  }
  if constexpr (Split) {
    cluster_sync();  // (after it, each block reads only its own shared memory, so it may exit)
  } else {
    __syncthreads();
  }
  if (!fixed) return;
  detail::with_width(col.width, [&]<typename T>() {
    for (std::uint32_t i = lo + threadIdx.x; i < hi; i += staged_threads) {
      // The partition of place i: its label, or the last with its start at or before i.
      std::size_t p = 0;
      if constexpr (Labels) {
        p = labels[i - lo];
      } else {
        p = detail::last_at_or_below(offs, tl.parts, i);
      }
      *reinterpret_cast<T*>(base[p] + std::uintptr_t{i} * sizeof(T)) =
          reinterpret_cast<const T*>(values)[i - lo];
    }
  });
}

}  // namespace

}  // namespace spillway::gpu
