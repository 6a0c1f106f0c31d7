// The local hash join on the GPU (gpu_join.hpp). The hash table is open-addressed with linear
// probing: a slot holds a right row's 32-bit row hash (high half) and its index (low half), or
// empty_slot, and is claimed by compare-and-swap. A probe walks from the slot of the spread
// row hash to the first empty slot, comparing keys only where the stored hash is the row's.
// Twice the right rows, rounded up to a power of two, keeps probe runs short.
#include <spillway/table/gpu_join.hpp>

#include "core/detail/cuda_try.hpp"
#include "core/detail/nvtx.hpp"
#include "table/detail/join_common.hpp"
#include "table/detail/spread_hash.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <bit>
#include <limits>
#include <string>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::DeviceColumn;
using detail::raw;

constexpr unsigned block_threads = 256;
constexpr unsigned long long empty_slot = ~0ULL;
/// Rows of a side and of the output: int32 gather maps.
constexpr std::size_t max_rows = std::numeric_limits<std::int32_t>::max();

struct Keys {
  const DeviceColumn* cols;
  std::uint32_t n;
};

__device__ bool any_null(const Keys& k, std::size_t row) {
  for (std::uint32_t c = 0; c < k.n; ++c) {
    if (!detail::is_valid(k.cols[c], row)) return true;
  }
  return false;
}

__device__ std::uint32_t row_hash(const Keys& k, std::size_t row) {
  return detail::hash_row(k.cols, k.n, row, default_hash_seed);
}

/// Inserts every right row without a null key (a null matches nothing).
__global__ void build_kernel(Keys keys, std::size_t rows, unsigned long long* slots,
                             std::size_t mask) {
  const std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (r >= rows || any_null(keys, r)) return;
  const std::uint32_t h = row_hash(keys, r);
  const unsigned long long entry = (static_cast<unsigned long long>(h) << 32) | r;
  for (std::size_t s = spillway::detail::spread_hash(h) & mask;; s = (s + 1) & mask) {
    if (atomicCAS(slots + s, empty_slot, entry) == empty_slot) return;
  }
}

struct Probe {
  Keys left;
  Keys right;
  std::size_t left_rows;
  const unsigned long long* slots;
  std::size_t mask;
  JoinType type;
};

/// Calls f(r) for each right row r whose keys equal left row l's, until f returns false.
template <typename F>
__device__ void for_each_match(const Probe& p, std::size_t l, F&& f) {
  if (any_null(p.left, l)) return;
  const std::uint32_t h = row_hash(p.left, l);
  for (std::size_t s = spillway::detail::spread_hash(h) & p.mask;; s = (s + 1) & p.mask) {
    const unsigned long long e = p.slots[s];
    if (e == empty_slot) return;
    if (static_cast<std::uint32_t>(e >> 32) != h) continue;
    const auto r = static_cast<std::uint32_t>(e);
    if (detail::keys_equal(p.left.cols, l, p.right.cols, r, p.left.n, false) && !f(r)) return;
  }
}

/// Whether `t` outputs the matching pairs (else one row per left row at most).
__host__ __device__ constexpr bool outputs_pairs(JoinType t) {
  return t == JoinType::inner || t == JoinType::left || t == JoinType::full;
}

/// The output rows of a left row with `matches` matches (semi and anti joins stop at 1).
__device__ std::uint32_t output_rows(JoinType t, std::uint32_t matches) {
  switch (t) {
    case JoinType::inner:
      return matches;
    case JoinType::left:
    case JoinType::full:
      return matches > 0 ? matches : 1;
    case JoinType::left_semi:
      return matches > 0 ? 1 : 0;
    case JoinType::left_anti:
      return matches > 0 ? 0 : 1;
  }
  return 0;
}

__global__ void count_kernel(Probe p, std::uint32_t* counts) {
  const std::size_t l = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (l >= p.left_rows) return;
  std::uint32_t n = 0;
  const bool all = outputs_pairs(p.type);
  for_each_match(p, l, [&](std::uint32_t) {
    ++n;
    return all;
  });
  counts[l] = output_rows(p.type, n);
}

/// Writes left row l's output rows at offsets[l]; marks the matched right rows of a full join.
__global__ void write_kernel(Probe p, const std::uint64_t* offsets, std::int32_t* out_left,
                             std::int32_t* out_right, std::uint8_t* matched) {
  const std::size_t l = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (l >= p.left_rows) return;
  const std::uint64_t at = offsets[l];
  const auto li = static_cast<std::int32_t>(l);
  const bool all = outputs_pairs(p.type);
  std::uint32_t n = 0;
  for_each_match(p, l, [&](std::uint32_t r) {
    if (all) {
      out_left[at + n] = li;
      out_right[at + n] = static_cast<std::int32_t>(r);
      if (matched != nullptr) matched[r] = 1;
    }
    ++n;
    return all;
  });
  if (n == 0 && (p.type == JoinType::left || p.type == JoinType::full)) {
    out_left[at] = li;
    out_right[at] = -1;
  } else if ((p.type == JoinType::left_semi && n > 0) ||
             (p.type == JoinType::left_anti && n == 0)) {
    out_left[at] = li;
  }
}

/// Whether right row r found no match (a full join's rows of nulls on the left).
struct Unmatched {
  const std::uint8_t* matched;
  __device__ bool operator()(std::int32_t r) const { return matched[r] == 0; }
};

/// The key columns in a DEVICE buffer.
std::unique_ptr<Buffer> key_columns(const TableView& keys, BufferResource& br, Stream stream) {
  std::vector<DeviceColumn> cols;
  for (const ColumnView& c : keys.columns) cols.push_back(detail::to_device_column(c));
  return detail::to_device(cols, br, stream);
}

void check_launch() {
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

}  // namespace

JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("gpu join_maps");
  const auto [lk, rk] = spillway::detail::join_key_views(left, left_keys, right, right_keys);
  const std::size_t nl = left.num_rows();
  const std::size_t nr = right.num_rows();
  SPILLWAY_EXPECTS(nl <= max_rows && nr <= max_rows,
                   "the GPU join takes sides of fewer than 2^31 rows, got " + std::to_string(nl) +
                       " left and " + std::to_string(nr) + " right");
  SPILLWAY_EXPECTS(cuda::is_available(), "the GPU join needs a GPU");
  const cudaStream_t s = raw(stream);
  auto d_lk = key_columns(lk, br, stream);
  auto d_rk = key_columns(rk, br, stream);
  const auto nkeys = static_cast<std::uint32_t>(lk.columns.size());
  const Keys lkeys{as<const DeviceColumn>(*d_lk), nkeys};
  const Keys rkeys{as<const DeviceColumn>(*d_rk), nkeys};

  // Build.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(2 * nr, 64));
  auto slots = br.allocate(MemoryType::DEVICE, capacity * sizeof(unsigned long long), stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(slots->data(), 0xFF, slots->size(), s));
  if (nr > 0) {
    build_kernel<<<detail::blocks_for(nr, block_threads), block_threads, 0, s>>>(
        rkeys, nr, as<unsigned long long>(*slots), capacity - 1);
    check_launch();
  }

  // Count, scan, then write.
  const Probe p{lkeys, rkeys, nl, as<const unsigned long long>(*slots), capacity - 1, type};
  auto counts = br.allocate(MemoryType::DEVICE, (nl + 1) * sizeof(std::uint32_t), stream);
  auto offsets = br.allocate(MemoryType::DEVICE, (nl + 1) * sizeof(std::uint64_t), stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(counts->data(), 0, counts->size(), s));
  if (nl > 0) {
    count_kernel<<<detail::blocks_for(nl, block_threads), block_threads, 0, s>>>(
        p, as<std::uint32_t>(*counts));
    check_launch();
  }
  {
    const auto* in = as<const std::uint32_t>(*counts);
    auto* out = as<std::uint64_t>(*offsets);
    const ::cuda::std::plus<std::uint64_t> sum;
    std::size_t temp = 0;
    SPILLWAY_CUDA_TRY(
        cub::DeviceScan::ExclusiveScan(nullptr, temp, in, out, sum, std::uint64_t{0}, nl + 1, s));
    auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
    SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveScan(scratch->data(), temp, in, out, sum,
                                                     std::uint64_t{0}, nl + 1, s));
  }
  counts.reset();
  std::uint64_t pairs = 0;
  SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&pairs, as<std::uint64_t>(*offsets) + nl, sizeof(pairs),
                                    cudaMemcpyDeviceToHost, s));
  cuda::stream_synchronize(stream);
  const std::size_t bound = pairs + (type == JoinType::full ? nr : 0);
  SPILLWAY_EXPECTS(bound <= max_rows, "the GPU join's output has 2^31 rows or more (" +
                                          std::to_string(bound) + "): join smaller partitions");
  JoinMaps maps;
  maps.size = pairs;
  maps.left = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(bound, 1) * 4, stream);
  if (outputs_pairs(type)) {
    maps.right = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(bound, 1) * 4, stream);
  }
  std::unique_ptr<Buffer> matched;
  if (type == JoinType::full && nr > 0) {
    matched = br.allocate(MemoryType::DEVICE, nr, stream);
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(matched->data(), 0, nr, s));
  }
  if (nl > 0) {
    write_kernel<<<detail::blocks_for(nl, block_threads), block_threads, 0, s>>>(
        p, as<const std::uint64_t>(*offsets), as<std::int32_t>(*maps.left),
        maps.right ? as<std::int32_t>(*maps.right) : nullptr,
        matched ? as<std::uint8_t>(*matched) : nullptr);
    check_launch();
  }
  if (matched) {
    // The right rows no left row matched, in their order, with nulls on the left.
    auto* out_right = as<std::int32_t>(*maps.right) + pairs;
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(as<std::int32_t>(*maps.left) + pairs, 0xFF, nr * 4, s));
    auto selected = br.allocate(MemoryType::DEVICE, sizeof(std::int64_t), stream);
    const thrust::counting_iterator<std::int32_t> rows(0);
    const Unmatched pred{as<const std::uint8_t>(*matched)};
    std::size_t temp = 0;
    SPILLWAY_CUDA_TRY(cub::DeviceSelect::If(nullptr, temp, rows, out_right,
                                            as<std::int64_t>(*selected),
                                            static_cast<std::int64_t>(nr), pred, s));
    auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
    SPILLWAY_CUDA_TRY(cub::DeviceSelect::If(scratch->data(), temp, rows, out_right,
                                            as<std::int64_t>(*selected),
                                            static_cast<std::int64_t>(nr), pred, s));
    std::int64_t unmatched = 0;
    SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&unmatched, selected->data(), sizeof(unmatched),
                                      cudaMemcpyDeviceToHost, s));
    cuda::stream_synchronize(stream);
    maps.size += static_cast<std::size_t>(unmatched);
  }
  return maps;
}

Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("gpu hash_join");
  const JoinMaps maps = join_maps(left, left_keys, right, right_keys, type, br, stream);
  const bool left_nulls = type == JoinType::full;
  const bool right_nulls = type == JoinType::left || type == JoinType::full;
  Table l = gather(left, as<const std::int32_t>(*maps.left), maps.size, left_nulls, br, stream);
  if (!outputs_pairs(type)) return l;
  return spillway::detail::joined_table(
      std::move(l),
      gather(right, as<const std::int32_t>(*maps.right), maps.size, right_nulls, br, stream));
}

}  // namespace spillway::gpu
