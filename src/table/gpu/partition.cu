// Hash partitioning on the GPU: hash_rows, hash_partition and partition_and_pack.
//
// Passes over the rows, all on the caller's stream:
//  1. count: each block owns a tile of consecutive rows; it hashes them, stores each row's
//     partition (2 bytes; 4 beyond 65535 partitions) and counts its rows per partition. The
//     counts are laid out partition-major (hist[p * tiles + t]), so one exclusive scan gives,
//     for every (partition, tile), where the tile's first row of that partition goes.
//  2. the partition sizes (and, for STRING columns, their character counts) go to the host,
//     which lays out and allocates the outputs.
//  3. place: each block walks its tile again in sub-tiles of 2048 rows, sorts the sub-tile's
//     rows by partition with a stable block radix sort (so rows keep their input order within
//     a partition, exactly as on the CPU) and copies each column in sorted order: consecutive
//     threads write consecutive rows of one partition, so the stores are coalesced, and read
//     within the sub-tile's few KiB of the column, which the caches hold.
// STRING columns take two more kernels: each row's position in partitioned order, a scan of
// the lengths in that order, and a copy of the characters.
#include <spillway/table/gpu.hpp>

#include <spillway/stats/memory_profiler.hpp>

#include "../../core/cuda_try.hpp"
#include "../arguments.hpp"
#include "../pack_format.hpp"
#include "batched_copy.cuh"
#include "device_column.cuh"

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <bit>
#include <limits>

namespace spillway::gpu {

namespace {

using detail::as;
using detail::DeviceColumn;
using detail::raw;

constexpr unsigned block_threads = 256;
constexpr unsigned full_mask = 0xFFFFFFFFU;
constexpr std::uint32_t no_partition = std::numeric_limits<std::uint32_t>::max();
/// The place pass sorts sub-tiles of block_threads x place_items rows.
constexpr unsigned place_items = 8;
constexpr std::size_t sub_rows = std::size_t{block_threads} * place_items;
/// Partitions up to which the count pass counts a warp's rows with one ballot per partition.
constexpr std::uint32_t few_partitions = 16;
/// Partitions up to which the count pass keeps its counters in shared memory (16 KiB).
constexpr std::size_t shared_count_partitions = 4096;

/// Where partition p's rows of column c go (dest[c * P + p]).
struct Dest {
  std::byte* data;         // first row (fixed width) or character 0 of the partition
  std::int32_t* offsets;   // the partition's offsets (STRING): entry i + 1 is row i's end
  std::uint32_t* mask;     // the bitmap holding the partition's validity bits, as words
  std::uint64_t mask_bit;  // bit of the partition's first row in `mask`
  std::uint64_t char_sub;  // subtracted from global character positions (STRING)
};

struct Tiling {
  std::size_t rows;
  std::uint32_t parts;
  int bits;               // radix sort bits: enough for parts - 1
  std::size_t tile_rows;  // a multiple of sub_rows
  std::size_t tiles;

  Tiling(std::size_t r, std::size_t p)
      : rows{r},
        parts{static_cast<std::uint32_t>(p)},
        bits{std::max(1, static_cast<int>(std::bit_width(p - 1)))},
        // at least 4 rows per partition and tile keeps the histogram at <= 1 byte per row
        tile_rows{std::max<std::size_t>(1, (4 * p + sub_rows - 1) / sub_rows) * sub_rows},
        tiles{(r + tile_rows - 1) / tile_rows} {}
  [[nodiscard]] __host__ __device__ bool shared_counts() const {
    return parts <= shared_count_partitions;
  }
};

__global__ void hash_kernel(const DeviceColumn* keys, std::uint32_t nkeys, std::uint32_t seed,
                            std::size_t rows, std::uint32_t* out) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row < rows) out[row] = detail::hash_row(keys, nkeys, row, seed);
}

/// Pass 1: partitions and per-tile counts. `hist` is zeroed.
template <typename PidT>
__global__ void __launch_bounds__(block_threads)
    count_kernel(const DeviceColumn* keys, std::uint32_t nkeys, std::uint32_t seed, Tiling tl,
                 PidT* pid, std::uint32_t* hist) {
  extern __shared__ std::uint32_t counts[];
  const std::size_t t = blockIdx.x;
  const bool shared = tl.shared_counts();
  if (shared) {
    for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) counts[p] = 0;
    __syncthreads();
  }
  const bool pow2 = (tl.parts & (tl.parts - 1)) == 0;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  // Every lane runs the same number of rounds, for __match_any_sync.
  for (std::size_t base = t * tl.tile_rows; base < end; base += blockDim.x) {
    const std::size_t row = base + threadIdx.x;
    std::uint32_t p = no_partition;
    if (row < end) {
      const std::uint32_t h = detail::hash_row(keys, nkeys, row, seed);
      p = pow2 ? (h & (tl.parts - 1)) : (h % tl.parts);
      pid[row] = static_cast<PidT>(p);
    }
    // One atomic per partition and warp instead of one per row.
    if (tl.parts <= few_partitions) {
      for (std::uint32_t q = 0; q < tl.parts; ++q) {
        const unsigned in_q = __ballot_sync(full_mask, p == q);
        if (in_q != 0 && threadIdx.x % 32 == 0) atomicAdd(&counts[q], __popc(in_q));
      }
    } else {
      const unsigned peers = __match_any_sync(full_mask, p);
      if (row < end && threadIdx.x % 32 == static_cast<unsigned>(__ffs(peers) - 1)) {
        atomicAdd(shared ? &counts[p] : &hist[p * tl.tiles + t],
                  static_cast<std::uint32_t>(__popc(peers)));
      }
    }
  }
  if (shared) {
    __syncthreads();
    for (std::uint32_t p = threadIdx.x; p < tl.parts; p += blockDim.x) {
      hist[p * tl.tiles + t] = counts[p];
    }
  }
}

/// starts[p] = scanned[p * tiles] for p <= parts (scanned[parts * tiles] is the total).
__global__ void starts_kernel(const std::uint32_t* scanned, Tiling tl, std::uint32_t* starts) {
  const std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p <= tl.parts) starts[p] = scanned[p * tl.tiles];
}

template <typename PidT>
struct PlaceShared {
  using Sort = cub::BlockRadixSort<PidT, block_threads, place_items, std::uint16_t>;
  using Scan = cub::BlockScan<std::uint32_t, block_threads>;
  union {
    typename Sort::TempStorage sort;
    typename Scan::TempStorage scan;
  } u;
  PidT pid[sub_rows];           // in sorted order: the partition,
  std::uint16_t src[sub_rows];  // the row within the sub-tile,
  std::uint32_t at[sub_rows];   // its position in partitioned order, or within its partition
};

/// The sorted rows thread j places: j, j + block_threads, ... (row within the sub-tile, its
/// partition, its index within the partition), read once from shared memory for all columns.
struct Placement {
  std::uint16_t src[place_items];
  std::uint32_t pid[place_items];
  std::uint32_t at[place_items];
};

/// Copies one fixed-width column of the sub-tile to its partitions in sorted order: the stores
/// of consecutive threads are consecutive rows of one partition (coalesced); the loads gather
/// within the sub-tile's few KiB of the column, which the caches hold. All of a thread's loads
/// are in flight before its stores.
template <typename T>
__device__ void place_values(const Placement& pl, const T* __restrict__ col, std::uint32_t n,
                             const Dest* dest) {
  T v[place_items];
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (threadIdx.x + i * block_threads < n) v[i] = col[pl.src[i]];
  }
#pragma unroll
  for (unsigned i = 0; i < place_items; ++i) {
    if (threadIdx.x + i * block_threads < n) {
      reinterpret_cast<T*>(dest[pl.pid[i]].data)[pl.at[i]] = v[i];
    }
  }
}

/// Pass 3. `cursors[p * tiles + t]` starts as the scan and is advanced as rows are placed.
/// Positions: each row's place in partitioned order into `pos`. Otherwise every fixed-width
/// column's values and every validity bit go to `dest`.
template <typename PidT, bool Positions>
__global__ void __launch_bounds__(block_threads)
    place_kernel(const PidT* pid, Tiling tl, std::uint32_t* cursors, const std::uint32_t* starts,
                 std::uint32_t* pos, const DeviceColumn* cols, std::uint32_t ncols,
                 const Dest* dest) {
  __shared__ PlaceShared<PidT> sh;
  using Sh = PlaceShared<PidT>;
  const std::size_t t = blockIdx.x;
  const std::size_t end = min(tl.rows, (t + 1) * tl.tile_rows);
  for (std::size_t sub = t * tl.tile_rows; sub < end; sub += sub_rows) {
    const auto n = static_cast<std::uint32_t>(min(sub_rows, end - sub));
    PidT keys[place_items];
    std::uint16_t idx[place_items];
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned j = threadIdx.x * place_items + i;
      keys[i] = j < n ? pid[sub + j] : static_cast<PidT>(~PidT{0});  // padding sorts last
      idx[i] = static_cast<std::uint16_t>(j);
    }
    __syncthreads();  // the previous sub-tile is done with `sh`
    typename Sh::Sort(sh.u.sort).Sort(keys, idx, 0, tl.bits);
    for (unsigned i = 0; i < place_items; ++i) {
      sh.pid[threadIdx.x * place_items + i] = keys[i];
      sh.src[threadIdx.x * place_items + i] = idx[i];
    }
    __syncthreads();
    // Where each run of equal partitions starts (the running max of the run heads).
    std::uint32_t run[place_items];
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      run[i] = (k == 0 || sh.pid[k - 1] != keys[i]) ? k : 0;
    }
    typename Sh::Scan(sh.u.scan).InclusiveScan(run, run, ::cuda::maximum<>{});
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      if (k >= n) continue;
      const std::uint32_t at = cursors[keys[i] * tl.tiles + t] + (k - run[i]);
      sh.at[k] = Positions ? at : at - starts[keys[i]];
    }
    __syncthreads();  // every cursor is read before the run ends advance them
    for (unsigned i = 0; i < place_items; ++i) {
      const unsigned k = threadIdx.x * place_items + i;
      if (k < n && (k + 1 == n || sh.pid[k + 1] != keys[i])) {
        cursors[keys[i] * tl.tiles + t] += k - run[i] + 1;
      }
    }
    if constexpr (Positions) {
      for (std::uint32_t k = threadIdx.x; k < n; k += blockDim.x) pos[sub + sh.src[k]] = sh.at[k];
    } else {
      Placement pl;
#pragma unroll
      for (unsigned i = 0; i < place_items; ++i) {
        const unsigned k = threadIdx.x + i * block_threads;
        pl.src[i] = k < n ? sh.src[k] : 0;
        pl.pid[i] = k < n ? static_cast<std::uint32_t>(sh.pid[k]) : 0;
        pl.at[i] = k < n ? sh.at[k] : 0;
      }
      for (std::uint32_t c = 0; c < ncols; ++c) {
        const DeviceColumn& col = cols[c];
        const Dest* d = dest + std::size_t{c} * tl.parts;
        switch (col.width) {
          case 1:
            place_values(pl, reinterpret_cast<const std::uint8_t*>(col.data) + sub, n, d);
            break;
          case 2:
            place_values(pl, reinterpret_cast<const std::uint16_t*>(col.data) + sub, n, d);
            break;
          case 4:
            place_values(pl, reinterpret_cast<const std::uint32_t*>(col.data) + sub, n, d);
            break;
          case 8:
            place_values(pl, reinterpret_cast<const std::uint64_t*>(col.data) + sub, n, d);
            break;
          default:  // STRING: string_kernel
            break;
        }
        if (col.mask == nullptr) continue;
        for (unsigned i = 0; i < place_items; ++i) {
          if (threadIdx.x + i * block_threads >= n || !detail::is_valid(col, sub + pl.src[i])) {
            continue;
          }
          const Dest& dp = d[pl.pid[i]];
          const std::uint64_t bit = dp.mask_bit + pl.at[i];
          atomicOr(dp.mask + bit / 32, 1U << (bit % 32));
        }
      }
    }
  }
}

/// lengths[pos[row]] = length of row's string; lengths[rows] = 0.
__global__ void lengths_kernel(DeviceColumn col, std::size_t rows, const std::uint32_t* pos,
                               std::uint64_t* lengths) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row < rows) {
    lengths[pos[row]] = static_cast<std::uint64_t>(col.offsets[row + 1] - col.offsets[row]);
  } else if (row == rows) {
    lengths[rows] = 0;
  }
}

/// out[p] = values[starts[p]] for p <= parts.
__global__ void gather_kernel(const std::uint64_t* values, const std::uint32_t* starts,
                              std::uint32_t parts, std::uint64_t* out) {
  const std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p <= parts) out[p] = values[starts[p]];
}

/// A STRING column's offsets and characters; `chars` holds the exclusive scan of the lengths
/// in partitioned order (global character positions).
template <typename PidT>
__global__ void string_kernel(DeviceColumn col, std::size_t c, std::size_t rows,
                              std::uint32_t parts, const PidT* pid, const std::uint32_t* pos,
                              const std::uint32_t* starts, const std::uint64_t* chars,
                              const Dest* dest) {
  const std::size_t row = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  const std::uint32_t p = pid[row];
  const std::uint32_t at = pos[row];
  const Dest& d = dest[c * parts + p];
  const std::size_t i = at - starts[p];
  const std::uint64_t from = chars[at] - d.char_sub;
  const std::uint64_t to = chars[at + 1] - d.char_sub;
  d.offsets[i + 1] = static_cast<std::int32_t>(to);
  const auto* src = reinterpret_cast<const char*>(col.data) + col.offsets[row];
  auto* dst = reinterpret_cast<char*>(d.data) + from;
  for (std::uint64_t k = 0; k < to - from; ++k) dst[k] = src[k];
}

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

/// Partitions `table` and writes every row to `make_dest(sizes)`'s destinations:
/// make_dest returns dest[c * parts + p] and the ranges to zero before the scatter.
template <typename PidT, typename MakeDest>
void partition_rows(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                    std::uint32_t seed, BufferResource& br, Stream stream, MakeDest&& make_dest) {
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  const Tiling tl(rows, parts);
  std::vector<DeviceColumn> key_cols;
  for (std::size_t k : keys) key_cols.push_back(detail::to_device_column(table.columns[k]));
  auto d_keys = detail::to_device(key_cols, br, stream);
  auto d_cols = detail::to_device(device_columns(table), br, stream);

  auto pid = br.allocate(MemoryType::DEVICE, rows * sizeof(PidT), stream);
  const std::size_t hist_n = parts * tl.tiles + 1;
  auto hist = br.allocate(MemoryType::DEVICE, hist_n * sizeof(std::uint32_t), stream);
  SPILLWAY_CUDA_TRY(cudaMemsetAsync(hist->data(), 0, hist->size(), raw(stream)));
  SPILLWAY_EXPECTS(tl.tiles <= 0x7FFFFFFFU, "too many rows for one GPU partitioning call");
  const auto blocks = static_cast<unsigned>(tl.tiles);
  if (tl.tiles > 0) {
    const std::size_t count_smem = tl.shared_counts() ? parts * sizeof(std::uint32_t) : 0;
    count_kernel<PidT><<<blocks, block_threads, count_smem, raw(stream)>>>(
        as<const DeviceColumn>(*d_keys), static_cast<std::uint32_t>(keys.size()), seed, tl,
        as<PidT>(*pid), as<std::uint32_t>(*hist));
    check_launch();
  }
  exclusive_sum(as<std::uint32_t>(*hist), hist_n, br, stream);
  auto starts = br.allocate(MemoryType::DEVICE, (parts + 1) * sizeof(std::uint32_t), stream);
  starts_kernel<<<detail::blocks_for(parts + 1, block_threads), block_threads, 0, raw(stream)>>>(
      as<const std::uint32_t>(*hist), tl, as<std::uint32_t>(*starts));
  check_launch();

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
      if (tl.tiles > 0) {  // on a copy of the scan: the place pass below needs it again
        auto cursors = br.allocate(MemoryType::DEVICE, hist->size(), stream);
        cuda::memcpy_async(cursors->data(), hist->data(), hist->size(), stream);
        place_kernel<PidT, true><<<blocks, block_threads, 0, raw(stream)>>>(
            as<const PidT>(*pid), tl, as<std::uint32_t>(*cursors), as<const std::uint32_t>(*starts),
            as<std::uint32_t>(*pos), nullptr, 0, nullptr);
        check_launch();
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
        as<const std::uint64_t>(*char_pos[c]), as<const std::uint32_t>(*starts),
        static_cast<std::uint32_t>(parts), as<std::uint64_t>(*char_starts[c]));
    check_launch();
    sizes.chars[c].resize(parts + 1);
    cuda::memcpy_async(sizes.chars[c].data(), char_starts[c]->data(), char_starts[c]->size(),
                       stream);
  }
  detail::to_host(sizes.starts, starts->data(), stream);  // synchronizes

  auto [dest, zero] = make_dest(sizes);
  detail::copy_ranges(std::span<const detail::CopyRange>(zero), br, stream);
  if (tl.tiles == 0) return;
  auto d_dest = detail::to_device(dest, br, stream);
  place_kernel<PidT, false><<<blocks, block_threads, 0, raw(stream)>>>(
      as<const PidT>(*pid), tl, as<std::uint32_t>(*hist), as<const std::uint32_t>(*starts), nullptr,
      as<const DeviceColumn>(*d_cols), static_cast<std::uint32_t>(ncols), as<const Dest>(*d_dest));
  check_launch();
  for (std::size_t c = 0; c < ncols; ++c) {
    if (table.columns[c].type != TypeId::STRING) continue;
    string_kernel<PidT><<<detail::blocks_for(rows, block_threads), block_threads, 0, raw(stream)>>>(
        detail::to_device_column(table.columns[c]), c, rows, static_cast<std::uint32_t>(parts),
        as<const PidT>(*pid), as<const std::uint32_t>(*pos), as<const std::uint32_t>(*starts),
        as<const std::uint64_t>(*char_pos[c]), as<const Dest>(*d_dest));
    check_launch();
  }
}

template <typename MakeDest>
void partition_any(const TableView& table, std::span<const std::size_t> keys, std::size_t parts,
                   std::uint32_t seed, BufferResource& br, Stream stream, MakeDest&& make_dest) {
  check_args(table, keys, parts);
  if (parts <= 0xFFFF) {
    partition_rows<std::uint16_t>(table, keys, parts, seed, br, stream, make_dest);
  } else {
    partition_rows<std::uint32_t>(table, keys, parts, seed, br, stream, make_dest);
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
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "partition_and_pack");
  const std::size_t ncols = table.num_columns();
  std::vector<PackedData> out(num_partitions);
  partition_any(table, keys, num_partitions, seed, br, stream, [&](const Sizes& sizes) {
    std::vector<Dest> dest(ncols * num_partitions);
    std::vector<detail::CopyRange> zero;
    std::vector<std::size_t> chars(ncols, 0);
    for (std::size_t p = 0; p < num_partitions; ++p) {
      for (std::size_t c = 0; c < ncols; ++c) {
        if (!sizes.chars[c].empty()) chars[c] = sizes.chars[c][p + 1] - sizes.chars[c][p];
        SPILLWAY_EXPECTS(chars[c] <= static_cast<std::size_t>(INT32_MAX),
                         "partition " + std::to_string(p) + " of string column " +
                             std::to_string(c) + " has more characters than int32 offsets allow");
      }
      const auto layout =
          spillway::detail::make_layout(table, sizes.starts[p + 1] - sizes.starts[p], chars);
      out[p].metadata = spillway::detail::encode(layout);
      out[p].payload = br.allocate(MemoryType::DEVICE, layout.payload_size, stream);
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
  return out;
}

PartitionedTable hash_partition(const TableView& table, std::span<const std::size_t> keys,
                                std::size_t num_partitions, BufferResource& br, Stream stream,
                                std::uint32_t seed) {
  const std::size_t rows = table.num_rows();
  const std::size_t ncols = table.num_columns();
  std::vector<Column> columns;
  std::vector<std::size_t> offsets(num_partitions + 1, 0);
  partition_any(table, keys, num_partitions, seed, br, stream, [&](const Sizes& sizes) {
    std::vector<Dest> dest(ncols * num_partitions);
    std::vector<detail::CopyRange> zero;
    for (std::size_t p = 0; p <= num_partitions; ++p) offsets[p] = sizes.starts[p];
    for (std::size_t c = 0; c < ncols; ++c) {
      const ColumnView& col = table.columns[c];
      const bool str = col.type == TypeId::STRING;
      if (str) {
        SPILLWAY_EXPECTS(
            sizes.chars[c][num_partitions] <= static_cast<std::uint64_t>(INT32_MAX),
            "string column " + std::to_string(c) + " has more characters than int32 offsets allow");
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
                 mask ? reinterpret_cast<std::uint32_t*>(mask->data()) : nullptr, sizes.starts[p],
                 0};
      }
      columns.emplace_back(col.type, rows, std::move(data), std::move(off), std::move(mask));
    }
    return std::pair{std::move(dest), std::move(zero)};
  });
  return PartitionedTable{Table(std::move(columns), table.names), std::move(offsets)};
}

}  // namespace spillway::gpu
