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
//     a partition, exactly as on the CPU), loads a group of columns' sub-tiles and their
//     destinations into shared memory (cp.async) and writes them out in sorted order:
//     consecutive threads write consecutive rows of one partition, so the stores are
//     coalesced. From 512 partitions
//     (wide_partitions) the sorted sub-tiles' runs are too short: the sort runs once to give
//     each row its rank in its tile's partitioned order, and then each column goes through
//     shared memory a tile at a time in that order, each value's partition beside it
//     (staged_scatter_kernel; where one block stages only 8 rows a partition or no tile at all,
//     a cluster of two blocks shares the tile through distributed shared memory, Tiling::split;
//     where no tile fits, each row straight to its place, scatter_kernel). The places are found
//     in up to four chunks of tiles, as few as keep their scratch small (PlaceWide).
// The host side of the passes is in detail/partition_passes.cuh, PartitionPlan in
// partition_plan.cu. STRING columns take two more kernels: each row's position in partitioned
// order, a scan of the lengths in that order, and a copy of the characters. PartitionPlan runs pass
// 1 once and pass 3 once per group of columns (with up to 4 partitions by ranking rows within
// warps, which has no sort to repeat per call).
#include <spillway/table/gpu.hpp>

#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include "core/detail/nvtx.hpp"

#include <spillway/table/pack_format.hpp>
#include "table/gpu/detail/packed_outputs.hpp"
#include "table/gpu/detail/partition_passes.cuh"

#include <limits>
#include <optional>

namespace spillway::gpu {

namespace {

/// Partitions `table` and writes every row to the destinations of `make_dest(sizes, dest)`:
/// make_dest writes every dest[c * parts + p] and returns the ranges to zero before the
/// scatter. Then, while the GPU places the rows, `after(sizes)` runs (host work the kernels do not
/// need). `contiguous`: each column's partitions follow each other (see scatter_kernel).
template <typename PidT, typename MakeDest, typename After>
void partition_rows(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                    std::uint32_t seed, BufferResource& br, Stream stream, bool contiguous,
                    MakeDest&& make_dest, After&& after) {
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  auto counted = count_rows<PidT>(table, keys, parts, seed, br, stream);
  const Tiling& tl = counted.tl;
  Buffer& hist = *counted.hist;
  Buffer& starts = *counted.starts;
  Buffer& pid = *counted.pid;
  auto d_cols = detail::to_device(device_columns(table), br, stream);
  DestStaging staging(ncols * parts, br, stream);  // (while the GPU counts)

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
        launch_place<PidT, std::uint32_t>(counted, 0, tl.tiles,
                                          as<std::uint32_t>(copy ? *copy : hist),
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
  {
    SPILLWAY_NVTX_RANGE("partition: wait for the counts");
    detail::to_host(sizes.starts, starts.data(), stream);  // synchronizes
  }
  std::optional<PlaceWide<PidT>> wide;  // queues its first places now (see PlaceWide)
  if (tl.tiles > 0 && parts >= wide_partitions && !pos) {
    wide.emplace(counted, as<std::uint32_t>(hist), max_width(table, 0, ncols), row_bytes(table), br,
                 stream);
  }
  std::vector<detail::CopyRange> zero;
  {
    SPILLWAY_NVTX_RANGE("partition: the outputs");
    zero = make_dest(sizes, staging.dests());
  }
  detail::copy_ranges(std::span<const detail::CopyRange>(zero), br, stream);
  if (tl.tiles == 0) {
    after(sizes);
    return;
  }
  const DeviceDests d_dest = staging.upload();
  const auto* cols = as<const DeviceColumn>(*d_cols);
  const Dest* d = d_dest.dest;
  if (parts < wide_partitions) {
    place_rows(counted, as<std::uint32_t>(hist), cols, ncols, d_dest, stream);
  } else if (pos) {  // found for the STRING columns already
    scatter_rows(counted, as<const std::uint32_t>(*pos), 0, rows, cols, ncols, d, contiguous,
                 stream);
  } else {
    wide->scatter(cols, ncols, d, contiguous);
  }
  for (std::size_t c = 0; c < ncols; ++c) {
    if (table.columns[c].type != TypeId::STRING) continue;
    string_kernel<PidT><<<detail::blocks_for(rows, block_threads), block_threads, 0, raw(stream)>>>(
        detail::to_device_column(table.columns[c]), c, rows, static_cast<std::uint32_t>(parts),
        as<const PidT>(pid), as<const std::uint32_t>(*pos), as<const std::uint32_t>(starts),
        as<const std::uint64_t>(*char_pos[c]), d);
    check_launch();
  }
  SPILLWAY_NVTX_RANGE("partition: host work beside the kernels");
  after(sizes);
}

template <typename MakeDest, typename After>
void partition_any(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                   std::uint32_t seed, BufferResource& br, Stream stream, bool contiguous,
                   MakeDest&& make_dest, After&& after) {
  check_args(table, keys, parts);
  if (parts <= 0xFFFF) {
    partition_rows<std::uint16_t>(table, keys, parts, seed, br, stream, contiguous, make_dest,
                                  after);
  } else {
    partition_rows<std::uint32_t>(table, keys, parts, seed, br, stream, contiguous, make_dest,
                                  after);
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
  using spillway::detail::BufferSpan;
  const std::size_t ncols = table.num_columns();
  std::vector<PackedData> out(num_partitions);
  detail::PackedOutputs outputs(br, stream);  // after `out`: unmaps before the payloads go
  // Partition p's characters per column (STRING; 0 for the others).
  std::vector<std::size_t> strings;  // the STRING columns
  for (std::size_t c = 0; c < ncols; ++c) {
    if (table.columns[c].type == TypeId::STRING) strings.push_back(c);
  }
  std::vector<std::size_t> chars(ncols, 0);
  const auto chars_of = [&](const Sizes& sizes, std::size_t p) {
    for (const std::size_t c : strings) chars[c] = sizes.chars[c][p + 1] - sizes.chars[c][p];
    return std::span<const std::size_t>(chars);
  };
  const auto rows_of = [](const Sizes& sizes, std::size_t p) {
    return std::size_t{sizes.starts[p + 1] - sizes.starts[p]};
  };
  // Only the payloads' sizes and places here, while the GPU waits; their Buffers and metadata
  // after the kernels are queued (a PackLayout per partition here was most of the host's
  // work at 4096 partitions, with the GPU idle).
  partition_any(
      table, keys, num_partitions, seed, br, stream, /*contiguous=*/false,
      [&](const Sizes& sizes, std::span<Dest> dest) {
        std::vector<detail::CopyRange> zero;
        std::vector<std::size_t> payload(num_partitions);
        for (std::size_t p = 0; p < num_partitions; ++p) {
          const auto part_chars = chars_of(sizes, p);
          for (const std::size_t c : strings) {
            SPILLWAY_EXPECTS(part_chars[c] <= static_cast<std::size_t>(INT32_MAX),
                             "partition " + std::to_string(p) + " of string column " +
                                 std::to_string(c) +
                                 " has more characters than int32 offsets allow");
          }
          payload[p] = spillway::detail::payload_size(table, rows_of(sizes, p), part_chars);
        }
        const auto bases = [&] {
          SPILLWAY_NVTX_RANGE("partition: allocate");
          return outputs.place_all(payload);
        }();
        SPILLWAY_NVTX_RANGE("partition: destinations");
        for (std::size_t p = 0; p < num_partitions; ++p) {
          std::byte* base = bases[p];
          spillway::detail::place_buffers(
              table, rows_of(sizes, p), chars_of(sizes, p),
              [&](std::size_t c, const BufferSpan& mask, const BufferSpan& offsets,
                  const BufferSpan& data) {
                const ColumnView& col = table.columns[c];
                Dest& d = dest[c * num_partitions + p];
                d = Dest{base + data.offset, nullptr, nullptr, 0, 0};
                if (col.type == TypeId::STRING) {
                  d.offsets = reinterpret_cast<std::int32_t*>(base + offsets.offset);
                  d.char_sub = sizes.chars[c][p];
                  zero.push_back({base + offsets.offset, nullptr, sizeof(std::int32_t)});
                }
                if (col.nullable()) {
                  d.mask = reinterpret_cast<std::uint32_t*>(base + mask.offset);
                  zero.push_back({base + mask.offset, nullptr, mask.size});
                }
              });
        }
        return zero;
      },
      [&](const Sizes& sizes) {  // the buffers and metadata, which the kernels do not need
        auto payloads = outputs.take();
        for (std::size_t p = 0; p < num_partitions; ++p) {
          out[p].payload = std::move(payloads[p]);
          out[p].metadata = spillway::detail::encode(table, rows_of(sizes, p), chars_of(sizes, p));
        }
      });
  outputs.finish();
  return out;
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
      table, keys, num_partitions, seed, br, stream, /*contiguous=*/true,
      [&](const Sizes& sizes, std::span<Dest> dest) {
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
        return zero;
      },
      [](const Sizes&) {});
  return PartitionedTable{Table(std::move(columns), table.names), std::move(offsets)};
}

}  // namespace spillway::gpu
