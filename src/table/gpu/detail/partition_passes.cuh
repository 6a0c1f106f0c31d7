#pragma once
// The host side of the GPU partitioning passes (see partition.cu, whose first lines describe
// them): the counting pass with its scan, and pass 3 in its forms (the warp split, sorted
// sub-tiles, the staged and the plain scatter), shared by partition.cu (hash_partition,
// partition_and_pack) and partition_plan.cu (PartitionPlan). Included by those two only.

#include <spillway/table/gpu.hpp>

#include "core/detail/cuda_try.hpp"
#include "table/detail/arguments.hpp"
#include "table/gpu/detail/count_kernels.cuh"
#include "table/gpu/detail/device_column.cuh"
#include "table/gpu/detail/device_dests.cuh"
#include "table/gpu/detail/place_kernels.cuh"
#include "table/gpu/detail/scatter_kernels.cuh"

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spillway::gpu {

namespace {  // (see above: each includer has its own copy)

using detail::as;
using detail::DeviceColumn;
using detail::raw;

void check_launch() {
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

/// In-place exclusive sum of `n` values of `data`, temporary storage from `br`.
template <typename T>
void exclusive_sum(T* data, std::size_t n, BufferResource& br, Stream stream) {
  std::size_t temp = 0;
  SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, data, data, n, raw(stream)));
  auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
  SPILLWAY_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(scratch->data(), temp, data, data, n, raw(stream)));
}

void check_args(const TableView& table, std::span<const std::size_t> keys, std::size_t n) {
  spillway::detail::check_partition_args(table, keys, n);
  SPILLWAY_EXPECTS(table.num_rows() < no_partition,
                   "the GPU partitioning takes fewer than 2^32 - 1 rows per call, got " +
                       std::to_string(table.num_rows()));
  SPILLWAY_EXPECTS(cuda::is_available(), "the GPU table functions need a GPU");
}

std::vector<DeviceColumn> device_columns(const TableView& t) {
  std::vector<DeviceColumn> cols;
  for (const ColumnView& c : t.columns) cols.push_back(detail::to_device_column(c));
  return cols;
}

/// What the host learns after the counting pass.
struct Sizes {
  std::vector<std::uint32_t> starts;              // parts + 1: partition p is [starts[p], [p+1])
  std::vector<std::vector<std::uint64_t>> chars;  // per column (STRING only): chars[c][p] is the
                                                  // global position of partition p's first char
};

/// Pass 1 and its scan: each row's partition in `pid`; `hist[tl.at(t, p)]` is where tile t's
/// first row of partition p goes within partition p, `starts[p]` where partition p starts
/// (starts[parts] = rows).
template <typename PidT>
struct Counted {
  using Pid = PidT;
  Tiling tl;
  std::unique_ptr<Buffer> pid;
  std::unique_ptr<Buffer> hist;
  std::unique_ptr<Buffer> starts;
};

/// The scan of pass 1 (count_kernels.cuh): `counts` (Tiling::at) become the tiles' cursors
/// within their partitions, `starts` (parts + 1) the partition starts.
void scan_counts(const Tiling& tl, std::uint32_t* counts, std::uint32_t* starts, BufferResource& br,
                 Stream stream) {
  const std::size_t per = scan_tiles(tl);
  const std::size_t chunks = (tl.tiles + per - 1) / per;
  SPILLWAY_EXPECTS(chunks <= 65535, "too many rows for one GPU partitioning call");
  auto sums =
      br.allocate(MemoryType::DEVICE,
                  std::max<std::size_t>(1, chunks * tl.parts) * sizeof(std::uint32_t), stream);
  const unsigned threads = scan_block(tl);
  const dim3 grid(detail::blocks_for(tl.parts, threads), static_cast<unsigned>(chunks));
  if (chunks > 0) {
    chunk_sums_kernel<<<grid, threads, 0, raw(stream)>>>(counts, tl, per, as<std::uint32_t>(*sums));
    check_launch();
  }
  chunk_scan_kernel<<<tl.parts + 1, block_threads, 0, raw(stream)>>>(as<std::uint32_t>(*sums), tl,
                                                                     chunks, starts);
  check_launch();
  exclusive_sum(starts, tl.parts + 1, br, stream);
  if (chunks > 0) {
    cursors_kernel<<<grid, threads, 0, raw(stream)>>>(counts, tl, per,
                                                      as<const std::uint32_t>(*sums));
    check_launch();
  }
}

/// The widest fixed-width column of `t` among [first, last) (0: none).
std::size_t max_width(const TableView& t, std::size_t first, std::size_t last) {
  std::size_t w = 0;
  for (std::size_t c = first; c < last; ++c) {
    if (is_fixed_width(t.columns[c].type)) w = std::max(w, size_of(t.columns[c].type));
  }
  return w;
}

/// Whether the wide pass 3 stages its columns (staged_scatter_kernel) for columns up to
/// `max_width` bytes: cursors in shared memory and a tile's values within staged_max_bytes.
bool stages(const Tiling& tl, std::size_t max_width) {
  return tl.shared_counts() &&
         staged_bytes(tl, std::max<std::size_t>(1, max_width), 0) <= staged_max_bytes();
}

/// Whether this device runs staged_scatter_kernel in clusters (Tiling::split): thread block
/// clusters (compute capability 9.0 on) and the kernel built for them.
inline bool split_tiles_available() {
  int device = 0;
  int major = 0;
  SPILLWAY_CUDA_TRY(cudaGetDevice(&device));
  SPILLWAY_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return false;
  cudaFuncAttributes attributes{};
  SPILLWAY_CUDA_TRY(
      cudaFuncGetAttributes(&attributes, &staged_scatter_kernel<std::uint16_t, true, true, true>));
  return attributes.binaryVersion >= 90;
}

/// The tiling of `rows` rows into `parts` partitions, the widest fixed-width column `width`
/// bytes: a tile split over a cluster of blocks (Tiling::split) where one block stages no tile
/// of more than tile_partition_rows rows a partition, or none at all, and a split one does.
/// (Split tiles stage through distributed shared memory, which costs: at 2048 partitions of
/// 4-byte columns, 32 rows a partition in split tiles lost to 16 in one block's.)
inline Tiling tiling_for(std::size_t rows, std::size_t parts, std::size_t width) {
  Tiling one(rows, parts, width);
  if (parts < wide_partitions || parts > shared_count_partitions) return one;
  Tiling split(rows, parts, width, max_split);
  if (!stages(split, width) || !split_tiles_available()) return one;
  const bool short_runs = tile_rows_per_partition(parts, width) == tile_partition_rows &&
                          split.tile_rows > one.tile_rows;
  return short_runs || !stages(one, width) ? split : one;
}

/// Bytes of a row of `t` in its fixed-width values and STRING offsets (a lower bound of its
/// size: the characters and validity bits left out).
inline std::size_t row_bytes(const TableView& t) {
  std::size_t bytes = 0;
  for (const ColumnView& c : t.columns) {
    bytes += is_fixed_width(c.type) ? size_of(c.type) : sizeof(std::int32_t);
  }
  return bytes;
}

template <typename PidT>
Counted<PidT> count_rows(const TableView& table, std::span<const std::size_t> keys,
                         std::size_t parts, std::uint32_t seed, BufferResource& br, Stream stream) {
  const std::size_t rows = table.num_rows();
  Counted<PidT> out{tiling_for(rows, parts, max_width(table, 0, table.num_columns())), nullptr,
                    nullptr, nullptr};
  const Tiling& tl = out.tl;
  std::vector<DeviceColumn> key_cols;
  for (std::size_t k : keys) key_cols.push_back(detail::to_device_column(table.columns[k]));
  auto d_keys = detail::to_device(key_cols, br, stream);

  out.pid = br.allocate(MemoryType::DEVICE, rows * sizeof(PidT), stream);
  out.hist = br.allocate(MemoryType::DEVICE, tl.counts() * sizeof(std::uint32_t), stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(out.hist->data(), 0, out.hist->size(), raw(stream)));
  SPILLWAY_EXPECTS(tl.tiles <= 0x7FFFFFFFU, "too many rows for one GPU partitioning call");
  const auto blocks = static_cast<unsigned>(tl.tiles);
  if (tl.tiles > 0) {
    const std::size_t count_smem = tl.shared_counts() ? parts * sizeof(std::uint32_t) : 0;
    const ColumnView& k0 = table.columns[keys[0]];
    const bool fixed_key = keys.size() == 1 && !k0.nullable() && k0.type != TypeId::STRING &&
                           (size_of(k0.type) == 4 || size_of(k0.type) == 8) &&
                           reinterpret_cast<std::uintptr_t>(k0.data) % 16 == 0;
    if (fixed_key) {
      spillway::detail::dispatch_fixed(k0.type, [&]<typename T>() {
        if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
          count_fixed_kernel<T, PidT><<<blocks, block_threads, count_smem, raw(stream)>>>(
              static_cast<const T*>(k0.data), seed, tl, as<PidT>(*out.pid),
              as<std::uint32_t>(*out.hist));
        }
      });
    } else {
      count_kernel<PidT><<<blocks, block_threads, count_smem, raw(stream)>>>(
          as<const DeviceColumn>(*d_keys), static_cast<std::uint32_t>(keys.size()), seed, tl,
          as<PidT>(*out.pid), as<std::uint32_t>(*out.hist));
    }
    check_launch();
  }
  out.starts = br.allocate(MemoryType::DEVICE, (parts + 1) * sizeof(std::uint32_t), stream);
  scan_counts(tl, as<std::uint32_t>(*out.hist), as<std::uint32_t>(*out.starts), br, stream);
  return out;
}

/// Pass 3 for fixed-width columns and masks: writes columns `cols[0, ncols)` to `dest`
/// (dest[c * parts + p]). `cursors` are the scan's; the sorting kernel advances them where
/// place_advances(), so each call of it needs its own copy then (advances()). `wide_split`:
/// the warp split takes up to plan_split_partitions partitions (PartitionPlan, which launches
/// once per column group), not split_partitions.
template <typename PidT>
bool advances(const Counted<PidT>& counted, bool wide_split) {
  return counted.tl.parts > (wide_split ? plan_split_partitions : split_partitions) &&
         place_advances(counted.tl);
}

/// Launches place_kernel on `tiles` tiles from `first_tile` (its shared memory is past the
/// static 48 KiB with its cursors).
template <typename PidT, typename PosT>
void launch_place(const Counted<PidT>& counted, std::size_t first_tile, std::size_t tiles,
                  std::uint32_t* cursors, PosT* pos, const DeviceColumn* cols, std::size_t ncols,
                  const DeviceDests* dests, Stream stream,
                  const std::uint32_t* tile_offsets = nullptr) {
  const Tiling& tl = counted.tl;
  if (tiles == 0) return;
  const std::size_t smem = place_shared_bytes(tl, !std::is_void_v<PosT>, ncols);
  auto* kernel = &place_kernel<PidT, PosT>;
  SPILLWAY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(tiles), block_threads, smem, raw(stream)>>>(
      as<const PidT>(*counted.pid), tl, first_tile, cursors,
      as<const std::uint32_t>(*counted.starts), tile_offsets, pos, cols,
      static_cast<std::uint32_t>(ncols), dests ? dests->dest : nullptr,
      dests ? dests->data : nullptr);
  check_launch();
}

/// The tiles' offsets for staged_scatter_kernel (`cursors` as the scan left them).
template <typename PidT>
std::unique_ptr<Buffer> tile_offsets(const Counted<PidT>& counted, const std::uint32_t* cursors,
                                     BufferResource& br, Stream stream) {
  const Tiling& tl = counted.tl;
  auto out = br.allocate(MemoryType::DEVICE,
                         std::max<std::size_t>(1, tl.counts()) * sizeof(std::uint32_t), stream);
  if (tl.tiles > 0) {
    tile_offsets_kernel<<<static_cast<unsigned>(tl.tiles), block_threads, 0, raw(stream)>>>(
        cursors, as<const std::uint32_t>(*counted.starts), tl, as<std::uint32_t>(*out));
    check_launch();
  }
  return out;
}

/// staged_scatter_kernel for `contiguous` destinations, with `labels`.
template <typename PidT, bool Split>
auto* staged_kernel(bool contiguous, bool labels) {
  return contiguous ? (labels ? &staged_scatter_kernel<PidT, true, true, Split>
                              : &staged_scatter_kernel<PidT, true, false, Split>)
                    : (labels ? &staged_scatter_kernel<PidT, false, true, Split>
                              : &staged_scatter_kernel<PidT, false, false, Split>);
}

/// Launches staged_scatter_kernel on `tiles` tiles from `first_tile`: `rank` from
/// place_kernel with `offsets` (rank[0] the first tile's first row's), a cluster of
/// Tiling::split blocks a tile's column.
template <typename PidT>
void staged_scatter(const Counted<PidT>& counted, const std::uint32_t* cursors,
                    const TileRank* rank, const std::uint32_t* offsets, std::size_t first_tile,
                    std::size_t tiles, const DeviceColumn* cols, std::size_t ncols,
                    std::size_t max_width, const Dest* dest, bool contiguous, Stream stream) {
  if (tiles == 0 || ncols == 0) return;
  const Tiling& tl = counted.tl;
  const std::size_t width = std::max<std::size_t>(1, max_width);
  const bool labels = staged_bytes(tl, width, sizeof(PidT)) <= staged_max_bytes();
  const std::size_t smem = staged_bytes(tl, width, labels ? sizeof(PidT) : 0);
  SPILLWAY_EXPECTS(tiles * ncols * tl.split <= std::numeric_limits<int>::max(),
                   "gpu partitioning: " + std::to_string(tiles) + " tiles of " +
                       std::to_string(ncols) + " columns are more blocks than one launch takes");
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(tiles * ncols * tl.split));
  config.blockDim = dim3(staged_threads);
  config.dynamicSmemBytes = smem;
  config.stream = raw(stream);
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = tl.split;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  if (tl.split > 1) {
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  const auto launch = [&](auto* kernel) {
    SPILLWAY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
    SPILLWAY_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, as<const PidT>(*counted.pid), rank,
                                         cursors, as<const std::uint32_t>(*counted.starts), offsets,
                                         tl, first_tile, cols, static_cast<std::uint32_t>(ncols),
                                         dest));
  };
  if (tl.split > 1) {
    launch(staged_kernel<PidT, true>(contiguous, labels));
  } else {
    launch(staged_kernel<PidT, false>(contiguous, labels));
  }
}

/// Pass 3 of many partitions (wide_partitions), for rows [row0, row0 + rows): scatters
/// columns `cols[0, ncols)` one at a time from each row's place `pos[row - row0]`.
/// `contiguous`: each column's partitions follow each other in `dest` (scatter_kernel).
template <typename PidT>
void scatter_rows(const Counted<PidT>& counted, const std::uint32_t* pos, std::size_t row0,
                  std::size_t rows, const DeviceColumn* cols, std::size_t ncols, const Dest* dest,
                  bool contiguous, Stream stream) {
  if (rows == 0 || ncols == 0) return;
  const dim3 grid(detail::blocks_for(rows, block_threads * scatter_items),
                  static_cast<unsigned>(ncols));
  auto* kernel = contiguous ? &scatter_kernel<PidT, true> : &scatter_kernel<PidT, false>;
  kernel<<<grid, block_threads, 0, raw(stream)>>>(as<const PidT>(*counted.pid), pos,
                                                  as<const std::uint32_t>(*counted.starts), row0,
                                                  rows, cols, counted.tl.parts, dest);
  check_launch();
}

/// The bytes of a row's place in the wide pass 3: its rank in its tile (staged) or its place.
inline std::size_t place_width(bool staged) {
  return staged ? sizeof(TileRank) : sizeof(std::uint32_t);
}

/// The places of the rows of `tiles` tiles from `first_tile` into `pos` (pos[0] the first
/// tile's first row's): with `offsets` (tile_offsets) each row's rank in its tile, for
/// staged_scatter, otherwise its place, for scatter_rows.
template <typename PidT>
void find_places(const Counted<PidT>& counted, std::size_t first_tile, std::size_t tiles,
                 std::uint32_t* cursors, Buffer& pos, Buffer* offsets, Stream stream) {
  if (offsets != nullptr) {
    launch_place<PidT, TileRank>(counted, first_tile, tiles, cursors, as<TileRank>(pos), nullptr, 0,
                                 nullptr, stream, as<const std::uint32_t>(*offsets));
  } else {
    launch_place<PidT, std::uint32_t>(counted, first_tile, tiles, cursors, as<std::uint32_t>(pos),
                                      nullptr, 0, nullptr, stream);
  }
}

/// Pass 3 of many partitions for `tiles` tiles from `first_tile`, their places in `pos`
/// (find_places with `offsets` or without): writes columns `cols[0, ncols)` to `dest`.
/// `contiguous`: each column's partitions follow each other in `dest` (scatter_kernel).
template <typename PidT>
void scatter_places(const Counted<PidT>& counted, const std::uint32_t* cursors, Buffer& pos,
                    Buffer* offsets, std::size_t first_tile, std::size_t tiles,
                    const DeviceColumn* cols, std::size_t ncols, std::size_t max_width,
                    const Dest* dest, bool contiguous, Stream stream) {
  const Tiling& tl = counted.tl;
  if (offsets != nullptr) {
    staged_scatter(counted, cursors, as<const TileRank>(pos), as<const std::uint32_t>(*offsets),
                   first_tile, tiles, cols, ncols, max_width, dest, contiguous, stream);
  } else {
    const std::size_t row0 = first_tile * tl.tile_rows;
    scatter_rows(counted, as<const std::uint32_t>(pos), row0,
                 std::min(tl.rows, (first_tile + tiles) * tl.tile_rows) - row0, cols, ncols, dest,
                 contiguous, stream);
  }
}

/// The chunks of the wide pass 3 (PlaceWide) for tiling `tl` of a table of `row_bytes` a row
/// (row_bytes()): the fewest, up to wide_chunks, whose places' scratch (one chunk's), with the
/// partition ids and the tiles' counts and (staged) offsets, stays within wide_scratch_share of
/// the table. Fewer chunks find more tiles' places at once (more blocks in flight) and more of
/// them while the host lays out the outputs.
inline std::size_t place_chunks(const Tiling& tl, std::size_t pid_width, std::size_t row_bytes,
                                bool staged) {
  const double rows = static_cast<double>(tl.rows);
  const double budget = wide_scratch_share * rows * static_cast<double>(row_bytes);
  const double fixed = rows * static_cast<double>(pid_width) +
                       static_cast<double>(tl.counts() * sizeof(std::uint32_t)) * (staged ? 2 : 1);
  const double places = rows * static_cast<double>(place_width(staged));
  std::size_t chunks = 1;
  while (chunks < wide_chunks && fixed + places / static_cast<double>(chunks) > budget) chunks *= 2;
  return chunks;
}

/// Pass 3 of many partitions: the rows' places chunk by chunk (place_chunks), each chunk's
/// columns scattered before the next chunk's places are found. The first chunk's places need
/// no destinations, so the constructor queues them: they run while the host lays out the
/// outputs (at 1024 partitions ~0.3 ms, with the GPU otherwise idle).
template <typename PidT>
class PlaceWide {
 public:
  /// `row_bytes`: the table's (row_bytes()).
  PlaceWide(const Counted<PidT>& counted, std::uint32_t* cursors, std::size_t max_width,
            std::size_t row_bytes, BufferResource& br, Stream stream)
      : counted_{counted}, cursors_{cursors}, max_width_{max_width}, stream_{stream} {
    const Tiling& tl = counted.tl;
    if (tl.tiles == 0) return;
    const bool staged = stages(tl, max_width);
    const std::size_t chunks = place_chunks(tl, sizeof(PidT), row_bytes, staged);
    per_ = (tl.tiles + chunks - 1) / chunks;
    if (staged) offsets_ = tile_offsets(counted, cursors, br, stream);
    pos_ = br.allocate(MemoryType::DEVICE,
                       std::min(tl.rows, per_ * tl.tile_rows) * place_width(staged), stream);
    find_places_of(0);
  }

  /// Writes columns `cols[0, ncols)` to `dest`. `contiguous`: each column's partitions follow
  /// each other in `dest` (scatter_kernel).
  void scatter(const DeviceColumn* cols, std::size_t ncols, const Dest* dest, bool contiguous) {
    const Tiling& tl = counted_.tl;
    for (std::size_t t0 = 0; t0 < tl.tiles; t0 += per_) {
      if (t0 > 0) find_places_of(t0);
      scatter_places(counted_, cursors_, *pos_, offsets_.get(), t0, std::min(per_, tl.tiles - t0),
                     cols, ncols, max_width_, dest, contiguous, stream_);
    }
  }

 private:
  void find_places_of(std::size_t t0) {
    find_places(counted_, t0, std::min(per_, counted_.tl.tiles - t0), cursors_, *pos_,
                offsets_.get(), stream_);
  }

  const Counted<PidT>& counted_;
  std::uint32_t* cursors_;
  std::size_t max_width_;
  Stream stream_;
  std::size_t per_ = 0;              // tiles a chunk
  std::unique_ptr<Buffer> offsets_;  // staged: the tiles' offsets
  std::unique_ptr<Buffer> pos_;
};

template <typename PidT>
void place_rows(const Counted<PidT>& counted, std::uint32_t* cursors, const DeviceColumn* cols,
                std::size_t ncols, const DeviceDests& dests, Stream stream,
                bool wide_split = false) {
  const Dest* dest = dests.dest;
  const Tiling& tl = counted.tl;
  const auto blocks = static_cast<unsigned>(tl.tiles);
  const auto* pid = as<const PidT>(*counted.pid);
  const auto n = static_cast<std::uint32_t>(ncols);
  if (tl.parts <= split_partitions) {
    split_place_kernel<PidT, split_partitions>
        <<<blocks, block_threads, 0, raw(stream)>>>(pid, tl, cursors, cols, n, dest);
  } else if (tl.parts <= (wide_split ? plan_split_partitions : split_partitions)) {
    split_place_kernel<PidT, plan_split_partitions>
        <<<blocks, block_threads, 0, raw(stream)>>>(pid, tl, cursors, cols, n, dest);
  } else {
    launch_place<PidT, void>(counted, 0, tl.tiles, cursors, nullptr, cols, ncols, &dests, stream);
    return;
  }
  check_launch();
}

}  // namespace

}  // namespace spillway::gpu
