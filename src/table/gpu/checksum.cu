// The table checksum on the GPU: every row's 64-bit value as on the CPU (checksum_hash.hpp),
// summed per block and added into one counter (the sum is mod 2^64, so the order of the adds
// does not matter). Tables of fixed-width columns only (the shuffle's) take a kernel that reads
// 8 rows of a column per thread in vector loads, with the column descriptors in shared memory.
#include <spillway/table/gpu.hpp>

#include "core/detail/cuda_try.hpp"
#include "table/detail/checksum_hash.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <cub/block/block_reduce.cuh>

namespace spillway::gpu {

namespace {

using detail::DeviceColumn;

constexpr unsigned block_threads = 256;

__device__ std::uint64_t row_value(const DeviceColumn* cols, std::uint32_t ncols, std::size_t row) {
  std::uint64_t terms = 0;
  for (std::uint32_t k = 0; k < ncols; ++k) {
    const DeviceColumn& c = cols[k];
    if (!detail::is_valid(c, row)) {
      terms += spillway::detail::null_term(k);
    } else if (c.type == TypeId::STRING) {
      const std::int32_t a = c.offsets[row];
      terms += spillway::detail::string_term(c.data + a,
                                             static_cast<std::size_t>(c.offsets[row + 1] - a), k);
    } else {
      const std::uint64_t bits = detail::with_width(c.width, [&]<typename T>() -> std::uint64_t {
        return spillway::detail::value_bits(reinterpret_cast<const T*>(c.data)[row]);
      });
      terms += spillway::detail::fixed_term(bits, k);
    }
  }
  return spillway::detail::row_value(terms);
}

__global__ void checksum_kernel(const DeviceColumn* cols, std::uint32_t ncols, std::size_t rows,
                                unsigned long long* slot) {
  using Reduce = cub::BlockReduce<unsigned long long, block_threads>;
  __shared__ typename Reduce::TempStorage temp;
  unsigned long long s = 0;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; r < rows; r += stride) {
    s += row_value(cols, ncols, r);
  }
  const unsigned long long block = Reduce(temp).Sum(s);
  if (threadIdx.x == 0) {
    atomicAdd(slot + 1, block);  // TableChecksum: rows, then sum
    if (blockIdx.x == 0) atomicAdd(slot, static_cast<unsigned long long>(rows));
  }
}

/// Rows per thread of checksum_fixed_kernel, and the most columns it takes.
constexpr unsigned sum_rows = 8;
constexpr std::uint32_t max_fixed_columns = 64;

/// Adds column k's terms of rows [first, first + sum_rows) to `terms`: sum_rows x sizeof(T)
/// bytes in 16-byte loads (8-byte for 1-byte values); the column data is 16-byte aligned.
template <typename T>
__device__ __forceinline__ void add_terms(const DeviceColumn& c, std::uint32_t k, std::size_t first,
                                          std::uint64_t (&terms)[sum_rows]) {
  alignas(16) T v[sum_rows];
  if constexpr (sizeof(T) == 1) {
    *reinterpret_cast<uint2*>(v) = reinterpret_cast<const uint2*>(c.data)[first / sum_rows];
  } else {
    constexpr unsigned vecs = sum_rows * sizeof(T) / 16;
    const auto* src = reinterpret_cast<const uint4*>(c.data) + first / sum_rows * vecs;
#pragma unroll
    for (unsigned i = 0; i < vecs; ++i) reinterpret_cast<uint4*>(v)[i] = src[i];
  }
#pragma unroll
  for (unsigned i = 0; i < sum_rows; ++i) {
    terms[i] += detail::is_valid(c, first + i)
                    ? spillway::detail::fixed_term(spillway::detail::value_bits(v[i]), k)
                    : spillway::detail::null_term(k);
  }
}

/// The checksum of fixed-width columns (at most max_fixed_columns, each 16-byte aligned): each
/// thread takes sum_rows consecutive rows and walks the columns; the last, partial group goes
/// row by row as in checksum_kernel.
__global__ void checksum_fixed_kernel(const DeviceColumn* cols, std::uint32_t ncols,
                                      std::size_t rows, unsigned long long* slot) {
  using Reduce = cub::BlockReduce<unsigned long long, block_threads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ DeviceColumn sc[max_fixed_columns];
  for (std::uint32_t k = threadIdx.x; k < ncols; k += blockDim.x) sc[k] = cols[k];
  __syncthreads();
  unsigned long long s = 0;
  const std::size_t groups = (rows + sum_rows - 1) / sum_rows;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; g < groups;
       g += stride) {
    const std::size_t first = g * sum_rows;
    if (first + sum_rows > rows) {
      for (std::size_t r = first; r < rows; ++r) s += row_value(sc, ncols, r);
      continue;
    }
    std::uint64_t terms[sum_rows] = {};
    for (std::uint32_t k = 0; k < ncols; ++k) {
      detail::with_width(sc[k].width, [&]<typename T>() { add_terms<T>(sc[k], k, first, terms); });
    }
#pragma unroll
    for (unsigned i = 0; i < sum_rows; ++i) s += spillway::detail::row_value(terms[i]);
  }
  const unsigned long long block = Reduce(temp).Sum(s);
  if (threadIdx.x == 0) {
    atomicAdd(slot + 1, block);
    if (blockIdx.x == 0) atomicAdd(slot, static_cast<unsigned long long>(rows));
  }
}

}  // namespace

void add_checksum(const TableView& table, Buffer& sums, std::size_t slot, BufferResource& br,
                  Stream stream) {
  static_assert(sizeof(TableChecksum) == 2 * sizeof(unsigned long long));
  SPILLWAY_EXPECTS(
      sums.mem_type() == MemoryType::DEVICE && (slot + 1) * sizeof(TableChecksum) <= sums.size(),
      "add_checksum: slot " + std::to_string(slot) + " is not in the DEVICE buffer");
  const std::size_t rows = table.num_rows();
  if (rows == 0) return;
  std::vector<DeviceColumn> cols;
  bool fixed = table.num_columns() <= max_fixed_columns;
  for (const auto& c : table.columns) {
    cols.push_back(detail::to_device_column(c));
    fixed = fixed && c.type != TypeId::STRING && reinterpret_cast<std::uintptr_t>(c.data) % 16 == 0;
  }
  auto d_cols = detail::to_device(cols, br, stream);  // freed in stream order
  int sms = 0;
  SPILLWAY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, br.device()));
  const unsigned blocks =
      std::min(detail::blocks_for(rows, block_threads), static_cast<unsigned>(sms) * 8);
  auto* kernel = fixed ? checksum_fixed_kernel : checksum_kernel;
  kernel<<<blocks, block_threads, 0, detail::raw(stream)>>>(
      detail::as<const DeviceColumn>(*d_cols), static_cast<std::uint32_t>(cols.size()), rows,
      detail::as<unsigned long long>(sums) + 2 * slot);
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

TableChecksum checksum(const TableView& table, BufferResource& br, Stream stream) {
  auto sums = br.allocate(MemoryType::DEVICE, sizeof(TableChecksum), stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(sums->data(), 0, sums->size(), detail::raw(stream)));
  add_checksum(table, *sums, 0, br, stream);
  std::vector<TableChecksum> out(1);
  detail::to_host(out, sums->data(), stream);
  return out[0];
}

}  // namespace spillway::gpu
