// The distributed sort (sort.hpp): pieces kept spillable with their origin appended, samples
// allgathered into splitters, rows range-partitioned into a Shuffler, each range sorted.
#include <spillway/comm/collectives.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/pack_format.hpp>
#include <spillway/table/spillable_tables.hpp>

#include "ops/detail/pieces.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace spillway::ops {

namespace {

/// Where a row came from: its rank in the high bits, its place in the rank's input below.
constexpr int kRankShift = 40;

/// `t` with an INT64 column of each row's origin appended (rows numbered from `first`).
Table with_origin(Table&& t, Rank rank, std::uint64_t first, BufferResource& br) {
  const std::size_t n = t.num_rows();
  std::vector<std::string> names = t.names();
  auto buf = br.allocate(MemoryType::HOST, std::max<std::size_t>(n, 1) * sizeof(std::int64_t));
  auto* o = reinterpret_cast<std::int64_t*>(buf->data());
  const std::int64_t base = static_cast<std::int64_t>(rank) << kRankShift;
  for (std::size_t i = 0; i < n; ++i) o[i] = base | static_cast<std::int64_t>(first + i);
  std::vector<Column> cols = std::move(t).release();
  cols.emplace_back(TypeId::INT64, n, std::move(buf));
  if (!names.empty()) names.emplace_back("__origin");
  return Table(std::move(cols), std::move(names));
}

/// `t` without its last (origin) column.
Table without_origin(Table&& t) {
  std::vector<std::string> names = t.names();
  std::vector<Column> cols = std::move(t).release();
  cols.pop_back();
  if (!names.empty()) names.pop_back();
  return Table(std::move(cols), std::move(names));
}

/// The sort keys, then the origin: no two rows compare equal.
std::vector<SortKey> with_origin_key(std::span<const SortKey> keys, std::size_t origin) {
  std::vector<SortKey> k(keys.begin(), keys.end());
  k.push_back({origin, false, false});
  return k;
}

/// The rows of `t` grouped by their range (the first splitter above the row), packed, one
/// chunk per range that has rows.
std::unordered_map<PartID, PackedData> ranges_of(const Table& t, const Table& splitters,
                                                 std::span<const SortKey> keys, PartID nranges,
                                                 BufferResource& br) {
  const std::size_t n = t.num_rows();
  if (n == 0) return {};
  const RowOrder order(t.view(), splitters.view(), keys);
  std::vector<PartID> range(n);
  std::vector<std::size_t> count(nranges + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t lo = 0;
    std::size_t hi = splitters.num_rows();
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (order.compare(i, mid) < 0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    range[i] = static_cast<PartID>(lo);
    ++count[lo + 1];
  }
  std::partial_sum(count.begin(), count.end(), count.begin());
  std::vector<std::int64_t> rows(n);
  std::vector<std::size_t> at(count.begin(), count.end() - 1);
  for (std::size_t i = 0; i < n; ++i) rows[at[range[i]]++] = static_cast<std::int64_t>(i);
  const Table grouped = gather(t.view(), rows, br);
  const std::vector<std::size_t> splits(count.begin() + 1, count.end() - 1);
  std::vector<PackedData> parts = split_and_pack(grouped.view(), splits, br);
  std::unordered_map<PartID, PackedData> chunks;
  for (PartID p = 0; p < nranges; ++p) {
    if (count[p + 1] > count[p]) chunks.emplace(p, std::move(parts[p]));
  }
  return chunks;
}

/// This rank's range in origin order: its chunks (each one's rows in origin order already, and
/// no two chunks' origins interleaving: a chunk holds rows of one piece of one rank) ordered by
/// their first row's origin and concatenated. A stable sort on the keys alone then orders ties
/// by origin, without comparing origins row by row. A chunk's first origin is read from its
/// payload where that is in host memory; otherwise the chunks are concatenated as they come
/// and the rows gathered in origin order.
Table range_in_origin_order(std::vector<PackedData> chunks, const Table& schema_o,
                            BufferResource& br) {
  if (chunks.empty()) return detail::empty_like(schema_o.view(), false, br);
  std::vector<std::int64_t> first(chunks.size());
  bool readable = true;
  for (std::size_t c = 0; c < chunks.size() && readable; ++c) {
    const Buffer& payload = *chunks[c].payload;
    const spillway::detail::PackLayout layout =
        spillway::detail::decode(chunks[c].metadata, payload.size());
    readable =
        payload.mem_type() == MemoryType::HOST || payload.mem_type() == MemoryType::PINNED_HOST;
    if (readable) {
      std::memcpy(&first[c], payload.data() + layout.columns.back().data.offset,
                  sizeof(std::int64_t));
    }
  }
  if (readable) {
    std::vector<std::size_t> order(chunks.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return first[a] < first[b]; });
    std::vector<PackedData> ordered;
    for (const std::size_t c : order) ordered.push_back(std::move(chunks[c]));
    return unpack_and_concat(std::move(ordered), br);
  }
  std::vector<std::size_t> starts{0};
  for (const PackedData& c : chunks) {
    starts.push_back(starts.back() +
                     spillway::detail::decode(c.metadata, c.payload->size()).num_rows);
  }
  const Table all = unpack_and_concat(std::move(chunks), br);
  const TableView view = all.view();
  const ColumnView& origin = view.columns.back();
  std::vector<std::size_t> order(starts.size() - 1);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return origin.value<std::int64_t>(starts[a]) < origin.value<std::int64_t>(starts[b]);
  });
  std::vector<std::int64_t> rows;
  rows.reserve(all.num_rows());
  for (const std::size_t c : order) {
    for (std::size_t i = starts[c]; i < starts[c + 1]; ++i)
      rows.push_back(static_cast<std::int64_t>(i));
  }
  return gather(view, rows, br);
}

/// Top-k: each rank's first `limit` rows, allgathered; rank 0 keeps the first `limit` of all.
void top_k(Communicator& comm, BufferResource& br, Table first, const TableSource& input,
           const Table& schema, std::span<const SortKey> keys, const SortOptions& options,
           const std::function<void(Table&&)>& out) {
  const std::size_t limit = static_cast<std::size_t>(*options.limit);
  std::uint64_t rows = 0;
  Table best = with_origin(detail::empty_like(schema.view(), false, br), comm.rank(), 0, br);
  for (std::optional<Table> piece = std::move(first); piece; piece = input()) {
    detail::check_piece(*piece, schema, false);
    const std::size_t n = piece->num_rows();
    const Table p = with_origin(std::move(*piece), comm.rank(), rows, br);
    rows += n;
    const std::vector<TableView> both{best.view(), p.view()};
    const Table all = concat(both, br);
    best = sort(all.view(), keys, br, limit);
  }
  const Table all =
      detail::allgather_table(comm, br, best.view(), false, static_cast<OpID>(options.op + 1));
  best = Table{};
  out(comm.rank() == 0 ? without_origin(sort(all.view(), keys, br, limit))
                       : detail::empty_like(schema.view(), false, br));
}

}  // namespace

void sort(Communicator& comm, BufferResource& br, const TableSource& input,
          std::span<const SortKey> keys, const SortOptions& options,
          const std::function<void(Table&&)>& out) {
  Table first = detail::first_piece(input, "sort's input");
  if (detail::in_device_memory(first)) {
    throw logic_error("sort: tables in device memory are not supported yet (give host tables)");
  }
  (void)RowOrder(first.view(), first.view(), keys);  // checks the keys before anything is sent
  const Table schema = detail::empty_like(first.view(), false, br);
  const std::vector<SortKey> keys_o = with_origin_key(keys, schema.num_columns());
  if (options.limit) {
    top_k(comm, br, std::move(first), input, schema, keys_o, options, out);
    return;
  }
  const Rank rank = comm.rank();
  const auto nranks = static_cast<std::size_t>(comm.nranks());
  const auto coll = static_cast<OpID>(options.op + 1);

  // Every piece kept spillable, with its origin, until the splitters are known.
  SpillableTables held(br);
  std::uint64_t rows = 0;
  for (std::optional<Table> piece = std::move(first); piece; piece = input()) {
    detail::check_piece(*piece, schema, false);
    const std::size_t n = piece->num_rows();
    held.push(with_origin(std::move(*piece), rank, rows, br));
    rows += n;
  }
  std::vector<std::uint64_t> mine(nranks, 0);
  mine[static_cast<std::size_t>(rank)] = rows;
  const std::vector<std::uint64_t> counts = allreduce(comm, coll, mine, ReduceOp::sum);
  const std::uint64_t total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});

  // This rank's samples, in proportion to its rows, evenly spaced over them.
  const std::uint64_t want = options.samples_per_rank * nranks;
  const std::uint64_t nsamples =
      total == 0 ? 0 : std::min<std::uint64_t>(rows, (want * rows + total - 1) / total);
  SpillableTables again(br);
  std::vector<Table> picked;
  std::uint64_t seen = 0;
  std::uint64_t next = 0;
  while (std::optional<Table> t = held.pop(MemoryType::HOST)) {
    std::vector<std::int64_t> at;
    for (; next < nsamples && next * rows / nsamples < seen + t->num_rows(); ++next) {
      at.push_back(static_cast<std::int64_t>(next * rows / nsamples - seen));
    }
    picked.push_back(gather(t->view(), at, br));
    seen += t->num_rows();
    again.push(std::move(*t));
  }
  std::vector<TableView> views;
  for (const Table& p : picked) views.push_back(p.view());
  const Table samples = views.empty()
                            ? with_origin(detail::empty_like(schema.view(), false, br), rank, 0, br)
                            : concat(views, br);
  picked.clear();
  const Table all = detail::allgather_table(comm, br, samples.view(), false, coll);
  const Table ordered = sort(all.view(), keys_o, br);
  std::vector<std::int64_t> at;
  for (std::size_t k = 1; k < nranks && ordered.num_rows() > 0; ++k) {
    at.push_back(static_cast<std::int64_t>(k * ordered.num_rows() / nranks));
  }
  const Table splitters = gather(ordered.view(), at, br);

  // Each row to the rank whose range holds it; then this rank's range, sorted.
  Shuffler shuffle(comm, options.op, static_cast<PartID>(nranks), br);
  const Table schema_o = with_origin(detail::empty_like(schema.view(), false, br), rank, 0, br);
  detail::naming_failed_peers(comm, {&shuffle}, [&] {
    while (std::optional<Table> t = again.pop(MemoryType::HOST)) {
      shuffle.insert(ranges_of(*t, splitters, keys_o, static_cast<PartID>(nranks), br));
    }
    shuffle.insert_finished();
    const PartID pid = shuffle.wait_any(comm.timeout());
    const Table range = range_in_origin_order(shuffle.extract(pid), schema_o, br);
    out(without_origin(sort(range.view(), keys, br)));
  });
}

}  // namespace spillway::ops
