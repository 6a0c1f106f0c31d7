// split_and_pack and unpack on the GPU. The payload layout and metadata are the CPU's
// (pack_format.hpp); the bytes are moved by batched copy kernels, one launch per kind of copy
// for all parts and columns together.
#include <spillway/table/gpu.hpp>

#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include "core/detail/nvtx.hpp"

#include <spillway/table/pack_format.hpp>
#include "core/detail/cuda_try.hpp"
#include "table/detail/arguments.hpp"
#include "table/gpu/detail/batched_copy.cuh"
#include "table/gpu/detail/device_column.cuh"
#include "table/gpu/detail/packed_outputs.hpp"

#include <string>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::raw;

/// out[i] = offsets[at[i]].
__global__ void gather_offsets_kernel(const std::int32_t* offsets, const std::uint64_t* at,
                                      std::size_t n, std::int32_t* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = offsets[at[i]];
}

/// The worst problem of a string column's offsets: 0 none, 1 a last offset that is not the
/// character count, 2 a decrease at row `row` (the smallest such row), 3 offsets[0] != 0.
struct OffsetCheck {
  unsigned int problem;
  unsigned long long row;
};

__global__ void check_offsets_kernel(const std::int32_t* off, std::size_t rows, std::uint64_t chars,
                                     OffsetCheck* check) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i == 0 && off[0] != 0) atomicMax(&check->problem, 3U);
  if (i < rows && off[i + 1] < off[i]) {
    atomicMax(&check->problem, 2U);
    atomicMin(&check->row, static_cast<unsigned long long>(i));
  }
  if (i == rows && static_cast<std::uint64_t>(off[rows]) != chars) atomicMax(&check->problem, 1U);
}

}  // namespace

std::vector<PackedData> split_and_pack(const TableView& table, std::span<const std::size_t> splits,
                                       BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("pack");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "split_and_pack");
  const MemoryStep step("packing (gpu::split_and_pack)");
  SPILLWAY_EXPECTS(cuda::is_available(), "the GPU table functions need a GPU");
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  const std::vector<std::size_t> bounds = spillway::detail::split_bounds(rows, splits);
  const std::size_t nparts = bounds.size() - 1;

  // The string offsets at the bounds tell each part's character count.
  std::vector<std::vector<std::int32_t>> str_at(ncols);
  if (rows > 0) {
    std::vector<std::uint64_t> at(bounds.begin(), bounds.end());
    auto d_at = detail::to_device(at, br, stream);
    std::vector<std::unique_ptr<Buffer>> d_out(ncols);
    for (std::size_t c = 0; c < ncols; ++c) {
      if (table.columns[c].type != TypeId::STRING) continue;
      d_out[c] = br.allocate(MemoryType::DEVICE, at.size() * sizeof(std::int32_t), stream);
      gather_offsets_kernel<<<detail::blocks_for(at.size(), 256), 256, 0, raw(stream)>>>(
          table.columns[c].offsets, as<const std::uint64_t>(*d_at), at.size(),
          as<std::int32_t>(*d_out[c]));
      SPILLWAY_CUDA_TRY(cudaGetLastError());
      str_at[c].resize(at.size());
      cuda::memcpy_async(str_at[c].data(), d_out[c]->data(), d_out[c]->size(), stream);
    }
    cuda::stream_synchronize(stream);
  }

  std::vector<PackedData> out(nparts);
  detail::PackedOutputs outputs(br, stream);  // after `out`: unmaps before the payloads go
  std::vector<detail::CopyRange> copies;
  std::vector<detail::BitRange> masks;
  std::vector<detail::RebaseRange> offsets;
  std::vector<std::size_t> chars(ncols, 0);
  std::vector<spillway::detail::PackLayout> layouts;
  layouts.reserve(nparts);
  for (std::size_t p = 0; p < nparts; ++p) {
    for (std::size_t c = 0; c < ncols; ++c) {
      if (!str_at[c].empty()) chars[c] = static_cast<std::size_t>(str_at[c][p + 1] - str_at[c][p]);
    }
    layouts.push_back(spillway::detail::make_layout(table, bounds[p + 1] - bounds[p], chars));
  }
  std::vector<std::size_t> sizes;
  sizes.reserve(nparts);
  for (const auto& l : layouts) sizes.push_back(l.payload_size);
  auto payloads = outputs.allocate_all(sizes);
  for (std::size_t p = 0; p < nparts; ++p) {
    const std::size_t a = bounds[p];
    const std::size_t n = bounds[p + 1] - a;
    const auto& layout = layouts[p];
    out[p].metadata = spillway::detail::encode(layout);
    out[p].payload = std::move(payloads[p]);
    std::byte* base = out[p].payload->data();
    for (std::size_t c = 0; c < ncols; ++c) {
      const ColumnView& col = table.columns[c];
      const auto& cl = layout.columns[c];
      if (cl.nullable) {
        masks.push_back(
            {reinterpret_cast<std::uint8_t*>(base + cl.mask.offset), col.null_mask, a, n});
      }
      const auto* src = static_cast<const std::byte*>(col.data);
      if (col.type == TypeId::STRING) {
        offsets.push_back(
            {reinterpret_cast<std::int32_t*>(base + cl.offsets.offset), col.offsets + a, n + 1});
        if (cl.data.size > 0) {
          copies.push_back({base + cl.data.offset, src + str_at[c][p], cl.data.size});
        }
      } else if (n > 0) {
        copies.push_back({base + cl.data.offset, src + a * size_of(col.type), cl.data.size});
      }
    }
  }
  detail::copy_ranges(std::span<const detail::CopyRange>(copies), br, stream);
  detail::copy_ranges(std::span<const detail::BitRange>(masks), br, stream);
  detail::copy_ranges(std::span<const detail::RebaseRange>(offsets), br, stream);
  outputs.finish();
  return out;
}

UnpackedTable unpack(PackedData packed, Stream stream) {
  SPILLWAY_NVTX_RANGE("unpack");
  SPILLWAY_EXPECTS(packed.payload != nullptr, "unpack: the packed data has no payload");
  const Buffer& payload = *packed.payload;
  SPILLWAY_EXPECTS(
      payload.mem_type() == MemoryType::DEVICE || payload.mem_type() == MemoryType::PINNED_HOST,
      "gpu::unpack: the payload is in " + std::string(to_string(payload.mem_type())) +
          ", not DEVICE or PINNED_HOST");
  const spillway::detail::PackLayout layout =
      spillway::detail::decode(packed.metadata, payload.size());
  const std::byte* base = payload.size() > 0 ? payload.data() : nullptr;
  const std::size_t rows = layout.num_rows;

  // Check every STRING column's offsets on the GPU, one result slot per column.
  std::vector<std::size_t> strings;
  for (std::size_t c = 0; c < layout.columns.size(); ++c) {
    if (layout.columns[c].type == TypeId::STRING) strings.push_back(c);
  }
  if (!strings.empty()) {
    payload.wait();
    if (payload.stream() != stream) payload.stream().synchronize();  // written on another stream
    BufferResource& br = payload.resource();
    std::vector<OffsetCheck> checks(strings.size(), OffsetCheck{0, ~0ULL});
    auto d_checks = detail::to_device(checks, br, stream);
    for (std::size_t s = 0; s < strings.size(); ++s) {
      const auto& cl = layout.columns[strings[s]];
      check_offsets_kernel<<<detail::blocks_for(rows + 1, 256), 256, 0, raw(stream)>>>(
          reinterpret_cast<const std::int32_t*>(base + cl.offsets.offset), rows, cl.data.size,
          as<OffsetCheck>(*d_checks) + s);
      SPILLWAY_CUDA_TRY(cudaGetLastError());
    }
    detail::to_host(checks, d_checks->data(), stream);
    for (std::size_t s = 0; s < strings.size(); ++s) {
      const std::string col = "corrupt packed data: column " + std::to_string(strings[s]);
      switch (checks[s].problem) {
        case 3:
          SPILLWAY_FAIL(col + " string offsets do not start at 0", corrupt_data_error);
        case 2:
          SPILLWAY_FAIL(col + " string offsets decrease at row " + std::to_string(checks[s].row),
                        corrupt_data_error);
        case 1:
          SPILLWAY_FAIL(col + " string offsets do not end at the " +
                            std::to_string(layout.columns[strings[s]].data.size) + " characters",
                        corrupt_data_error);
        default:
          break;
      }
    }
  }

  TableView view;
  for (const auto& cl : layout.columns) {
    ColumnView col;
    col.type = cl.type;
    col.size = rows;
    col.data = cl.data.size > 0 ? base + cl.data.offset : nullptr;
    if (cl.nullable) col.null_mask = reinterpret_cast<const std::uint8_t*>(base + cl.mask.offset);
    if (cl.type == TypeId::STRING) {
      col.offsets = reinterpret_cast<const std::int32_t*>(base + cl.offsets.offset);
    }
    view.columns.push_back(col);
    view.names.push_back(cl.name);
  }
  return UnpackedTable(std::move(packed), std::move(view));
}

}  // namespace spillway::gpu
