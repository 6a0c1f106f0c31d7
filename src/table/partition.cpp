#include <spillway/table/partition.hpp>

#include <spillway/core/error.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include "core/detail/nvtx.hpp"

#include <spillway/table/pack_format.hpp>
#include <spillway/table/partition_order.hpp>
#include "table/detail/arguments.hpp"
#include "table/detail/cpu_threads.hpp"
#include "table/detail/payload_blocks.hpp"
#include "table/detail/type_dispatch.hpp"
#include "table/detail/write_combiner.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <numeric>

#include <unistd.h>

namespace spillway {

namespace {

constexpr std::size_t block_rows = 2048;

/// Where partition p's rows of one column go.
struct ColumnDest {
  std::byte* data{nullptr};        // first row (fixed width) or first character (strings)
  std::int32_t* offsets{nullptr};  // entry 0 of the partition's offsets
  std::int32_t char_base{0};       // offset value of the partition's first character
  std::uint8_t* mask{nullptr};     // the bitmap holding the partition's validity bits
  std::size_t mask_bit{0};         // bit of the partition's first row in `mask`
};

/// Partition counts up to which write-combining buffers are used (they take 64 bytes per
/// partition and fixed-width column per thread). On the build machine hash_partition of 8 Mi x
/// 10 int32 on one thread took 680-940 ms into 2048 and 4096 partitions with each value stored
/// in place, 245-270 and 310-380 ms write-combined one or two columns at a time.
constexpr std::size_t write_combine_max_partitions = 4096;
/// The most bytes of write-combining lines one thread fills at once (in L2, where they do not
/// fit L1): the columns go through in groups that fit (four int32 columns at a time at 1024
/// partitions, two at 2048, one at 4096). On the build machine (2 MiB of L2 a core) 64 KiB took
/// 193-197 ms for hash_partition of 8 Mi x 10 int32 into 1024 partitions on one thread, 128 KiB
/// 144-165. A later A/B (three rounds, a noisier machine) put 256 KiB ahead of 128 at 1024
/// (0.159 against 0.124 of a memcpy on one thread, 0.152 against 0.130 on two) and at 2048 (0.150
/// against 0.099, 0.137 against 0.103): fewer passes over the partition ids, and a scatter that
/// moves more values for each id it reads.
constexpr std::size_t write_combine_bytes = std::size_t{256} << 10;

/// The bytes of write-combining lines that stay in L1 beside the source streams: 5/6 of the
/// core's L1 data cache (40 KiB of 48). Where that holds groups of two columns or more, the
/// groups are that size instead: on the build machine (48 KiB of L1) hash_partition of 8 Mi x 10
/// int32 on one thread took 91-99 ms into 128 partitions in groups of five (40 KiB) against
/// 149-151 in groups of ten (80 KiB), and 105-117 against 137-138 into 256 in groups of two
/// against eight; one column a group (512 partitions and more) lost to L2-sized groups.
std::size_t write_combine_l1_bytes() {
  static const std::size_t bytes = [] {
    const long l1 = ::sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return (l1 > 0 ? static_cast<std::size_t>(l1) : std::size_t{32} << 10) * 5 / 6;
  }();
  return bytes;
}

/// The most columns in a group, whatever fits: each is a source stream read beside the others
/// and the partition ids. On the build machine hash_partition of 8 Mi x 10 int32 into 64
/// partitions (three rounds) took 87-96 ms on one thread and 47-50 on two in groups of five,
/// against 111-138 and 62-70 in one group of ten (whose 40 KiB of lines fit the L1 budget);
/// four and six columns were no better than five, and 128 partitions (groups of five) unchanged.
constexpr std::size_t write_combine_max_columns = 5;

/// The most columns a thread write-combines at once into `n` partitions (see above).
std::size_t write_combine_group(std::size_t n) {
  const std::size_t lines = detail::WriteCombiner::line * n;
  const std::size_t l1 = write_combine_l1_bytes();
  return std::clamp<std::size_t>((l1 / lines >= 2 ? l1 : write_combine_bytes) / lines, 1,
                                 write_combine_max_columns);
}

/// Per-thread counts, each thread's row in its own cache lines.
struct Counts {
  std::size_t stride;  // per-thread stride in size_t, a multiple of 8 (64 bytes)
  std::vector<std::size_t> v;
  Counts(std::size_t threads, std::size_t n) : stride{(n + 7) / 8 * 8}, v(threads * stride, 0) {}
  std::size_t* row(std::size_t t) { return v.data() + t * stride; }
  const std::size_t* row(std::size_t t) const { return v.data() + t * stride; }
};

/// The result of the counting pass: each row's partition and per-thread histograms.
template <typename PidT>
struct Plan {
  std::size_t threads;
  std::size_t n;
  PidT* pid;
  Counts rows;                                       // rows[t][p]
  std::vector<Counts> chars;                         // per string column: chars[c][t][p]
  std::vector<std::size_t> row_total;                // per partition
  std::vector<std::vector<std::size_t>> char_total;  // [c][p]
};

template <typename PidT>
Plan<PidT> count(const TableView& table, std::span<const std::size_t> keys, std::size_t n,
                 std::uint32_t seed, std::size_t threads, PidT* pid) {
  TableView key_view;
  for (std::size_t k : keys) key_view.columns.push_back(table.columns[k]);
  Plan<PidT> plan{threads, n, pid, Counts(threads, n), {}, {}, {}};
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    plan.chars.emplace_back(table.columns[c].type == TypeId::STRING ? threads : 0, n);
  }
  const std::size_t rows = table.num_rows();
  const bool pow2 = (n & (n - 1)) == 0;
  detail::parallel_ranges(rows, threads, [&](std::size_t t, std::size_t a, std::size_t b) {
    std::size_t* cnt = plan.rows.row(t);
    std::array<std::uint32_t, block_rows> h{};
    for (std::size_t r0 = a; r0 < b; r0 += block_rows) {
      const std::size_t r1 = std::min(b, r0 + block_rows);
      hash_rows(key_view, r0, r1, seed, h.data());
      for (std::size_t r = r0; r < r1; ++r) {
        const std::uint32_t hr = h[r - r0];
        const auto p = static_cast<PidT>(pow2 ? (hr & (n - 1)) : (hr % n));
        pid[r] = p;
        ++cnt[p];
      }
    }
    for (std::size_t c = 0; c < table.num_columns(); ++c) {
      const ColumnView& col = table.columns[c];
      if (col.type != TypeId::STRING) continue;
      std::size_t* ch = plan.chars[c].row(t);
      for (std::size_t r = a; r < b; ++r) {
        ch[pid[r]] += static_cast<std::size_t>(col.offsets[r + 1] - col.offsets[r]);
      }
    }
  });
  plan.row_total.assign(n, 0);
  plan.char_total.assign(table.num_columns(), std::vector<std::size_t>(n, 0));
  for (std::size_t t = 0; t < threads; ++t) {
    for (std::size_t p = 0; p < n; ++p) {
      plan.row_total[p] += plan.rows.row(t)[p];
      for (std::size_t c = 0; c < table.num_columns(); ++c) {
        if (table.columns[c].type == TypeId::STRING)
          plan.char_total[c][p] += plan.chars[c].row(t)[p];
      }
    }
  }
  return plan;
}

/// Moves each thread's rows to their partitions. `dest[c][p]` says where partition p's rows of
/// column c go; `cursor[t][p]` is where thread t's first row of partition p lands.
template <typename PidT>
void scatter(const TableView& table, const Plan<PidT>& plan,
             const std::vector<std::vector<ColumnDest>>& dest) {
  const std::size_t n = plan.n;
  const std::size_t threads = plan.threads;
  // Each thread's first row (and first character) in every partition.
  Counts row_start(threads, n);
  std::vector<Counts> char_start;
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    char_start.emplace_back(table.columns[c].type == TypeId::STRING ? threads : 0, n);
  }
  for (std::size_t p = 0; p < n; ++p) {
    std::size_t r = 0;
    for (std::size_t t = 0; t < threads; ++t) {
      row_start.row(t)[p] = r;
      r += plan.rows.row(t)[p];
    }
    for (std::size_t c = 0; c < table.num_columns(); ++c) {
      if (table.columns[c].type != TypeId::STRING) continue;
      std::size_t ch = 0;
      for (std::size_t t = 0; t < threads; ++t) {
        char_start[c].row(t)[p] = ch;
        ch += plan.chars[c].row(t)[p];
      }
    }
  }
  const PidT* pid = plan.pid;
  const std::size_t ncols = table.num_columns();
  detail::parallel_ranges(
      table.num_rows(), threads, [&](std::size_t t, std::size_t a, std::size_t b) {
        // This thread's next row in every partition; strings also need the next character.
        std::vector<std::size_t> next_row(row_start.row(t), row_start.row(t) + n);
        std::vector<std::vector<std::int32_t>> char_pos(ncols);
        for (std::size_t c = 0; c < ncols; ++c) {
          if (table.columns[c].type != TypeId::STRING) continue;
          char_pos[c].resize(n);
          for (std::size_t p = 0; p < n; ++p) {
            char_pos[c][p] = static_cast<std::int32_t>(char_start[c].row(t)[p]);
          }
        }
        std::vector<std::byte*> base(n);
        std::array<std::size_t, block_rows> slot{};
        const bool wc = n <= write_combine_max_partitions;
        if (wc) {
          // In groups of columns whose write-combining lines (64 bytes per partition and
          // column) stay in cache, where every column's at once did not (640 KiB at 1024
          // partitions), and whose values share a width and each partition's place in a line.
          const std::size_t group_max = write_combine_group(n);
          std::vector<std::vector<std::byte*>> group;
          std::vector<const std::byte*> from;
          std::size_t width = 0;
          const auto flush_group = [&] {
            if (group.empty()) return;
            detail::WriteCombiner combiner(std::move(group));
            detail::with_width(width, [&]<typename U>() {
              combiner.push_rows<sizeof(U), PidT>(pid + a, from, b - a);
            });
            combiner.finish();
            group.clear();
            from.clear();
          };
          for (std::size_t c = 0; c < ncols; ++c) {
            const ColumnView& col = table.columns[c];
            if (col.type == TypeId::STRING) continue;
            const std::size_t w = size_of(col.type);
            std::vector<std::byte*> first(n);
            for (std::size_t p = 0; p < n; ++p)
              first[p] = dest[c][p].data + row_start.row(t)[p] * w;
            if (!group.empty() && (w != width || group.size() == group_max ||
                                   !detail::WriteCombiner::same_alignment(group.front(), first))) {
              flush_group();
            }
            width = w;
            group.push_back(std::move(first));
            from.push_back(static_cast<const std::byte*>(col.data) + a * w);
          }
          flush_group();
        }
        // The rest (the other columns' values, strings, validity bits) needs each row's place.
        bool slots = !wc;
        for (const ColumnView& col : table.columns) {
          slots = slots || col.type == TypeId::STRING || col.nullable();
        }
        for (std::size_t r0 = a; r0 < b && slots; r0 += block_rows) {
          const std::size_t r1 = std::min(b, r0 + block_rows);
          // Each row's place within its partition, found once for all columns: the per-partition
          // cursor is a chain through memory, so it is walked once per row, not once per value.
          for (std::size_t r = r0; r < r1; ++r) slot[r - r0] = next_row[pid[r]]++;
          for (std::size_t c = 0; c < ncols; ++c) {
            const ColumnView& col = table.columns[c];
            const std::vector<ColumnDest>& d = dest[c];
            if (col.type == TypeId::STRING) {
              const char* chars = static_cast<const char*>(col.data);
              std::int32_t* pos = char_pos[c].data();
              for (std::size_t r = r0; r < r1; ++r) {
                const PidT p = pid[r];
                const std::int32_t s0 = col.offsets[r];
                const std::int32_t len = col.offsets[r + 1] - s0;
                if (len > 0) {
                  std::memcpy(d[p].data + pos[p], chars + s0, static_cast<std::size_t>(len));
                }
                pos[p] += len;
                d[p].offsets[slot[r - r0] + 1] = d[p].char_base + pos[p];
              }
            } else {
              const auto* src = static_cast<const std::byte*>(col.data);
              auto move_rows = [&]<typename U>() {
                constexpr std::size_t W = sizeof(U);
                if (wc) return;  // written above
                for (std::size_t p = 0; p < n; ++p) base[p] = d[p].data;
                // Locals, so that the byte stores (which may alias anything) do not force the
                // pointers to be reloaded on every row.
                const PidT* const ids = pid + r0;
                const std::size_t* const at = slot.data();
                std::byte* const* const to = base.data();
                const std::byte* const from = src + r0 * W;
                const std::size_t count = r1 - r0;
                for (std::size_t i = 0; i < count; ++i) {
                  std::memcpy(to[ids[i]] + at[i] * W, from + i * W, W);
                }
              };
              detail::with_width(size_of(col.type), move_rows);
            }
            if (col.nullable()) {
              for (std::size_t r = r0; r < r1; ++r) {
                if (!col.is_valid(r)) continue;
                const ColumnDest& dp = d[pid[r]];
                const std::size_t at = dp.mask_bit + slot[r - r0];
                // Threads meet at byte boundaries of a partition's bitmap: set bits atomically.
                std::atomic_ref<std::uint8_t>(dp.mask[at / 8])
                    .fetch_or(static_cast<std::uint8_t>(1U << (at % 8)), std::memory_order_relaxed);
              }
            }
          }
        }
      });
}

/// Runs count + allocate + scatter with the narrowest partition-id type.
template <typename MakeDest>
void partition_rows(const TableView& table, std::span<const std::size_t> keys, std::size_t n,
                    std::uint32_t seed, std::size_t threads, BufferResource& br,
                    MakeDest&& make_dest) {
  auto run = [&]<typename PidT>() {
    auto scratch = br.allocate(MemoryType::HOST, table.num_rows() * sizeof(PidT));
    auto* pid = reinterpret_cast<PidT*>(scratch->data());
    auto plan = count<PidT>(table, keys, n, seed, threads, pid);
    const auto dest = make_dest(plan.row_total, plan.char_total);
    scatter<PidT>(table, plan, dest);
  };
  if (n <= 0xFFFF) {
    run.template operator()<std::uint16_t>();
  } else {
    run.template operator()<std::uint32_t>();
  }
}

}  // namespace

std::vector<PackedData> detail::partition_and_pack_ordered(const TableView& table,
                                                           std::span<const std::size_t> keys,
                                                           std::size_t num_partitions,
                                                           BufferResource& br, std::uint32_t seed,
                                                           std::size_t threads,
                                                           std::span<const std::uint32_t> order) {
  SPILLWAY_NVTX_RANGE("partition and pack");
  SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "partition_and_pack");
  const MemoryStep step("packing (partition_and_pack)");
  detail::check_partition_args(table, keys, num_partitions);
  std::vector<std::uint32_t> in_order(order.begin(), order.end());
  if (in_order.empty()) {
    in_order.resize(num_partitions);
    std::iota(in_order.begin(), in_order.end(), std::uint32_t{0});
  }
  {
    std::vector<bool> seen(num_partitions);
    SPILLWAY_EXPECTS(in_order.size() == num_partitions,
                     "partition_and_pack: an order of " + std::to_string(in_order.size()) +
                         " partitions for " + std::to_string(num_partitions));
    for (const std::uint32_t p : in_order) {
      SPILLWAY_EXPECTS(p < num_partitions && !seen[p], "partition_and_pack: partition " +
                                                           std::to_string(p) +
                                                           " out of range or twice in the order");
      seen[p] = true;
    }
  }
  threads = detail::resolve_threads(threads);
  std::vector<PackedData> out(num_partitions);
  partition_rows(
      table, keys, num_partitions, seed, threads, br,
      [&](const std::vector<std::size_t>& rows,
          const std::vector<std::vector<std::size_t>>& chars) {
        std::vector<detail::PackLayout> layouts;
        std::vector<std::size_t> part_chars(table.num_columns());
        for (std::size_t p = 0; p < num_partitions; ++p) {
          for (std::size_t c = 0; c < table.num_columns(); ++c) part_chars[c] = chars[c][p];
          layouts.push_back(detail::make_layout(table, rows[p], part_chars));
        }
        // The payloads, runs of small ones sharing blocks in `in_order`, but only without a
        // host limit: a block's memory goes only once every payload in it has gone, so under
        // a limit spilling some of them would free nothing (a Shuffler test's 1 MiB limit then
        // found nothing to spill).
        const auto size = [&](std::size_t i) { return layouts[in_order[i]].payload_size; };
        const bool blocks = br.limit(MemoryType::HOST) == unlimited_bytes;
        detail::for_each_block(
            num_partitions, size,
            [&](std::size_t bytes) { return br.footprint(MemoryType::HOST, bytes); },
            [&](std::size_t first, std::size_t last, std::size_t bytes) {
              if (last - first == 1 || !blocks) {
                for (std::size_t i = first; i < last; ++i) {
                  out[in_order[i]].payload = br.allocate(MemoryType::HOST, size(i));
                }
                return;
              }
              const std::shared_ptr<Buffer> block = br.allocate(MemoryType::HOST, bytes);
              for (std::size_t i = first, at = 0; i < last; at += size(i), ++i) {
                at = detail::place_in_block(at);
                out[in_order[i]].payload = BufferResource::view(*block, at, size(i), block);
              }
            });
        std::vector<std::vector<ColumnDest>> dest(table.num_columns(),
                                                  std::vector<ColumnDest>(num_partitions));
        for (std::size_t p = 0; p < num_partitions; ++p) {
          const detail::PackLayout& layout = layouts[p];
          out[p].metadata = detail::encode(layout);
          std::byte* base = out[p].payload->data();
          for (std::size_t c = 0; c < table.num_columns(); ++c) {
            const auto& cl = layout.columns[c];
            ColumnDest& d = dest[c][p];
            d.data = cl.data.size > 0 ? base + cl.data.offset : nullptr;
            if (cl.type == TypeId::STRING) {
              d.offsets = reinterpret_cast<std::int32_t*>(base + cl.offsets.offset);
              d.offsets[0] = 0;
            }
            if (cl.nullable) {
              d.mask = reinterpret_cast<std::uint8_t*>(base + cl.mask.offset);
              if (cl.mask.size > 0) std::memset(d.mask, 0, cl.mask.size);
            }
          }
        }
        return dest;
      });
  return out;
}

std::vector<PackedData> partition_and_pack(const TableView& table,
                                           std::span<const std::size_t> keys,
                                           std::size_t num_partitions, BufferResource& br,
                                           std::uint32_t seed, std::size_t threads) {
  return detail::partition_and_pack_ordered(table, keys, num_partitions, br, seed, threads, {});
}

PartitionedTable hash_partition(const TableView& table, std::span<const std::size_t> keys,
                                std::size_t num_partitions, BufferResource& br, std::uint32_t seed,
                                std::size_t threads) {
  SPILLWAY_NVTX_RANGE("partition");
  detail::check_partition_args(table, keys, num_partitions);
  threads = detail::resolve_threads(threads);
  const std::size_t rows = table.num_rows();
  std::vector<Column> columns;
  std::vector<std::size_t> offsets(num_partitions + 1, 0);
  partition_rows(
      table, keys, num_partitions, seed, threads, br,
      [&](const std::vector<std::size_t>& part_rows,
          const std::vector<std::vector<std::size_t>>& chars) {
        for (std::size_t p = 0; p < num_partitions; ++p) offsets[p + 1] = offsets[p] + part_rows[p];
        std::vector<std::vector<ColumnDest>> dest(table.num_columns(),
                                                  std::vector<ColumnDest>(num_partitions));
        for (std::size_t c = 0; c < table.num_columns(); ++c) {
          const ColumnView& col = table.columns[c];
          std::size_t total_chars = 0;
          if (col.type == TypeId::STRING) {
            for (std::size_t p = 0; p < num_partitions; ++p) total_chars += chars[c][p];
          }
          auto data =
              br.allocate(MemoryType::HOST,
                          col.type == TypeId::STRING ? total_chars : rows * size_of(col.type));
          std::unique_ptr<Buffer> off;
          std::unique_ptr<Buffer> mask;
          if (col.type == TypeId::STRING) {
            off = br.allocate(MemoryType::HOST, (rows + 1) * sizeof(std::int32_t));
            reinterpret_cast<std::int32_t*>(off->data())[0] = 0;
          }
          if (col.nullable()) {
            mask = br.allocate(MemoryType::HOST, mask_bytes(rows));
            if (mask->size() > 0) std::memset(mask->data(), 0, mask->size());
          }
          std::size_t char_at = 0;
          for (std::size_t p = 0; p < num_partitions; ++p) {
            ColumnDest& d = dest[c][p];
            if (col.type == TypeId::STRING) {
              d.data = data->data() + char_at;
              d.offsets = reinterpret_cast<std::int32_t*>(off->data()) + offsets[p];
              d.char_base = static_cast<std::int32_t>(char_at);
              char_at += chars[c][p];
            } else {
              d.data = data->data() + offsets[p] * size_of(col.type);
            }
            if (mask) {
              d.mask = reinterpret_cast<std::uint8_t*>(mask->data());
              d.mask_bit = offsets[p];
            }
          }
          columns.emplace_back(col.type, rows, std::move(data), std::move(off), std::move(mask));
        }
        return dest;
      });
  return PartitionedTable{Table(std::move(columns), table.names), std::move(offsets)};
}

}  // namespace spillway
