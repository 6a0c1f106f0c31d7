// The local hash group-by on the GPU (gpu_groupby.hpp). The table of groups is open-addressed
// with linear probing, as the join's: a slot holds a row's 32-bit row hash (high half) and its
// index (low half). A row walks from its spread hash's slot until it finds a slot whose row has
// its key (nulls equal) or claims an empty one; the claimed slots, numbered by a scan, are the
// groups, and their rows are the groups' keys. Aggregations accumulate into 8-byte values per
// group (int64, uint64 or double, by the column's type) with atomics; floats' min and max by
// compare-and-swap, NaN being the greatest as SQL engines order it.
#include <spillway/table/gpu_groupby.hpp>
#include <spillway/table/gpu_join.hpp>

#include "core/detail/cuda_try.hpp"
#include "core/detail/nvtx.hpp"
#include "table/detail/groupby_common.hpp"
#include "table/detail/spread_hash.hpp"
#include "table/gpu/detail/device_column.cuh"

#include <cub/device/device_scan.cuh>

#include <bit>
#include <limits>
#include <string>
#include <type_traits>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::DeviceColumn;
using detail::raw;

constexpr unsigned block_threads = 256;
constexpr unsigned long long empty_slot = ~0ULL;

/// Each row's slot: the first row with its key claimed it.
__global__ void group_kernel(const DeviceColumn* keys, std::uint32_t nkeys, std::size_t rows,
                             unsigned long long* slots, std::size_t mask, std::uint32_t* row_slot) {
  const std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  const std::uint32_t h = detail::hash_row(keys, nkeys, r, default_hash_seed);
  const unsigned long long entry = (static_cast<unsigned long long>(h) << 32) | r;
  for (std::size_t s = spillway::detail::spread_hash(h) & mask;; s = (s + 1) & mask) {
    unsigned long long e = slots[s];
    if (e == empty_slot) {
      e = atomicCAS(slots + s, empty_slot, entry);
      if (e == empty_slot) {
        row_slot[r] = static_cast<std::uint32_t>(s);
        return;
      }
    }
    if (static_cast<std::uint32_t>(e >> 32) == h &&
        detail::keys_equal(keys, r, keys, static_cast<std::uint32_t>(e), nkeys, true)) {
      row_slot[r] = static_cast<std::uint32_t>(s);
      return;
    }
  }
}

/// claimed[s]: whether slot s holds a group (capacity + 1 values, the last 0, for the scan).
__global__ void claimed_kernel(const unsigned long long* slots, std::size_t capacity,
                               std::uint32_t* claimed) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s <= capacity) claimed[s] = s < capacity && slots[s] != empty_slot ? 1 : 0;
}

/// first[g]: group g's row (group ids are the scanned claims).
__global__ void first_rows_kernel(const unsigned long long* slots, std::size_t capacity,
                                  const std::uint32_t* group_of_slot, std::int32_t* first) {
  const std::size_t s = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (s >= capacity || slots[s] == empty_slot) return;
  first[group_of_slot[s]] = static_cast<std::int32_t>(static_cast<std::uint32_t>(slots[s]));
}

/// Each row's slot becomes its group, in place.
__global__ void row_group_kernel(std::uint32_t* row_slot, std::size_t rows,
                                 const std::uint32_t* group_of_slot) {
  const std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (r < rows) row_slot[r] = group_of_slot[row_slot[r]];
}

/// A DECIMAL128 sum's or extreme's accumulator: 16-byte aligned, for the 16-byte
/// compare-and-swap of min and max.
struct alignas(16) Acc128 {
  unsigned long long lo;
  long long hi;
};

/// The accumulator of a column of T: 8 bytes (int64, uint64 or double), 16 for decimals.
template <typename T>
using acc_t = std::conditional_t<
    std::is_same_v<T, Int128>, Acc128,
    std::conditional_t<std::is_floating_point_v<T>, double,
                       std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>>>;

__device__ inline Int128 as_int128(Acc128 a) {
  return {a.lo, a.hi};
}

/// A value as its accumulator, and back.
template <typename T>
__device__ acc_t<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, Int128>) {
    return Acc128{v.lo, v.hi};
  } else {
    return static_cast<acc_t<T>>(v);
  }
}
template <typename T>
__device__ T from_acc(acc_t<T> a) {
  if constexpr (std::is_same_v<T, Int128>) {
    return as_int128(a);
  } else {
    return static_cast<T>(a);
  }
}
/// An accumulated sum as a double, `unit` the worth of a decimal's stored 1: a decimal's as the
/// CPU's group-by converts it (sum_as_double; Int128::to_double rounds a small negative sum's
/// low half, so the GPU's decimal means differed from the CPU's from 2026-12-03 on).
template <typename A>
__device__ double acc_double(A a, double unit) {
  if constexpr (std::is_same_v<A, Acc128>) {
    return spillway::detail::sum_as_double(as_int128(a), unit);
  } else {
    return static_cast<double>(a);
  }
}

__device__ void atomic_add(double* a, double v) {
  atomicAdd(a, v);
}
__device__ void atomic_add(long long* a, long long v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(a), static_cast<unsigned long long>(v));
}
__device__ void atomic_add(unsigned long long* a, unsigned long long v) {
  atomicAdd(a, v);
}
/// A 128-bit sum as two 64-bit atomics: the low half, then the high half plus the carry the
/// low half's addition made. Every addition commutes, so the halves end exact in any order.
__device__ void atomic_add(Acc128* a, Acc128 v) {
  const unsigned long long old = atomicAdd(&a->lo, v.lo);
  const unsigned long long carry = old + v.lo < old ? 1ULL : 0ULL;
  atomicAdd(reinterpret_cast<unsigned long long*>(&a->hi),
            static_cast<unsigned long long>(v.hi) + carry);
}

/// x < y with NaN the greatest.
__device__ bool less(double x, double y) {
  return (x == x && y != y) || x < y;
}

/// *a = min (or max) of *a and v, NaN the greatest.
template <bool Min>
__device__ void atomic_extreme(double* a, double v) {
  auto* bits = reinterpret_cast<unsigned long long*>(a);
  unsigned long long old = *bits;
  for (;;) {
    const double cur = __longlong_as_double(static_cast<long long>(old));
    if (!(Min ? less(v, cur) : less(cur, v))) return;
    const unsigned long long seen =
        atomicCAS(bits, old, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (seen == old) return;
    old = seen;
  }
}
/// The same for decimals, by 16-byte compare-and-swap (compute capability 9.0 and later).
template <bool Min>
__device__ void atomic_extreme(Acc128* a, Acc128 v) {
  Acc128 old = *a;
  for (;;) {
    if (!(Min ? as_int128(v) < as_int128(old) : as_int128(old) < as_int128(v))) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const Acc128 seen = atomicCAS(a, old, v);
#else
    const Acc128 seen = old;
    __trap();  // (the build targets sm_90 and later)
#endif
    if (seen.lo == old.lo && seen.hi == old.hi) return;
    old = seen;
  }
}
template <bool Min, typename A>
__device__ void atomic_extreme(A* a, A v) {
  if constexpr (Min) {
    atomicMin(a, v);
  } else {
    atomicMax(a, v);
  }
}

/// Adds each valid value of `col` into its group's accumulator (sum, or min, or max) and
/// counts it.
template <typename T>
__global__ void accumulate_kernel(DeviceColumn col, std::size_t rows, const std::uint32_t* group,
                                  AggOp op, acc_t<T>* acc, unsigned long long* count) {
  const std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (r >= rows || !detail::is_valid(col, r)) return;
  const std::uint32_t g = group[r];
  atomicAdd(count + g, 1ULL);
  const acc_t<T> v = to_acc(reinterpret_cast<const T*>(col.data)[r]);
  if (op == AggOp::sum || op == AggOp::mean) {
    atomic_add(acc + g, v);
  } else if (op == AggOp::min) {
    atomic_extreme<true>(acc + g, v);
  } else {
    atomic_extreme<false>(acc + g, v);
  }
}

/// Counts each group's valid values of `col`.
__global__ void count_kernel(DeviceColumn col, std::size_t rows, const std::uint32_t* group,
                             unsigned long long* count) {
  const std::size_t r = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (r < rows && detail::is_valid(col, r)) atomicAdd(count + group[r], 1ULL);
}

template <typename A>
__global__ void fill_kernel(A* a, std::size_t n, A v) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) a[i] = v;
}

/// The output values: the sums as they are, means, or min and max back in the column's type
/// (0 for a group without values: its row is null).
template <typename T>
__global__ void finish_kernel(const acc_t<T>* acc, const unsigned long long* count,
                              std::size_t groups, AggOp op, double unit, void* out) {
  const std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (g >= groups) return;
  const unsigned long long n = count[g];
  if (op == AggOp::sum) {
    static_cast<acc_t<T>*>(out)[g] = n > 0 ? acc[g] : acc_t<T>{};
  } else if (op == AggOp::mean) {
    static_cast<double*>(out)[g] = n > 0 ? acc_double(acc[g], unit) / static_cast<double>(n) : 0.0;
  } else {
    static_cast<T*>(out)[g] = n > 0 ? from_acc<T>(acc[g]) : T{};
  }
}

/// Byte i of the mask: group 8i + j is valid when it has a value.
__global__ void valid_mask_kernel(const unsigned long long* count, std::size_t groups,
                                  std::uint8_t* mask) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= (groups + 7) / 8) return;
  unsigned v = 0;
  for (unsigned j = 0; j < 8 && i * 8 + j < groups; ++j) {
    if (count[i * 8 + j] > 0) v |= 1U << j;
  }
  mask[i] = static_cast<std::uint8_t>(v);
}

/// out[g] = sums[g] / counts[g], valid where the count is above 0 and the sum valid.
template <typename T>
__global__ void mean_of_kernel(DeviceColumn sums, DeviceColumn counts, std::size_t n, double unit,
                               double* out, unsigned long long* valid) {
  const std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (g >= n) return;
  const std::int64_t c =
      detail::is_valid(counts, g) ? reinterpret_cast<const std::int64_t*>(counts.data)[g] : 0;
  const bool ok = c > 0 && detail::is_valid(sums, g);
  out[g] = ok ? acc_double(to_acc(reinterpret_cast<const T*>(sums.data)[g]), unit) /
                    static_cast<double>(c)
              : 0.0;
  valid[g] = ok ? 1 : 0;
}

void check_launch() {
  SPILLWAY_CUDA_TRY(cudaGetLastError());
}

/// The accumulator's starting value for `op`.
template <typename A>
A start_value(AggOp op) {
  if constexpr (std::is_same_v<A, Acc128>) {
    const Int128 v = op == AggOp::min   ? Int128::max()
                     : op == AggOp::max ? Int128::lowest()
                                        : Int128{};
    return Acc128{v.lo, v.hi};
  } else {
    if (op == AggOp::min) {
      if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::quiet_NaN();
      return std::numeric_limits<A>::max();
    }
    if (op == AggOp::max) {
      if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
      return std::numeric_limits<A>::lowest();
    }
    return A{};
  }
}

/// One aggregation's output column over `groups` groups.
Column aggregate(const ColumnView& col, AggOp op, const std::uint32_t* group, std::size_t groups,
                 BufferResource& br, Stream stream) {
  const cudaStream_t s = raw(stream);
  const std::size_t rows = col.size;
  const DeviceColumn dc = detail::to_device_column(col);
  const unsigned row_blocks = detail::blocks_for(rows, block_threads);
  const unsigned group_blocks = detail::blocks_for(groups, block_threads);
  const DataType out_type = spillway::detail::aggregate_type(col.type, op);
  auto out =
      br.allocate(MemoryType::DEVICE, std::max<std::size_t>(groups, 1) * size_of(out_type), stream);
  if (op == AggOp::count) {  // into the INT64 output
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(out->data(), 0, out->size(), s));
    if (rows > 0) {
      count_kernel<<<row_blocks, block_threads, 0, s>>>(dc, rows, group,
                                                        as<unsigned long long>(*out));
      check_launch();
    }
    return Column(TypeId::INT64, groups, std::move(out));
  }
  auto count = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(groups, 1) * 8, stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(count->data(), 0, count->size(), s));
  spillway::detail::dispatch_fixed(col.type, [&]<typename T>() {
    using A = acc_t<T>;
    auto acc =
        br.allocate(MemoryType::DEVICE, std::max<std::size_t>(groups, 1) * sizeof(A), stream);
    if (groups > 0) {
      fill_kernel<A>
          <<<group_blocks, block_threads, 0, s>>>(as<A>(*acc), groups, start_value<A>(op));
      check_launch();
    }
    if (rows > 0) {
      accumulate_kernel<T><<<row_blocks, block_threads, 0, s>>>(dc, rows, group, op, as<A>(*acc),
                                                                as<unsigned long long>(*count));
      check_launch();
    }
    if (groups > 0) {
      finish_kernel<T><<<group_blocks, block_threads, 0, s>>>(
          as<const A>(*acc), as<const unsigned long long>(*count), groups, op,
          spillway::detail::value_unit(col.type), out->data());
      check_launch();
    }
  });
  auto mask = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(mask_bytes(groups), 1), stream);
  if (groups > 0) {
    valid_mask_kernel<<<detail::blocks_for(mask_bytes(groups), block_threads), block_threads, 0,
                        s>>>(as<const unsigned long long>(*count), groups, as<std::uint8_t>(*mask));
    check_launch();
  }
  return Column(out_type, groups, std::move(out), nullptr, std::move(mask));
}

}  // namespace

Table groupby(const TableView& table, std::span<const std::size_t> keys,
              std::span<const Aggregation> aggregations, BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("gpu groupby");
  const TableView kv = spillway::detail::groupby_keys(table, keys, aggregations);
  const std::size_t rows = table.num_rows();
  SPILLWAY_EXPECTS(
      rows < (std::size_t{1} << 31),
      "the GPU groupby takes fewer than 2^31 rows per call, got " + std::to_string(rows));
  SPILLWAY_EXPECTS(cuda::is_available(), "the GPU groupby needs a GPU");
  const cudaStream_t s = raw(stream);
  std::vector<DeviceColumn> cols;
  for (const ColumnView& c : kv.columns) cols.push_back(detail::to_device_column(c));
  auto d_keys = detail::to_device(cols, br, stream);

  // Each row's group.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(2 * rows, 64));
  auto slots = br.allocate(MemoryType::DEVICE, capacity * 8, stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(slots->data(), 0xFF, slots->size(), s));
  auto group = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(rows, 1) * 4, stream);
  if (rows > 0) {
    group_kernel<<<detail::blocks_for(rows, block_threads), block_threads, 0, s>>>(
        as<const DeviceColumn>(*d_keys), static_cast<std::uint32_t>(cols.size()), rows,
        as<unsigned long long>(*slots), capacity - 1, as<std::uint32_t>(*group));
    check_launch();
  }
  auto group_of_slot = br.allocate(MemoryType::DEVICE, (capacity + 1) * 4, stream);
  claimed_kernel<<<detail::blocks_for(capacity + 1, block_threads), block_threads, 0, s>>>(
      as<const unsigned long long>(*slots), capacity, as<std::uint32_t>(*group_of_slot));
  check_launch();
  {
    auto* d = as<std::uint32_t>(*group_of_slot);
    std::size_t temp = 0;
    SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, d, d, capacity + 1, s));
    auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
    SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scratch->data(), temp, d, d, capacity + 1, s));
  }
  std::uint32_t groups = 0;
  SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&groups, as<std::uint32_t>(*group_of_slot) + capacity,
                                    sizeof(groups), cudaMemcpyDeviceToHost, s));
  cuda::stream_synchronize(stream);
  auto first = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(groups, 1) * 4, stream);
  first_rows_kernel<<<detail::blocks_for(capacity, block_threads), block_threads, 0, s>>>(
      as<const unsigned long long>(*slots), capacity, as<const std::uint32_t>(*group_of_slot),
      as<std::int32_t>(*first));
  check_launch();
  if (rows > 0) {
    row_group_kernel<<<detail::blocks_for(rows, block_threads), block_threads, 0, s>>>(
        as<std::uint32_t>(*group), rows, as<const std::uint32_t>(*group_of_slot));
    check_launch();
  }
  slots.reset();
  group_of_slot.reset();

  // The keys of each group's first row, then the aggregations.
  Table key_table = gather(kv, as<const std::int32_t>(*first), groups, false, br, stream);
  std::vector<std::string> names = key_table.names();
  std::vector<Column> columns = std::move(key_table).release();
  for (const Aggregation& a : aggregations) {
    columns.push_back(aggregate(table.columns[a.column], a.op, as<const std::uint32_t>(*group),
                                groups, br, stream));
    names.push_back(spillway::detail::aggregate_name(table, a));
  }
  return Table(std::move(columns), std::move(names));
}

Column mean_of(const ColumnView& sums, const ColumnView& counts, BufferResource& br,
               Stream stream) {
  spillway::detail::check_mean_of(sums, counts);
  const cudaStream_t s = raw(stream);
  const std::size_t n = sums.size;
  auto out = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(n, 1) * 8, stream);
  auto valid = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(n, 1) * 8, stream);
  auto mask = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(mask_bytes(n), 1), stream);
  if (n > 0) {
    spillway::detail::dispatch_fixed(sums.type, [&]<typename T>() {
      mean_of_kernel<T><<<detail::blocks_for(n, block_threads), block_threads, 0, s>>>(
          detail::to_device_column(sums), detail::to_device_column(counts), n,
          spillway::detail::value_unit(sums.type), as<double>(*out),
          as<unsigned long long>(*valid));
    });
    check_launch();
    valid_mask_kernel<<<detail::blocks_for(mask_bytes(n), block_threads), block_threads, 0, s>>>(
        as<const unsigned long long>(*valid), n, as<std::uint8_t>(*mask));
    check_launch();
  }
  return Column(TypeId::FLOAT64, n, std::move(out), nullptr, std::move(mask));
}

}  // namespace spillway::gpu
