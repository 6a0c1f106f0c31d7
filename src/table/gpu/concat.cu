// concat and unpack_and_concat on the GPU. Data and characters move with one batched copy for
// all columns and tables, string offsets with one batched rebase; each validity mask is
// gathered bit by bit (a thread per output byte finds each bit's table by binary search), as
// the tables' bits sit at arbitrary offsets of the output.
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>

#include <spillway/core/units.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include "core/detail/nvtx.hpp"

#include "core/detail/cuda_try.hpp"
#include "table/detail/arguments.hpp"
#include "table/gpu/detail/batched_copy.cuh"
#include "table/gpu/detail/device_column.cuh"

#include <algorithm>
#include <array>
#include <optional>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::raw;

/// Byte i of the output mask: bit j is row 8i + j, valid in table t (the last with
/// starts[t] <= row) per masks[t] (nullptr: all valid).
__global__ void gather_mask_kernel(const std::uint8_t* const* masks, const std::uint64_t* starts,
                                   std::size_t ntables, std::size_t rows, std::uint8_t* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= (rows + 7) / 8) return;
  unsigned v = 0;
  for (unsigned j = 0; j < 8; ++j) {
    const std::size_t row = i * 8 + j;
    if (row >= rows) break;
    const std::size_t lo = detail::last_at_or_below(starts, ntables, std::uint64_t{row});
    const std::uint8_t* m = masks[lo];
    const std::size_t r = row - starts[lo];
    if (m == nullptr || ((m[r >> 3] >> (r & 7)) & 1U) != 0) v |= 1U << j;
  }
  out[i] = static_cast<std::uint8_t>(v);
}

}  // namespace

Table concat(std::span<const TableView> tables, BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("concatenate");
  const std::size_t rows = spillway::detail::check_concat_args(tables);
  const TableView& first = tables.front();
  const std::size_t ncols = first.num_columns();
  const std::size_t ntables = tables.size();

  // Each table's character count per STRING column: its last offset, read from the device.
  std::vector<std::int32_t> chars(ncols * ntables, 0);
  bool any_strings = false;
  for (std::size_t c = 0; c < ncols; ++c) {
    if (first.columns[c].type != TypeId::STRING) continue;
    for (std::size_t t = 0; t < ntables; ++t) {
      const ColumnView& col = tables[t].columns[c];
      if (col.size == 0) continue;
      cuda::memcpy_async(&chars[c * ntables + t], col.offsets + col.size, sizeof(std::int32_t),
                         stream);
      any_strings = true;
    }
  }
  if (any_strings) cuda::stream_synchronize(stream);

  std::vector<std::uint64_t> starts(ntables, 0);
  for (std::size_t t = 1; t < ntables; ++t) starts[t] = starts[t - 1] + tables[t - 1].num_rows();
  std::unique_ptr<Buffer> d_starts;

  // The fixed-width columns' data share one allocation, each at a 256-byte boundary: an
  // allocation and a free per column cost the extraction of a shuffle's many small partitions
  // several microseconds each. (The memory goes when the last of those columns does.)
  std::vector<std::size_t> fixed_at(ncols, 0);
  std::size_t fixed_bytes = 0;
  std::size_t nfixed = 0;
  for (std::size_t c = 0; c < ncols; ++c) {
    if (first.columns[c].type == TypeId::STRING) continue;
    fixed_at[c] = fixed_bytes;
    fixed_bytes += round_up(rows * size_of(first.columns[c].type), std::size_t{256});
    ++nfixed;
  }
  std::shared_ptr<const Buffer> fixed_block;
  if (nfixed > 1) fixed_block = br.allocate(MemoryType::DEVICE, fixed_bytes, stream);

  std::vector<Column> columns;
  std::vector<detail::CopyRange> copies;
  std::vector<detail::RebaseRange> offsets;
  for (std::size_t c = 0; c < ncols; ++c) {
    const DataType type = first.columns[c].type;
    bool nullable = false;
    std::size_t total_chars = 0;
    for (std::size_t t = 0; t < ntables; ++t) {
      nullable = nullable || tables[t].columns[c].nullable();
      total_chars += static_cast<std::size_t>(chars[c * ntables + t]);
    }
    SPILLWAY_EXPECTS(total_chars <= static_cast<std::size_t>(INT32_MAX),
                     "concat: more characters than int32 offsets allow");
    const std::size_t w = type == TypeId::STRING ? 0 : size_of(type);
    auto data = fixed_block && type != TypeId::STRING
                    ? BufferResource::view(*fixed_block, fixed_at[c], rows * w, fixed_block)
                    : br.allocate(MemoryType::DEVICE,
                                  type == TypeId::STRING ? total_chars : rows * w, stream);
    std::unique_ptr<Buffer> offs;
    if (type == TypeId::STRING) {
      offs = br.allocate(MemoryType::DEVICE, (rows + 1) * sizeof(std::int32_t), stream);
      const auto end = static_cast<std::int32_t>(total_chars);  // pageable: staged at once
      cuda::memcpy_async(as<std::int32_t>(*offs) + rows, &end, sizeof(end), stream);
    }
    std::size_t at = 0;  // bytes (fixed width) or characters (STRING) written so far
    for (std::size_t t = 0; t < ntables; ++t) {
      const ColumnView& col = tables[t].columns[c];
      const std::size_t bytes =
          type == TypeId::STRING ? static_cast<std::size_t>(chars[c * ntables + t]) : col.size * w;
      if (bytes > 0) {
        copies.push_back({data->data() + at, static_cast<const std::byte*>(col.data), bytes});
      }
      if (type == TypeId::STRING && col.size > 0) {  // each table writes its rows' starts
        offsets.push_back({as<std::int32_t>(*offs) + starts[t], col.offsets, col.size,
                           static_cast<std::int32_t>(at)});
      }
      at += bytes;
    }
    std::unique_ptr<Buffer> mask;
    if (nullable) {
      mask = br.allocate(MemoryType::DEVICE, mask_bytes(rows), stream);
      std::vector<const std::uint8_t*> masks(ntables);
      for (std::size_t t = 0; t < ntables; ++t) masks[t] = tables[t].columns[c].null_mask;
      if (!d_starts) d_starts = detail::to_device(starts, br, stream);
      // Freed in stream order, after the kernel.
      auto d_masks = detail::to_device(masks, br, stream);
      if (rows > 0) {
        gather_mask_kernel<<<detail::blocks_for(mask_bytes(rows), 256), 256, 0, raw(stream)>>>(
            as<const std::uint8_t* const>(*d_masks), as<const std::uint64_t>(*d_starts), ntables,
            rows, as<std::uint8_t>(*mask));
        SPILLWAY_CUDA_TRY(cudaGetLastError());
      }
    }
    columns.emplace_back(type, rows, std::move(data), std::move(offs), std::move(mask));
  }
  detail::copy_ranges(std::span<const detail::CopyRange>(copies), br, stream);
  detail::copy_ranges(std::span<const detail::RebaseRange>(offsets), br, stream);
  return Table(std::move(columns), first.names);
}

namespace {

constexpr MemoryType kDevice = MemoryType::DEVICE;

std::size_t payload_bytes(const std::vector<PackedData>& packed) {
  std::size_t total = 0;
  for (const auto& p : packed) {
    SPILLWAY_EXPECTS(p.payload != nullptr, "unpack_and_concat: a chunk without a payload");
    total += p.payload->size();
  }
  return total;
}

/// Room on the device for the output of `total` bytes, or nullopt. When the device cannot hold
/// it beside the chunks it holds (no longer spillable once extracted), those go down to pinned
/// host memory, where the concatenation reads them, and `squeezed` says so: the device then
/// needs room for the output alone.
std::optional<MemoryReservation> room_for_output(std::vector<PackedData>& packed, std::size_t total,
                                                 BufferResource& br, Stream stream,
                                                 bool& squeezed) {
  if (auto room = br.reserve_or_spill(kDevice, total)) return room;
  squeezed = true;
  if (br.is_live(MemoryType::PINNED_HOST)) {
    for (auto& p : packed) {
      if (p.payload->mem_type() != kDevice) continue;
      auto pinned = br.reserve_or_spill(MemoryType::PINNED_HOST, p.payload->size());
      if (!pinned) break;
      br.statistics().add_bytes("unpack-chunks-moved-down", static_cast<double>(p.payload->size()));
      p.payload = br.move(std::move(p.payload), *pinned, stream);
    }
  }
  return br.waiting_for_memory([&] { return br.reserve_or_spill(kDevice, total); });
}

/// Brings a chunk where the concatenation can read it: up to the device when there is room
/// beside the output (not once the chunks were squeezed out), else pinned host memory, which
/// the GPU maps. False when neither can take it.
bool place_chunk(PackedData& p, BufferResource& br, Stream stream, bool squeezed) {
  const MemoryType at = p.payload->mem_type();
  if (at == kDevice) return true;
  std::optional<MemoryReservation> res;
  if (!squeezed) res = br.reserve_or_spill(kDevice, p.payload->size());
  if (!res && at != MemoryType::PINNED_HOST) {
    if (!br.is_live(MemoryType::PINNED_HOST)) return false;
    res = br.waiting_for_memory(
        [&] { return br.reserve_or_spill(MemoryType::PINNED_HOST, p.payload->size()); });
    if (!res) return false;
  }
  if (res) p.payload = br.move(std::move(p.payload), *res, stream);
  if (p.payload->mem_type() != kDevice) {
    br.statistics().add_bytes("unpack-from-host-memory", static_cast<double>(p.payload->size()));
  }
  return true;
}

}  // namespace

std::optional<Table> try_unpack_and_concat(std::vector<PackedData>& packed, BufferResource& br,
                                           Stream stream) {
  SPILLWAY_NVTX_RANGE("unpack and concatenate");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "unpack_and_concat");
  const MemoryStep step("unpacking (gpu::unpack_and_concat)");
  const std::size_t total = payload_bytes(packed);
  // A single chunk becomes the table itself, so it must be on the GPU.
  if (packed.size() == 1) {
    auto& p = packed.front();
    if (p.payload->mem_type() != kDevice) {
      auto res = br.waiting_for_memory([&] { return br.reserve_or_spill(kDevice, total); });
      if (!res) return std::nullopt;
      p.payload = br.move(std::move(p.payload), *res, stream);
    }
    return to_table(gpu::unpack(std::move(p), stream));
  }
  // Room for the output is held while chunks come up, so that chunks take only what the
  // output leaves. The payloads (~ the output's size) bound the output: data, offsets and
  // masks, padded. Nothing is consumed until every chunk has its place.
  bool squeezed = false;
  auto room = room_for_output(packed, total, br, stream, squeezed);
  if (!room) return std::nullopt;
  for (auto& p : packed) {
    if (!place_chunk(p, br, stream, squeezed)) return std::nullopt;
  }
  std::vector<UnpackedTable> parts;
  std::vector<TableView> views;
  for (auto& p : packed) {
    parts.push_back(gpu::unpack(std::move(p), stream));
    views.push_back(parts.back().view());
  }
  packed.clear();
  room->release();
  Table out = gpu::concat(views, br, stream);
  // The parts' payloads go at the end of this scope. One freed in stream order on `stream`
  // goes after the concatenation read it; others (a view, whose block is freed on its own
  // stream, or a payload of another stream) only once it has.
  const bool ordered = std::all_of(parts.begin(), parts.end(), [&](const UnpackedTable& p) {
    return !p.packed().payload->is_view() && p.packed().payload->stream() == stream;
  });
  if (!ordered) cuda::stream_synchronize(stream);
  return out;
}

Table unpack_and_concat(std::vector<PackedData> packed, BufferResource& br, Stream stream) {
  const MemoryStep step("unpacking (gpu::unpack_and_concat)");
  const std::size_t total = payload_bytes(packed);
  if (auto out = try_unpack_and_concat(packed, br, stream)) return std::move(*out);
  br.throw_out_of_memory(std::span<const MemoryType>(&kDevice, 1), total);
}

Table unpack_and_concat_or_host(std::vector<PackedData> packed, BufferResource& br, Stream stream) {
  if (auto out = try_unpack_and_concat(packed, br, stream)) return std::move(*out);
  br.statistics().add_count("unpacked-on-the-host");
  return spillway::unpack_and_concat(std::move(packed), br);
}

}  // namespace spillway::gpu
