// gather on the GPU (gpu_join.hpp): a kernel per column for fixed-width values (a thread per
// row), validity (a thread per output byte) and strings (the lengths, their scan, then a
// thread per row copying its characters).
#include <spillway/table/gpu_join.hpp>

#include "core/detail/cuda_try.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <cub/device/device_scan.cuh>

#include <limits>
#include <string>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::raw;

constexpr unsigned block_threads = 256;

template <typename U>
__global__ void gather_fixed_kernel(const U* in, const std::int32_t* rows, std::size_t n, U* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const std::int32_t r = rows[i];
  out[i] = r >= 0 ? in[r] : U{};
}

/// Byte i of the output mask: row 8i + j is valid when its input row is >= 0 and valid in
/// `mask` (nullptr: all valid).
__global__ void gather_mask_kernel(const std::uint8_t* mask, const std::int32_t* rows,
                                   std::size_t n, std::uint8_t* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= (n + 7) / 8) return;
  unsigned v = 0;
  for (unsigned j = 0; j < 8 && i * 8 + j < n; ++j) {
    const std::int32_t r = rows[i * 8 + j];
    if (r >= 0 && (mask == nullptr || ((mask[r >> 3] >> (r & 7)) & 1U) != 0)) v |= 1U << j;
  }
  out[i] = static_cast<std::uint8_t>(v);
}

/// lengths[i]: the characters of output row i (n + 1 values, the last 0, for the scan).
__global__ void string_lengths_kernel(const std::int32_t* offsets, const std::int32_t* rows,
                                      std::size_t n, std::int64_t* lengths) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i > n) return;
  const std::int32_t r = i < n ? rows[i] : -1;
  lengths[i] = r >= 0 ? offsets[r + 1] - offsets[r] : 0;
}

/// The int32 offsets from their int64 scan, and each row's characters copied.
__global__ void string_copy_kernel(const char* chars, const std::int32_t* offsets,
                                   const std::int32_t* rows, std::size_t n,
                                   const std::int64_t* starts, std::int32_t* out_offsets,
                                   char* out_chars) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i > n) return;
  const auto at = static_cast<std::int32_t>(starts[i]);
  out_offsets[i] = at;
  if (i == n || rows[i] < 0) return;
  const std::int32_t a = offsets[rows[i]];
  const std::int32_t len = offsets[rows[i] + 1] - a;
  for (std::int32_t c = 0; c < len; ++c) out_chars[at + c] = chars[a + c];
}

void check_launch() {
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

std::unique_ptr<Buffer> gather_strings(const ColumnView& col, const std::int32_t* rows,
                                       std::size_t n, std::unique_ptr<Buffer>& chars,
                                       BufferResource& br, Stream stream) {
  const cudaStream_t s = raw(stream);
  auto starts = br.allocate(MemoryType::DEVICE, (n + 1) * sizeof(std::int64_t), stream);
  string_lengths_kernel<<<detail::blocks_for(n + 1, block_threads), block_threads, 0, s>>>(
      col.offsets, rows, n, as<std::int64_t>(*starts));
  check_launch();
  {
    auto* d = as<std::int64_t>(*starts);
    std::size_t temp = 0;
    SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, d, d, n + 1, s));
    auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
    SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scratch->data(), temp, d, d, n + 1, s));
  }
  std::int64_t total = 0;
  SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&total, as<std::int64_t>(*starts) + n, sizeof(total),
                                    cudaMemcpyDeviceToHost, s));
  cuda::stream_synchronize(stream);
  SPILLWAY_EXPECTS(total <= std::numeric_limits<std::int32_t>::max(),
                   "gather: more than 2 GiB of characters in one string column (" +
                       std::to_string(total) + " bytes)");
  auto offsets = br.allocate(MemoryType::DEVICE, (n + 1) * sizeof(std::int32_t), stream);
  chars = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(static_cast<std::size_t>(total), 1),
                      stream);
  string_copy_kernel<<<detail::blocks_for(n + 1, block_threads), block_threads, 0, s>>>(
      static_cast<const char*>(col.data), col.offsets, rows, n, as<const std::int64_t>(*starts),
      as<std::int32_t>(*offsets), as<char>(*chars));
  check_launch();
  return offsets;
}

}  // namespace

Table gather(const TableView& table, const std::int32_t* rows, std::size_t n, bool nulls_possible,
             BufferResource& br, Stream stream) {
  const cudaStream_t s = raw(stream);
  std::vector<Column> columns;
  for (const ColumnView& col : table.columns) {
    std::unique_ptr<Buffer> mask;
    if (col.nullable() || nulls_possible) {
      mask = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(mask_bytes(n), 1), stream);
      if (n > 0) {
        gather_mask_kernel<<<detail::blocks_for(mask_bytes(n), block_threads), block_threads, 0,
                             s>>>(col.null_mask, rows, n, as<std::uint8_t>(*mask));
        check_launch();
      }
    }
    if (col.type == TypeId::STRING) {
      std::unique_ptr<Buffer> chars;
      auto offsets = gather_strings(col, rows, n, chars, br, stream);
      columns.emplace_back(TypeId::STRING, n, std::move(chars), std::move(offsets),
                           std::move(mask));
      continue;
    }
    const std::size_t w = size_of(col.type);
    auto data = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(n * w, 1), stream);
    if (n > 0) {
      detail::with_width(w, [&]<typename U>() {
        gather_fixed_kernel<U><<<detail::blocks_for(n, block_threads), block_threads, 0, s>>>(
            static_cast<const U*>(col.data), rows, n, as<U>(*data));
      });
      check_launch();
    }
    columns.emplace_back(col.type, n, std::move(data), nullptr, std::move(mask));
  }
  return Table(std::move(columns), table.names);
}

}  // namespace spillway::gpu
