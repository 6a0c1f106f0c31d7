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
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

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

using spillway::detail::output_rows;
using spillway::detail::outputs_pairs;

/// counts[l] = left row l's output rows; marks the matched right rows of a full join.
__global__ void count_kernel(Probe p, std::uint32_t* counts, std::uint8_t* matched) {
  const std::size_t l = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (l >= p.left_rows) return;
  std::uint32_t n = 0;
  const bool all = outputs_pairs(p.type);
  for_each_match(p, l, [&](std::uint32_t r) {
    ++n;
    if (matched != nullptr) matched[r] = 1;
    return all;
  });
  counts[l] = static_cast<std::uint32_t>(output_rows(p.type, n));
}

/// Writes the output rows of left rows [first_row, end_row) whose positions (offsets[l] on)
/// lie in the window [p0, q0), at position - p0.
__global__ void write_kernel(Probe p, const std::uint64_t* offsets, std::size_t first_row,
                             std::size_t end_row, std::uint64_t p0, std::uint64_t q0,
                             std::int32_t* out_left, std::int32_t* out_right) {
  const std::size_t l = first_row + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (l >= end_row) return;
  const std::uint64_t first = offsets[l];
  const std::uint64_t end = offsets[l + 1];
  if (first >= q0 || end <= p0) return;
  const auto li = static_cast<std::int32_t>(l);
  const bool all = outputs_pairs(p.type);
  std::uint64_t at = first;
  for_each_match(p, l, [&](std::uint32_t r) {
    if (all && at >= p0) {
      out_left[at - p0] = li;
      out_right[at - p0] = static_cast<std::int32_t>(r);
    }
    ++at;
    return all && at < q0;
  });
  // One output row that is not a pair: an unmatched row a left or full join keeps, or the
  // row itself in a semi or anti join.
  if (end > first && first >= p0 && (at == first || !all)) {
    out_left[first - p0] = li;
    if (all) out_right[first - p0] = -1;
  }
}

/// first[k] = the last left row whose output starts at or before k * chunk, end[k] = the first
/// whose output starts at or after min((k + 1) * chunk, pairs): window k's rows.
__global__ void window_rows_kernel(const std::uint64_t* offsets, std::size_t rows,
                                   std::uint64_t chunk, std::uint64_t pairs, std::size_t windows,
                                   std::uint64_t* first, std::uint64_t* end) {
  const std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (k >= windows) return;
  const std::uint64_t p0 = k * chunk;
  const std::uint64_t q0 = pairs - p0 > chunk ? p0 + chunk : pairs;
  std::size_t lo = 0;  // upper_bound(p0) - 1 over offsets[0 .. rows]
  std::size_t hi = rows + 1;
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (offsets[mid] <= p0) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  first[k] = lo;
  std::size_t a = lo;  // lower_bound(q0) over offsets[lo .. rows]
  std::size_t b = rows;
  while (a < b) {
    const std::size_t mid = (a + b) / 2;
    if (offsets[mid] < q0) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  end[k] = a;
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

namespace {

/// A join's probe on the GPU: the hash table of the right side, each left row's output rows
/// and their exclusive sums (the pairs' positions), the matched right rows of a full join;
/// then the pairs of any window of positions, and a full join's unmatched right rows.
class DeviceProbe {
 public:
  DeviceProbe(const TableView& left, std::span<const std::size_t> left_keys, const TableView& right,
              std::span<const std::size_t> right_keys, JoinType type, BufferResource& br,
              Stream stream)
      : br_{br}, stream_{stream}, nl_{left.num_rows()}, nr_{right.num_rows()} {
    const auto [lk, rk] = spillway::detail::join_key_views(left, left_keys, right, right_keys);
    SPILLWAY_EXPECTS(nl_ <= max_rows && nr_ <= max_rows,
                     "the GPU join takes sides of fewer than 2^31 rows, got " +
                         std::to_string(nl_) + " left and " + std::to_string(nr_) + " right");
    SPILLWAY_EXPECTS(cuda::is_available(), "the GPU join needs a GPU");
    const cudaStream_t s = raw(stream);
    d_lk_ = key_columns(lk, br, stream);
    d_rk_ = key_columns(rk, br, stream);
    const auto nkeys = static_cast<std::uint32_t>(lk.columns.size());

    // Build.
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(2 * nr_, 64));
    slots_ = br.allocate(MemoryType::DEVICE, capacity * sizeof(unsigned long long), stream);
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(slots_->data(), 0xFF, slots_->size(), s));
    probe_ = Probe{Keys{as<const DeviceColumn>(*d_lk_), nkeys},
                   Keys{as<const DeviceColumn>(*d_rk_), nkeys},
                   nl_,
                   as<const unsigned long long>(*slots_),
                   capacity - 1,
                   type};
    if (nr_ > 0) {
      build_kernel<<<detail::blocks_for(nr_, block_threads), block_threads, 0, s>>>(
          probe_.right, nr_, as<unsigned long long>(*slots_), capacity - 1);
      check_launch();
    }

    // Count (marking a full join's matched rows), then scan.
    if (type == JoinType::full && nr_ > 0) {
      matched_ = br.allocate(MemoryType::DEVICE, nr_, stream);
      SPILLWAY_CUDA_TRY(cudaMemsetAsync(matched_->data(), 0, nr_, s));
    }
    auto counts = br.allocate(MemoryType::DEVICE, (nl_ + 1) * sizeof(std::uint32_t), stream);
    offsets_ = br.allocate(MemoryType::DEVICE, (nl_ + 1) * sizeof(std::uint64_t), stream);
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(counts->data(), 0, counts->size(), s));
    if (nl_ > 0) {
      count_kernel<<<detail::blocks_for(nl_, block_threads), block_threads, 0, s>>>(
          probe_, as<std::uint32_t>(*counts), matched_ ? as<std::uint8_t>(*matched_) : nullptr);
      check_launch();
    }
    {
      const auto* in = as<const std::uint32_t>(*counts);
      auto* out = as<std::uint64_t>(*offsets_);
      const ::cuda::std::plus<std::uint64_t> sum;
      std::size_t temp = 0;
      SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveScan(nullptr, temp, in, out, sum,
                                                       std::uint64_t{0}, nl_ + 1, s));
      auto scratch = br.allocate(MemoryType::DEVICE, temp, stream);
      SPILLWAY_CUDA_TRY(cub::DeviceScan::ExclusiveScan(scratch->data(), temp, in, out, sum,
                                                       std::uint64_t{0}, nl_ + 1, s));
    }
    counts.reset();
    SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&pairs_, as<std::uint64_t>(*offsets_) + nl_, sizeof(pairs_),
                                      cudaMemcpyDeviceToHost, s));
    cuda::stream_synchronize(stream);
  }

  /// The output rows of the left rows (not a full join's unmatched right rows).
  [[nodiscard]] std::uint64_t pairs() const noexcept { return pairs_; }

  /// For windows of `chunk` positions over the pairs: each window's first and end left row.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::size_t>> window_rows(std::uint64_t chunk) {
    const std::size_t windows =
        pairs_ == 0 ? 0 : static_cast<std::size_t>((pairs_ - 1) / chunk + 1);
    std::vector<std::pair<std::size_t, std::size_t>> out;
    if (windows == 1) return {{0, nl_}};
    if (windows == 0) return out;
    auto bounds = br_.allocate(MemoryType::DEVICE, 2 * windows * sizeof(std::uint64_t), stream_);
    window_rows_kernel<<<detail::blocks_for(windows, block_threads), block_threads, 0,
                         raw(stream_)>>>(as<const std::uint64_t>(*offsets_), nl_, chunk, pairs_,
                                         windows, as<std::uint64_t>(*bounds),
                                         as<std::uint64_t>(*bounds) + windows);
    check_launch();
    std::vector<std::uint64_t> host(2 * windows);
    detail::to_host(host, bounds->data(), stream_);
    for (std::size_t k = 0; k < windows; ++k) out.emplace_back(host[k], host[windows + k]);
    return out;
  }

  /// Writes the pairs at positions [p0, q0) (left rows [a, b)) to `left` and `right` (right
  /// null for semi and anti joins), at position - p0.
  void write(std::size_t a, std::size_t b, std::uint64_t p0, std::uint64_t q0, std::int32_t* left,
             std::int32_t* right) {
    if (b <= a) return;
    write_kernel<<<detail::blocks_for(b - a, block_threads), block_threads, 0, raw(stream_)>>>(
        probe_, as<const std::uint64_t>(*offsets_), a, b, p0, q0, left, right);
    check_launch();
  }

  /// A full join's right rows that no left row matched, in their order (int32, DEVICE), and
  /// their number; none for other joins.
  std::pair<std::unique_ptr<Buffer>, std::size_t> unmatched() {
    if (!matched_) return {nullptr, 0};
    const cudaStream_t s = raw(stream_);
    auto rows_out = br_.allocate(MemoryType::DEVICE, nr_ * sizeof(std::int32_t), stream_);
    auto selected = br_.allocate(MemoryType::DEVICE, sizeof(std::int64_t), stream_);
    const thrust::counting_iterator<std::int32_t> rows(0);
    const Unmatched pred{as<const std::uint8_t>(*matched_)};
    auto* out = as<std::int32_t>(*rows_out);
    std::size_t temp = 0;
    SPILLWAY_CUDA_TRY(cub::DeviceSelect::If(nullptr, temp, rows, out, as<std::int64_t>(*selected),
                                            static_cast<std::int64_t>(nr_), pred, s));
    auto scratch = br_.allocate(MemoryType::DEVICE, temp, stream_);
    SPILLWAY_CUDA_TRY(cub::DeviceSelect::If(scratch->data(), temp, rows, out,
                                            as<std::int64_t>(*selected),
                                            static_cast<std::int64_t>(nr_), pred, s));
    std::int64_t n = 0;
    SPILLWAY_CUDA_TRY(cudaMemcpyAsync(&n, selected->data(), sizeof(n), cudaMemcpyDeviceToHost, s));
    cuda::stream_synchronize(stream_);
    return {std::move(rows_out), static_cast<std::size_t>(n)};
  }

  /// Frees the count pass's offsets (once every window is written).
  void release_offsets() noexcept { offsets_.reset(); }

 private:
  BufferResource& br_;
  Stream stream_;
  std::size_t nl_, nr_;
  std::unique_ptr<Buffer> d_lk_, d_rk_, slots_, offsets_, matched_;
  Probe probe_{};
  std::uint64_t pairs_{0};
};

/// The joined table of `n` output rows: the left columns gathered by `left_rows`, then for
/// joins that output pairs the right ones by `right_rows` (-1: a row of nulls), with masks
/// wherever the join can make a null.
Table gathered(const TableView& left, const TableView& right, JoinType type,
               const std::int32_t* left_rows, const std::int32_t* right_rows, std::size_t n,
               BufferResource& br, Stream stream) {
  Table l = gather(left, left_rows, n, type == JoinType::full, br, stream);
  if (!outputs_pairs(type)) return l;
  const bool right_nulls = type == JoinType::left || type == JoinType::full;
  return spillway::detail::joined_table(std::move(l),
                                        gather(right, right_rows, n, right_nulls, br, stream));
}

/// `n` -1 values (DEVICE, int32): the null side of a full join's unmatched right rows.
std::unique_ptr<Buffer> minus_ones(std::size_t n, BufferResource& br, Stream stream) {
  auto b = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(n, 1) * 4, stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(b->data(), 0xFF, b->size(), raw(stream)));
  return b;
}

}  // namespace

JoinMaps join_maps(const TableView& left, std::span<const std::size_t> left_keys,
                   const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                   BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("gpu join_maps");
  DeviceProbe probe(left, left_keys, right, right_keys, type, br, stream);
  const std::uint64_t pairs = probe.pairs();
  auto [unmatched, u] = probe.unmatched();
  const std::size_t bound = pairs + u;
  SPILLWAY_EXPECTS(bound <= max_rows, "the GPU join's output has 2^31 rows or more (" +
                                          std::to_string(bound) + "): join smaller partitions");
  JoinMaps maps;
  maps.size = bound;
  maps.left = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(bound, 1) * 4, stream);
  if (outputs_pairs(type)) {
    maps.right = br.allocate(MemoryType::DEVICE, std::max<std::size_t>(bound, 1) * 4, stream);
  }
  probe.write(0, left.num_rows(), 0, pairs, as<std::int32_t>(*maps.left),
              maps.right ? as<std::int32_t>(*maps.right) : nullptr);
  if (u > 0) {  // the unmatched right rows, in their order, with nulls on the left
    const cudaStream_t s = raw(stream);
    SPILLWAY_CUDA_TRY(cudaMemsetAsync(as<std::int32_t>(*maps.left) + pairs, 0xFF, u * 4, s));
    SPILLWAY_CUDA_TRY(cudaMemcpyAsync(as<std::int32_t>(*maps.right) + pairs, unmatched->data(),
                                      u * 4, cudaMemcpyDeviceToDevice, s));
  }
  return maps;
}

void hash_join(const TableView& left, std::span<const std::size_t> left_keys,
               const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
               BufferResource& br, Stream stream, std::size_t chunk_rows,
               const std::function<void(Table&&)>& out) {
  SPILLWAY_NVTX_RANGE("gpu hash_join");
  SPILLWAY_EXPECTS(chunk_rows > 0, "join: chunks of 0 rows");
  const std::uint64_t chunk = std::min<std::uint64_t>(chunk_rows, max_rows);
  DeviceProbe probe(left, left_keys, right, right_keys, type, br, stream);
  const bool pairs_out = outputs_pairs(type);
  const auto joined = [&](const std::int32_t* l, const std::int32_t* r, std::size_t n) {
    return gathered(left, right, type, l, r, n, br, stream);
  };
  bool any = false;
  const std::uint64_t pairs = probe.pairs();
  std::uint64_t p0 = 0;
  for (const auto& [a, b] : probe.window_rows(chunk)) {
    const std::uint64_t q0 = pairs - p0 > chunk ? p0 + chunk : pairs;
    const std::size_t n = q0 - p0;
    auto l = br.allocate(MemoryType::DEVICE, n * 4, stream);
    auto r = pairs_out ? br.allocate(MemoryType::DEVICE, n * 4, stream) : nullptr;
    probe.write(a, b, p0, q0, as<std::int32_t>(*l), r ? as<std::int32_t>(*r) : nullptr);
    Table t = joined(as<const std::int32_t>(*l), r ? as<const std::int32_t>(*r) : nullptr, n);
    l.reset();
    r.reset();
    out(std::move(t));
    any = true;
    p0 = q0;
  }
  probe.release_offsets();
  auto [unmatched, u] = probe.unmatched();
  if (u > 0) {
    auto nulls = minus_ones(std::min<std::size_t>(chunk, u), br, stream);
    for (std::size_t at = 0; at < u; at += chunk) {
      const std::size_t n = std::min<std::size_t>(chunk, u - at);
      out(joined(as<const std::int32_t>(*nulls), as<const std::int32_t>(*unmatched) + at, n));
      any = true;
    }
  }
  if (!any) {
    out(joined(nullptr, nullptr, 0));
  }
}

Table hash_join(const TableView& left, std::span<const std::size_t> left_keys,
                const TableView& right, std::span<const std::size_t> right_keys, JoinType type,
                BufferResource& br, Stream stream) {
  SPILLWAY_NVTX_RANGE("gpu hash_join");
  const JoinMaps maps = join_maps(left, left_keys, right, right_keys, type, br, stream);
  return gathered(left, right, type, as<const std::int32_t>(*maps.left),
                  maps.right ? as<const std::int32_t>(*maps.right) : nullptr, maps.size, br,
                  stream);
}

}  // namespace spillway::gpu
