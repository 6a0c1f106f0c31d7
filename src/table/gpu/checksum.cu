// The table checksum on the GPU: every row's 64-bit value as on the CPU (checksum_hash.hpp),
// summed per block and added into one counter (the sum is mod 2^64, so the order of the adds
// does not matter). Tables of fixed-width columns only (the shuffle's) take a kernel that reads
// up to 8 rows of a column per thread in vector loads, with the column descriptors in its
// arguments; where all columns have one width (4 or 8 bytes), several columns' loads at once.
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

/// The columns of checksum_fixed_kernel, passed in its arguments (no upload per call).
constexpr std::uint32_t max_fixed_columns = 32;
struct FixedColumns {
  DeviceColumn cols[max_fixed_columns];
  std::uint32_t n;
};

/// Loads rows [first, first + R) of a column in one vector load of R x sizeof(T) bytes (16-byte
/// loads when that is more); the column data is 16-byte aligned and `first` a multiple of R.
template <typename T, unsigned R>
__device__ __forceinline__ void load_rows(const T* col, std::size_t first, T (&v)[R]) {
  constexpr std::size_t bytes = R * sizeof(T);
  if constexpr (bytes >= 16) {
    const auto* src = reinterpret_cast<const uint4*>(col + first);
#pragma unroll
    for (unsigned i = 0; i < bytes / 16; ++i) reinterpret_cast<uint4*>(v)[i] = src[i];
  } else if constexpr (bytes == 8) {
    *reinterpret_cast<uint2*>(v) = *reinterpret_cast<const uint2*>(col + first);
  } else if constexpr (bytes == 4) {
    *reinterpret_cast<unsigned*>(v) = *reinterpret_cast<const unsigned*>(col + first);
  } else if constexpr (bytes == 2) {
    *reinterpret_cast<unsigned short*>(v) = *reinterpret_cast<const unsigned short*>(col + first);
  } else {
    v[0] = col[first];
  }
}

/// Adds column k's terms of rows [first, first + R) to `terms`.
template <typename T, unsigned R>
__device__ __forceinline__ void add_terms(const DeviceColumn& c, std::uint32_t k, std::size_t first,
                                          std::uint64_t (&terms)[R]) {
  alignas(R * sizeof(T) >= 16 ? 16 : R * sizeof(T)) T v[R];
  load_rows<T, R>(reinterpret_cast<const T*>(c.data), first, v);
#pragma unroll
  for (unsigned i = 0; i < R; ++i) {
    terms[i] += detail::is_valid(c, first + i)
                    ? spillway::detail::fixed_term(spillway::detail::value_bits(v[i]), k)
                    : spillway::detail::null_term(k);
  }
}

/// The checksum of fixed-width columns (at most max_fixed_columns, each 16-byte aligned): each
/// thread takes R consecutive rows and walks the columns; the last, partial group goes row by
/// row as in checksum_kernel. R is chosen by the table's length (fixed_rows_per_thread): vector
/// loads of 8 rows for long tables, and enough threads to keep loads in flight for short ones
/// (a thread's columns are read one after another).
template <unsigned R>
__global__ void checksum_fixed_kernel(const FixedColumns fc, std::size_t rows,
                                      unsigned long long* slot) {
  using Reduce = cub::BlockReduce<unsigned long long, block_threads>;
  __shared__ typename Reduce::TempStorage temp;
  const DeviceColumn* sc = fc.cols;
  const std::uint32_t ncols = fc.n;
  unsigned long long s = 0;
  const std::size_t groups = (rows + R - 1) / R;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; g < groups;
       g += stride) {
    const std::size_t first = g * R;
    if (first + R > rows) {
      for (std::size_t r = first; r < rows; ++r) s += row_value(sc, ncols, r);
      continue;
    }
    std::uint64_t terms[R] = {};
    for (std::uint32_t k = 0; k < ncols; ++k) {
      detail::with_width(sc[k].width,
                         [&]<typename T>() { add_terms<T, R>(sc[k], k, first, terms); });
    }
#pragma unroll
    for (unsigned i = 0; i < R; ++i) s += spillway::detail::row_value(terms[i]);
  }
  const unsigned long long block = Reduce(temp).Sum(s);
  if (threadIdx.x == 0) {
    atomicAdd(slot + 1, block);
    if (blockIdx.x == 0) atomicAdd(slot, static_cast<unsigned long long>(rows));
  }
}

/// checksum_fixed_kernel for columns all of one width (the shuffle's tables: int32 or int64
/// only): the loads of `batch` columns are issued before any of their terms is added, so that a
/// thread has several in flight instead of waiting on each column in turn (a 15 MB table of
/// ten int32 columns took 12 us, a third of the copy's speed).
template <typename T, unsigned R>
__global__ void checksum_uniform_kernel(const FixedColumns fc, std::size_t rows,
                                        unsigned long long* slot) {
  constexpr unsigned batch = 4;
  using Reduce = cub::BlockReduce<unsigned long long, block_threads>;
  __shared__ typename Reduce::TempStorage temp;
  const DeviceColumn* sc = fc.cols;
  const std::uint32_t ncols = fc.n;
  unsigned long long s = 0;
  const std::size_t groups = (rows + R - 1) / R;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; g < groups;
       g += stride) {
    const std::size_t first = g * R;
    if (first + R > rows) {
      for (std::size_t r = first; r < rows; ++r) s += row_value(sc, ncols, r);
      continue;
    }
    std::uint64_t terms[R] = {};
    for (std::uint32_t k = 0; k < ncols; k += batch) {
      alignas(16) T v[batch][R];
#pragma unroll
      for (unsigned j = 0; j < batch; ++j) {
        if (k + j < ncols) load_rows<T, R>(reinterpret_cast<const T*>(sc[k + j].data), first, v[j]);
      }
#pragma unroll
      for (unsigned j = 0; j < batch; ++j) {
        if (k + j >= ncols) break;
        const DeviceColumn& c = sc[k + j];
#pragma unroll
        for (unsigned i = 0; i < R; ++i) {
          terms[i] +=
              detail::is_valid(c, first + i)
                  ? spillway::detail::fixed_term(spillway::detail::value_bits(v[j][i]), k + j)
                  : spillway::detail::null_term(k + j);
        }
      }
    }
#pragma unroll
    for (unsigned i = 0; i < R; ++i) s += spillway::detail::row_value(terms[i]);
  }
  const unsigned long long block = Reduce(temp).Sum(s);
  if (threadIdx.x == 0) {
    atomicAdd(slot + 1, block);
    if (blockIdx.x == 0) atomicAdd(slot, static_cast<unsigned long long>(rows));
  }
}

/// The checksum kernel for rows-per-thread `r` and columns of one `width` (4 or 8), or of
/// mixed widths (width 0).
using FixedKernel = void (*)(FixedColumns, std::size_t, unsigned long long*);
template <unsigned R>
FixedKernel fixed_kernel_for(std::size_t width) {
  switch (width) {
    case 4:
      return checksum_uniform_kernel<std::uint32_t, R>;
    case 8:
      return checksum_uniform_kernel<std::uint64_t, R>;
    default:
      return checksum_fixed_kernel<R>;
  }
}

/// Rows per thread of checksum_fixed_kernel: the most (8, 4, 2, 1) that still gives every SM
/// `threads_per_sm` threads, or one.
unsigned fixed_rows_per_thread(std::size_t rows, unsigned sms) {
  constexpr std::size_t threads_per_sm = 1024;
  for (unsigned r = 8; r > 1; r /= 2) {
    if (rows / r >= std::size_t{sms} * threads_per_sm) return r;
  }
  return 1;
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
  int sms = 0;
  SPILLWAY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, br.device()));
  auto* slot_ptr = detail::as<unsigned long long>(sums) + 2 * slot;
  if (!fixed) {
    auto d_cols = detail::to_device(cols, br, stream);  // freed in stream order
    const unsigned blocks =
        std::min(detail::blocks_for(rows, block_threads), static_cast<unsigned>(sms) * 8);
    checksum_kernel<<<blocks, block_threads, 0, detail::raw(stream)>>>(
        detail::as<const DeviceColumn>(*d_cols), static_cast<std::uint32_t>(cols.size()), rows,
        slot_ptr);
    SPILLWAY_CUDA_TRY(cudaGetLastError());
    return;
  }
  FixedColumns fc{};
  std::copy(cols.begin(), cols.end(), fc.cols);
  fc.n = static_cast<std::uint32_t>(cols.size());
  const unsigned r = fixed_rows_per_thread(rows, static_cast<unsigned>(sms));
  const unsigned blocks = std::min(detail::blocks_for((rows + r - 1) / r, block_threads),
                                   static_cast<unsigned>(sms) * 8);
  std::size_t width = cols.front().width;  // one width for all columns, or 0
  for (const DeviceColumn& c : cols) width = c.width == width ? width : 0;
  const FixedKernel kernel = r == 8   ? fixed_kernel_for<8>(width)
                             : r == 4 ? fixed_kernel_for<4>(width)
                             : r == 2 ? fixed_kernel_for<2>(width)
                                      : fixed_kernel_for<1>(width);
  kernel<<<blocks, block_threads, 0, detail::raw(stream)>>>(fc, rows, slot_ptr);
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
