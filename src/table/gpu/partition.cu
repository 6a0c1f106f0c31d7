// Hash partitioning on the GPU: hash_rows, hash_partition and partition_and_pack.
//
// Passes over the rows, all on the caller's stream:
//  1. count: each block owns a tile of consecutive rows; it hashes them, stores each row's
//     partition (2 bytes; 4 beyond 65535 partitions) and counts its rows per partition (one key
//     column of 4- or 8-byte values without nulls, the usual case, in 16-byte vectors). The
//     counts are laid out tile by tile (Tiling::at), each block writing its own as one run; a
//     scan down the tiles of each partition (in chunks of tiles, each read and write a run over
//     partitions) turns them into each tile's cursors: where its first row of each partition
//     goes, relative to the partition's start; the partition sizes' exclusive sum gives the
//     starts. (Laid out partition by partition, each count was a word of its own sector, read
//     and written several times: at 4096 partitions several times the table's bytes.)
//  2. the partition sizes (and, for STRING columns, their character counts) go to the host,
//     which lays out and allocates the outputs.
//  3. place: each block takes its tile's cursors into shared memory (up to 4096 partitions),
//     walks its tile again in sub-tiles of 2048 rows, sorts the sub-tile's
//     rows by partition with a stable block radix sort (so rows keep their input order within
//     a partition, exactly as on the CPU), loads a group of columns' sub-tiles into shared
//     memory (cp.async) and writes them out in sorted order: consecutive threads write
//     consecutive rows of one partition, so the stores are coalesced. From 512 partitions
//     (wide_partitions) the sorted sub-tiles' runs are too short: the sort runs once to give
//     each row its rank in its tile's partitioned order, and then each column goes through
//     shared memory a tile at a time in that order (staged_scatter_kernel; where a tile does
//     not fit, each row straight to its place, scatter_kernel).
// STRING columns take two more kernels: each row's position in partitioned order, a scan of
// the lengths in that order, and a copy of the characters. PartitionPlan runs pass 1 once and
// pass 3 once per group of columns (with up to 4 partitions by ranking rows within warps, which
// has no sort to repeat per call).
#include <spillway/table/gpu.hpp>

#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include "core/detail/nvtx.hpp"

#include "core/detail/cuda_try.hpp"
#include "table/detail/arguments.hpp"
#include "table/detail/pack_format.hpp"
#include "table/gpu/detail/batched_copy.cuh"
#include "table/gpu/detail/count_kernels.cuh"
#include "table/gpu/detail/device_column.cuh"
#include "table/gpu/detail/packed_outputs.hpp"
#include "table/gpu/detail/place_kernels.cuh"

#include <cuda_pipeline.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <bit>
#include <limits>
#include <variant>

namespace spillway::gpu {

namespace {

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
  const std::size_t chunks = (tl.tiles + scan_tiles - 1) / scan_tiles;
  SPILLWAY_EXPECTS(chunks <= 65535, "too many rows for one GPU partitioning call");
  auto sums =
      br.allocate(MemoryType::DEVICE,
                  std::max<std::size_t>(1, chunks * tl.parts) * sizeof(std::uint32_t), stream);
  const dim3 grid(detail::blocks_for(tl.parts, block_threads), static_cast<unsigned>(chunks));
  if (chunks > 0) {
    chunk_sums_kernel<<<grid, block_threads, 0, raw(stream)>>>(counts, tl,
                                                               as<std::uint32_t>(*sums));
    check_launch();
  }
  chunk_scan_kernel<<<detail::blocks_for(tl.parts + 1, block_threads), block_threads, 0,
                      raw(stream)>>>(as<std::uint32_t>(*sums), tl, chunks, starts);
  check_launch();
  exclusive_sum(starts, tl.parts + 1, br, stream);
  if (chunks > 0) {
    cursors_kernel<<<grid, block_threads, 0, raw(stream)>>>(counts, tl,
                                                            as<const std::uint32_t>(*sums));
    check_launch();
  }
}

template <typename PidT>
Counted<PidT> count_rows(const TableView& table, std::span<const std::size_t> keys,
                         std::size_t parts, std::uint32_t seed, BufferResource& br, Stream stream) {
  const std::size_t rows = table.num_rows();
  Counted<PidT> out{Tiling(rows, parts), nullptr, nullptr, nullptr};
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
template <typename PidT, bool Positions>
void launch_place(const Counted<PidT>& counted, std::size_t first_tile, std::size_t tiles,
                  std::uint32_t* cursors, std::uint32_t* pos, const DeviceColumn* cols,
                  std::size_t ncols, const Dest* dest, Stream stream,
                  const std::uint32_t* tile_offsets = nullptr) {
  const Tiling& tl = counted.tl;
  if (tiles == 0) return;
  const std::size_t smem = place_cursor_bytes(tl);
  auto* kernel = &place_kernel<PidT, Positions>;
  SPILLWAY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(tiles), block_threads, smem, raw(stream)>>>(
      as<const PidT>(*counted.pid), tl, first_tile, cursors,
      as<const std::uint32_t>(*counted.starts), tile_offsets, pos, cols,
      static_cast<std::uint32_t>(ncols), dest);
  check_launch();
}

/// Whether the wide pass 3 stages its columns (staged_scatter_kernel) for columns up to
/// `max_width` bytes: cursors in shared memory and a tile's values within staged_max_bytes.
bool stages(const Tiling& tl, std::size_t max_width) {
  return tl.shared_counts() &&
         staged_bytes(tl, std::max<std::size_t>(1, max_width)) <= staged_max_bytes;
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

/// Launches staged_scatter_kernel on `tiles` tiles from `first_tile`: `rank` from
/// place_kernel with `offsets` (rank[0] the first tile's first row's).
template <typename PidT>
void staged_scatter(const Counted<PidT>& counted, const std::uint32_t* cursors,
                    const std::uint32_t* rank, const std::uint32_t* offsets, std::size_t first_tile,
                    std::size_t tiles, const DeviceColumn* cols, std::size_t ncols,
                    std::size_t max_width, const Dest* dest, bool contiguous, Stream stream) {
  if (tiles == 0 || ncols == 0) return;
  const Tiling& tl = counted.tl;
  const std::size_t smem = staged_bytes(tl, std::max<std::size_t>(1, max_width));
  auto* kernel =
      contiguous ? &staged_scatter_kernel<PidT, true> : &staged_scatter_kernel<PidT, false>;
  SPILLWAY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(ncols));
  kernel<<<grid, staged_threads, smem, raw(stream)>>>(as<const PidT>(*counted.pid), rank, cursors,
                                                      as<const std::uint32_t>(*counted.starts),
                                                      offsets, tl, first_tile, cols, dest);
  check_launch();
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

/// Pass 3 of many partitions: the rows' places chunk by chunk (wide_chunks), each chunk's
/// columns scattered before the next chunk's places are found.
template <typename PidT>
void place_wide(const Counted<PidT>& counted, std::uint32_t* cursors, const DeviceColumn* cols,
                std::size_t ncols, std::size_t max_width, const Dest* dest, bool contiguous,
                BufferResource& br, Stream stream) {
  const Tiling& tl = counted.tl;
  const std::size_t per = (tl.tiles + wide_chunks - 1) / wide_chunks;
  if (per == 0) return;
  const bool staged = stages(tl, max_width);
  std::unique_ptr<Buffer> offsets;
  if (staged) offsets = tile_offsets(counted, cursors, br, stream);
  auto pos = br.allocate(MemoryType::DEVICE,
                         std::min(tl.rows, per * tl.tile_rows) * sizeof(std::uint32_t), stream);
  for (std::size_t t0 = 0; t0 < tl.tiles; t0 += per) {
    const std::size_t n = std::min(per, tl.tiles - t0);
    launch_place<PidT, true>(counted, t0, n, cursors, as<std::uint32_t>(*pos), nullptr, 0, nullptr,
                             stream, staged ? as<const std::uint32_t>(*offsets) : nullptr);
    const std::size_t row0 = t0 * tl.tile_rows;
    if (staged) {
      staged_scatter(counted, cursors, as<const std::uint32_t>(*pos),
                     as<const std::uint32_t>(*offsets), t0, n, cols, ncols, max_width, dest,
                     contiguous, stream);
    } else {
      scatter_rows(counted, as<const std::uint32_t>(*pos), row0,
                   std::min(tl.rows, (t0 + n) * tl.tile_rows) - row0, cols, ncols, dest, contiguous,
                   stream);
    }
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

template <typename PidT>
void place_rows(const Counted<PidT>& counted, std::uint32_t* cursors, const DeviceColumn* cols,
                std::size_t ncols, const Dest* dest, Stream stream, bool wide_split = false) {
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
    launch_place<PidT, false>(counted, 0, tl.tiles, cursors, nullptr, cols, ncols, dest, stream);
    return;
  }
  check_launch();
}

/// Partitions `table` and writes every row to `make_dest(sizes)`'s destinations:
/// make_dest returns dest[c * parts + p] and the ranges to zero before the scatter.
/// `contiguous`: each column's partitions follow each other (see scatter_kernel).
template <typename PidT, typename MakeDest>
void partition_rows(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                    std::uint32_t seed, BufferResource& br, Stream stream, bool contiguous,
                    MakeDest&& make_dest) {
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  auto counted = count_rows<PidT>(table, keys, parts, seed, br, stream);
  const Tiling& tl = counted.tl;
  Buffer& hist = *counted.hist;
  Buffer& starts = *counted.starts;
  Buffer& pid = *counted.pid;
  auto d_cols = detail::to_device(device_columns(table), br, stream);

  // STRING columns: each row's position, then the character positions in partitioned order.
  Sizes sizes{std::vector<std::uint32_t>(parts + 1),
              std::vector<std::vector<std::uint64_t>>(ncols)};
  std::unique_ptr<Buffer> pos;
  std::vector<std::unique_ptr<Buffer>> char_pos(ncols);
  std::vector<std::unique_ptr<Buffer>> char_starts(ncols);
  for (std::size_t c = 0; c < ncols; ++c) {
    if (table.columns[c].type != TypeId::STRING) continue;
    if (!pos) {
      pos = br.allocate(MemoryType::DEVICE, rows * sizeof(std::uint32_t), stream);
      if (tl.tiles > 0) {  // the place pass below needs the cursors again
        std::unique_ptr<Buffer> copy;
        if (place_advances(tl)) {
          copy = br.allocate(MemoryType::DEVICE, hist.size(), stream);
          cuda::memcpy_async(copy->data(), hist.data(), hist.size(), stream);
        }
        launch_place<PidT, true>(counted, 0, tl.tiles, as<std::uint32_t>(copy ? *copy : hist),
                                 as<std::uint32_t>(*pos), nullptr, 0, nullptr, stream);
      }
    }
    char_pos[c] = br.allocate(MemoryType::DEVICE, (rows + 1) * sizeof(std::uint64_t), stream);
    lengths_kernel<<<detail::blocks_for(rows + 1, block_threads), block_threads, 0, raw(stream)>>>(
        detail::to_device_column(table.columns[c]), rows, as<const std::uint32_t>(*pos),
        as<std::uint64_t>(*char_pos[c]));
    check_launch();
    exclusive_sum(as<std::uint64_t>(*char_pos[c]), rows + 1, br, stream);
    char_starts[c] = br.allocate(MemoryType::DEVICE, (parts + 1) * sizeof(std::uint64_t), stream);
    gather_kernel<<<detail::blocks_for(parts + 1, block_threads), block_threads, 0, raw(stream)>>>(
        as<const std::uint64_t>(*char_pos[c]), as<const std::uint32_t>(starts),
        static_cast<std::uint32_t>(parts), as<std::uint64_t>(*char_starts[c]));
    check_launch();
    sizes.chars[c].resize(parts + 1);
    cuda::memcpy_async(sizes.chars[c].data(), char_starts[c]->data(), char_starts[c]->size(),
                       stream);
  }
  detail::to_host(sizes.starts, starts.data(), stream);  // synchronizes

  auto [dest, zero] = make_dest(sizes);
  detail::copy_ranges(std::span<const detail::CopyRange>(zero), br, stream);
  if (tl.tiles == 0) return;
  auto d_dest = detail::to_device(dest, br, stream);
  const auto* cols = as<const DeviceColumn>(*d_cols);
  const auto* d = as<const Dest>(*d_dest);
  if (parts < wide_partitions) {
    place_rows(counted, as<std::uint32_t>(hist), cols, ncols, d, stream);
  } else if (pos) {  // found for the STRING columns already
    scatter_rows(counted, as<const std::uint32_t>(*pos), 0, rows, cols, ncols, d, contiguous,
                 stream);
  } else {
    place_wide(counted, as<std::uint32_t>(hist), cols, ncols, max_width(table, 0, ncols), d,
               contiguous, br, stream);
  }
  for (std::size_t c = 0; c < ncols; ++c) {
    if (table.columns[c].type != TypeId::STRING) continue;
    string_kernel<PidT><<<detail::blocks_for(rows, block_threads), block_threads, 0, raw(stream)>>>(
        detail::to_device_column(table.columns[c]), c, rows, static_cast<std::uint32_t>(parts),
        as<const PidT>(pid), as<const std::uint32_t>(*pos), as<const std::uint32_t>(starts),
        as<const std::uint64_t>(*char_pos[c]), as<const Dest>(*d_dest));
    check_launch();
  }
}

template <typename MakeDest>
void partition_any(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                   std::uint32_t seed, BufferResource& br, Stream stream, bool contiguous,
                   MakeDest&& make_dest) {
  check_args(table, keys, parts);
  if (parts <= 0xFFFF) {
    partition_rows<std::uint16_t>(table, keys, parts, seed, br, stream, contiguous, make_dest);
  } else {
    partition_rows<std::uint32_t>(table, keys, parts, seed, br, stream, contiguous, make_dest);
  }
}

}  // namespace

std::unique_ptr<Buffer> hash_rows(const TableView& keys, std::uint32_t seed, BufferResource& br,
                                  Stream stream) {
  SPILLWAY_EXPECTS(cuda::is_available(), "the GPU table functions need a GPU");
  const std::size_t rows = keys.num_rows();
  auto out = br.allocate(MemoryType::DEVICE, rows * sizeof(std::uint32_t), stream);
  if (rows == 0) return out;
  auto d_keys = detail::to_device(device_columns(keys), br, stream);
  hash_kernel<<<detail::blocks_for(rows, block_threads), block_threads, 0, raw(stream)>>>(
      as<const DeviceColumn>(*d_keys), static_cast<std::uint32_t>(keys.num_columns()), seed, rows,
      as<std::uint32_t>(*out));
  check_launch();
  return out;
}

std::vector<PackedData> partition_and_pack(const TableView& table,
                                           std::span<const std::size_t> keys,
                                           std::size_t num_partitions, BufferResource& br,
                                           Stream stream, std::uint32_t seed) {
  SPILLWAY_NVTX_RANGE("partition and pack");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "partition_and_pack");
  const MemoryStep step("packing (gpu::partition_and_pack)");
  const std::size_t ncols = table.num_columns();
  std::vector<PackedData> out(num_partitions);
  detail::PackedOutputs outputs(br, stream);  // after `out`: unmaps before the payloads go
  partition_any(
      table, keys, num_partitions, seed, br, stream, /*contiguous=*/false, [&](const Sizes& sizes) {
        std::vector<Dest> dest(ncols * num_partitions);
        std::vector<detail::CopyRange> zero;
        std::vector<std::size_t> chars(ncols, 0);
        for (std::size_t p = 0; p < num_partitions; ++p) {
          for (std::size_t c = 0; c < ncols; ++c) {
            if (!sizes.chars[c].empty()) chars[c] = sizes.chars[c][p + 1] - sizes.chars[c][p];
            SPILLWAY_EXPECTS(chars[c] <= static_cast<std::size_t>(INT32_MAX),
                             "partition " + std::to_string(p) + " of string column " +
                                 std::to_string(c) +
                                 " has more characters than int32 offsets allow");
          }
          const auto layout =
              spillway::detail::make_layout(table, sizes.starts[p + 1] - sizes.starts[p], chars);
          out[p].metadata = spillway::detail::encode(layout);
          out[p].payload = outputs.allocate(layout.payload_size);
          std::byte* base = out[p].payload->data();
          for (std::size_t c = 0; c < ncols; ++c) {
            const auto& cl = layout.columns[c];
            Dest& d = dest[c * num_partitions + p];
            d = Dest{base + cl.data.offset, nullptr, nullptr, 0, 0};
            if (cl.type == TypeId::STRING) {
              d.offsets = reinterpret_cast<std::int32_t*>(base + cl.offsets.offset);
              d.char_sub = sizes.chars[c][p];
              zero.push_back({base + cl.offsets.offset, nullptr, sizeof(std::int32_t)});
            }
            if (cl.nullable) {
              d.mask = reinterpret_cast<std::uint32_t*>(base + cl.mask.offset);
              zero.push_back({base + cl.mask.offset, nullptr, cl.mask.size});
            }
          }
        }
        return std::pair{std::move(dest), std::move(zero)};
      });
  outputs.finish();
  return out;
}

struct PartitionPlan::Impl {
  TableView table;
  BufferResource& br;
  std::variant<Counted<std::uint16_t>, Counted<std::uint32_t>> counted;
  std::unique_ptr<Buffer> columns;  // the table's DeviceColumns
  std::vector<std::size_t> offsets;
  // Many partitions: each row's place, or its rank in its tile with the tiles' offsets
  // (staged), found by the first place().
  std::unique_ptr<Buffer> pos;
  std::unique_ptr<Buffer> tile_offsets;
};

PartitionPlan::PartitionPlan(const TableView& table, std::span<const std::size_t> keys,
                             std::size_t num_partitions, BufferResource& br, Stream stream,
                             std::uint32_t seed) {
  check_args(table, keys, num_partitions);
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    const ColumnView& col = table.columns[c];
    SPILLWAY_EXPECTS(is_fixed_width(col.type) && !col.nullable(),
                     "PartitionPlan: column " + std::to_string(c) +
                         " is not fixed-width without a mask (use partition_and_pack)");
  }
  using Counts = decltype(Impl::counted);
  Counts counted =
      num_partitions <= 0xFFFF
          ? Counts{count_rows<std::uint16_t>(table, keys, num_partitions, seed, br, stream)}
          : Counts{count_rows<std::uint32_t>(table, keys, num_partitions, seed, br, stream)};
  auto columns = detail::to_device(device_columns(table), br, stream);
  impl_.reset(new Impl{table, br, std::move(counted), std::move(columns), {}, nullptr, nullptr});
  std::visit(
      [&](auto& c) {
        std::vector<std::uint32_t> starts(num_partitions + 1);
        detail::to_host(starts, c.starts->data(), stream);  // synchronizes
        impl_->offsets.assign(starts.begin(), starts.end());
      },
      impl_->counted);
}

PartitionPlan::~PartitionPlan() = default;
PartitionPlan::PartitionPlan(PartitionPlan&&) noexcept = default;
PartitionPlan& PartitionPlan::operator=(PartitionPlan&&) noexcept = default;

const std::vector<std::size_t>& PartitionPlan::offsets() const noexcept {
  return impl_->offsets;
}

void PartitionPlan::place(std::size_t first, std::size_t last, std::span<std::byte* const> outs,
                          Stream stream) {
  Impl& s = *impl_;
  const std::size_t parts = s.offsets.size() - 1;
  SPILLWAY_EXPECTS(first <= last && last <= s.table.num_columns(),
                   "PartitionPlan::place: columns [" + std::to_string(first) + ", " +
                       std::to_string(last) + ") of " + std::to_string(s.table.num_columns()));
  SPILLWAY_EXPECTS(outs.size() == last - first,
                   "PartitionPlan::place: " + std::to_string(outs.size()) + " outputs for " +
                       std::to_string(last - first) + " columns");
  if (first == last || s.table.num_rows() == 0) return;
  std::vector<Dest> dest;
  for (std::size_t c = first; c < last; ++c) {
    const std::size_t width = size_of(s.table.columns[c].type);
    for (std::size_t p = 0; p < parts; ++p) {
      dest.push_back(Dest{outs[c - first] + s.offsets[p] * width, nullptr, nullptr, 0, 0});
    }
  }
  auto d_dest = detail::to_device(dest, s.br, stream);
  std::visit(
      [&](const auto& c) {
        const auto* cols = as<const DeviceColumn>(*s.columns) + first;
        if (parts >= wide_partitions) {  // the rows' places once, then scatters per call
          // (staged for the table's widest column, so that every call may stage)
          const std::size_t widest = max_width(s.table, 0, s.table.num_columns());
          const bool staged = stages(c.tl, widest);
          const auto* cursors = as<const std::uint32_t>(*c.hist);
          if (!s.pos) {
            if (staged) s.tile_offsets = tile_offsets(c, cursors, s.br, stream);
            s.pos = s.br.allocate(MemoryType::DEVICE, c.tl.rows * sizeof(std::uint32_t), stream);
            launch_place<typename std::decay_t<decltype(c)>::Pid, true>(
                c, 0, c.tl.tiles, as<std::uint32_t>(*c.hist), as<std::uint32_t>(*s.pos), nullptr, 0,
                nullptr, stream, staged ? as<const std::uint32_t>(*s.tile_offsets) : nullptr);
          }
          if (staged) {
            staged_scatter(c, cursors, as<const std::uint32_t>(*s.pos),
                           as<const std::uint32_t>(*s.tile_offsets), 0, c.tl.tiles, cols,
                           last - first, widest, as<const Dest>(*d_dest),
                           /*contiguous=*/true, stream);
          } else {
            scatter_rows(c, as<const std::uint32_t>(*s.pos), 0, c.tl.rows, cols, last - first,
                         as<const Dest>(*d_dest), /*contiguous=*/true, stream);
          }
          return;
        }
        // Where the place pass advances its cursors in place, each call works on a copy.
        std::unique_ptr<Buffer> copy;
        if (advances(c, /*wide_split=*/true)) {
          copy = s.br.allocate(MemoryType::DEVICE, c.hist->size(), stream);
          cuda::memcpy_async(copy->data(), c.hist->data(), c.hist->size(), stream);
        }
        place_rows(c, as<std::uint32_t>(copy ? *copy : *c.hist),
                   as<const DeviceColumn>(*s.columns) + first, last - first,
                   as<const Dest>(*d_dest), stream, /*wide_split=*/true);
      },
      s.counted);
}

PartitionedTable hash_partition(const TableView& table, std::span<const std::size_t> keys,
                                std::size_t num_partitions, BufferResource& br, Stream stream,
                                std::uint32_t seed) {
  SPILLWAY_NVTX_RANGE("partition");
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  std::vector<Column> columns;
  std::vector<std::size_t> offsets(num_partitions + 1, 0);
  partition_any(
      table, keys, num_partitions, seed, br, stream, /*contiguous=*/true, [&](const Sizes& sizes) {
        std::vector<Dest> dest(ncols * num_partitions);
        std::vector<detail::CopyRange> zero;
        for (std::size_t p = 0; p <= num_partitions; ++p) offsets[p] = sizes.starts[p];
        for (std::size_t c = 0; c < ncols; ++c) {
          const ColumnView& col = table.columns[c];
          const bool str = col.type == TypeId::STRING;
          if (str) {
            SPILLWAY_EXPECTS(
                sizes.chars[c][num_partitions] <= static_cast<std::uint64_t>(INT32_MAX),
                "string column " + std::to_string(c) +
                    " has more characters than int32 offsets allow");
          }
          auto data =
              br.allocate(MemoryType::DEVICE,
                          str ? sizes.chars[c][num_partitions] : rows * size_of(col.type), stream);
          std::unique_ptr<Buffer> off;
          std::unique_ptr<Buffer> mask;
          if (str) {
            off = br.allocate(MemoryType::DEVICE, (rows + 1) * sizeof(std::int32_t), stream);
            zero.push_back({off->data(), nullptr, sizeof(std::int32_t)});
          }
          if (col.nullable()) {  // whole words: the scatter sets bits with 32-bit atomics
            mask = br.allocate(MemoryType::DEVICE, (rows + 31) / 32 * 4, stream);
            zero.push_back({mask->data(), nullptr, mask->size()});
          }
          for (std::size_t p = 0; p < num_partitions; ++p) {
            Dest& d = dest[c * num_partitions + p];
            d = Dest{data->data() + (str ? 0 : sizes.starts[p] * size_of(col.type)),
                     str ? reinterpret_cast<std::int32_t*>(off->data()) + sizes.starts[p] : nullptr,
                     mask ? reinterpret_cast<std::uint32_t*>(mask->data()) : nullptr,
                     sizes.starts[p], 0};
          }
          columns.emplace_back(col.type, rows, std::move(data), std::move(off), std::move(mask));
        }
        return std::pair{std::move(dest), std::move(zero)};
      });
  return PartitionedTable{Table(std::move(columns), table.names), std::move(offsets)};
}

}  // namespace spillway::gpu
