// The distributed sort on 1-4 local ranks: the ranks' outputs in rank order are the input's
// rows in the order a plain stable sort gives (nullable INT64 and INT32 keys, ascending or
// descending, nulls first or last, duplicates, a STRING payload), also with a rank without
// rows, in many pieces, under a small host limit, and as an actor of a network; keys where 90%
// are one value still spread over the ranks; top-k is the first rows of that order, on rank 0.
#include <spillway/comm/communicator.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/actors.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/streaming/actors.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>

#include "common.hpp"
#include "ops/table_pieces.hpp"
#include "table/join_sides.hpp"

#include <algorithm>
#include <mutex>

using namespace spillway;

namespace {

constexpr std::int64_t kIdBase = 1000000000;

/// Rank r's rows: a nullable INT64 key, a nullable INT32 key, a STRING, and a unique id that
/// grows with the row's origin (rank, then place).
Table part(Rank r, std::size_t rows, double skew, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT32};
  o.key_cardinality = 300;
  o.skew = skew;
  o.null_fraction = 0.05;
  o.seed = 90 + static_cast<std::uint64_t>(r);
  std::vector<Column> cols = std::move(random_table(o, br)).release();
  cols.push_back(test::strings_of(cols[1].view(), br));
  auto ids = br.allocate(MemoryType::HOST, std::max<std::size_t>(rows, 1) * 8);
  auto* id = reinterpret_cast<std::int64_t*>(ids->data());
  for (std::size_t i = 0; i < rows; ++i) id[i] = r * kIdBase + static_cast<std::int64_t>(i);
  cols.emplace_back(TypeId::INT64, rows, std::move(ids));
  return Table(std::move(cols), {"a", "b", "s", "id"});
}

struct Row {
  bool a_valid;
  std::int64_t a;
  bool b_valid;
  std::int32_t b;
  std::int64_t id;
};

std::vector<Row> rows_of(const Table& t) {
  std::vector<Row> out(t.num_rows());
  const TableView v = t.view();
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = {v.columns[0].is_valid(i), v.columns[0].value<std::int64_t>(i),
              v.columns[1].is_valid(i), v.columns[1].value<std::int32_t>(i),
              v.columns[3].value<std::int64_t>(i)};
  }
  return out;
}

/// The reference: x before y under `keys` (columns 0 and 1 only), written out by hand.
bool before(const Row& x, const Row& y, const std::vector<SortKey>& keys) {
  for (const SortKey& k : keys) {
    const bool xv = k.column == 0 ? x.a_valid : x.b_valid;
    const bool yv = k.column == 0 ? y.a_valid : y.b_valid;
    if (!xv || !yv) {
      if (xv == yv) continue;
      return k.nulls_first ? !xv : xv;
    }
    const std::int64_t xa = k.column == 0 ? x.a : x.b;
    const std::int64_t ya = k.column == 0 ? y.a : y.b;
    if (xa != ya) return k.descending ? xa > ya : xa < ya;
  }
  return false;
}

struct Case {
  int ranks{2};
  std::vector<SortKey> keys{{0}};
  std::size_t rows{3000};
  std::size_t pieces{1};
  Rank empty_rank{-1};
  std::size_t limit_mib{0};
  double skew{0};
  std::optional<std::uint64_t> limit{};
  bool as_actor{false};
};

/// Each rank's output rows, by rank.
std::vector<std::vector<Row>> run_sort(const Case& c, TableChecksum& in, TableChecksum& out) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  if (c.limit_mib > 0) cfg.limits[index(MemoryType::HOST)] = Limit::bytes(c.limit_mib * MiB);
  std::mutex m;
  std::vector<std::vector<Row>> got(static_cast<std::size_t>(c.ranks));
  ops::SortOptions o;
  o.limit = c.limit;
  o.samples_per_rank = 64;
  const int rc =
      run_ranks(RankKind::local, c.ranks, cfg, [&](Communicator& comm, BufferResource& br) {
        const Table t = part(comm.rank(), comm.rank() == c.empty_rank ? 0 : c.rows, c.skew, br);
        const ops::TableSource src = test::pieces(t, c.pieces, MemoryType::HOST, br);
        auto keep = [&](Table&& s) {
          const TableChecksum sum = checksum(s.view());
          std::lock_guard lock(m);
          got[static_cast<std::size_t>(comm.rank())] = rows_of(s);
          out += sum;
        };
        {
          std::lock_guard lock(m);
          in += checksum(t.view());
        }
        if (c.as_actor) {
          streaming::Network net(br, &comm);
          streaming::Channel& a = net.channel("rows");
          streaming::Channel& b = net.channel("sorted");
          net.add("source", {}, {&a}, streaming::source(src));
          net.add("sort", {&a}, {&b}, ops::sort_actor(c.keys, o));
          net.add("sink", {&b}, {},
                  streaming::sink(
                      [&](streaming::Message&& msg) {
                        EXPECT_EQ(msg.partition, static_cast<std::uint32_t>(comm.rank()));
                        keep(std::move(msg.table));
                      },
                      MemoryType::HOST));
          net.run();
        } else {
          ops::sort(comm, br, src, c.keys, o, keep);
        }
        if (c.limit_mib > 0) {
          EXPECT_LE(br.peak(MemoryType::HOST), c.limit_mib * MiB);
        }
        return 0;
      });
  EXPECT_EQ(rc, 0);
  return got;
}

/// Every rank's input rows in origin order, stably sorted by the reference.
std::vector<Row> expected(const Case& c) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  std::vector<Row> all;
  for (Rank r = 0; r < c.ranks; ++r) {
    const std::vector<Row> rows = rows_of(part(r, r == c.empty_rank ? 0 : c.rows, c.skew, br));
    all.insert(all.end(), rows.begin(), rows.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [&](const Row& x, const Row& y) { return before(x, y, c.keys); });
  return all;
}

void check(const Case& c) {
  SCOPED_TRACE(std::to_string(c.ranks) + " ranks, " + std::to_string(c.keys.size()) + " keys, " +
               std::to_string(c.pieces) + " pieces, empty rank " + std::to_string(c.empty_rank) +
               ", limit " + std::to_string(c.limit_mib) + " MiB" + (c.as_actor ? ", actor" : ""));
  TableChecksum in;
  TableChecksum out;
  const std::vector<std::vector<Row>> got = run_sort(c, in, out);
  const std::vector<Row> want = expected(c);
  std::vector<std::int64_t> ids;
  for (const auto& rank : got) {
    for (const Row& r : rank) ids.push_back(r.id);
  }
  std::vector<std::int64_t> want_ids;
  for (const Row& r : want) want_ids.push_back(r.id);
  if (c.limit) {
    want_ids.resize(std::min<std::size_t>(want_ids.size(), *c.limit));
    EXPECT_EQ(got[0].size(), want_ids.size());
  } else {
    EXPECT_EQ(out, in);
  }
  EXPECT_EQ(ids, want_ids);
}

}  // namespace

TEST(SortOp, EqualsAStableSortOfTheWholeInput) {
  for (int n : {1, 2, 3, 4}) check({.ranks = n});
  check({.ranks = 3, .keys = {{0, true, true}, {1}}, .pieces = 5});
  check({.ranks = 2, .keys = {{1, false, true}, {0, true}}, .pieces = 3, .empty_rank = 0});
  check({.ranks = 4, .keys = {{1}}, .rows = 20000, .pieces = 20, .empty_rank = 2, .limit_mib = 2});
}

TEST(SortOp, AsAnActorOfANetwork) {
  check({.ranks = 3, .keys = {{0}, {1, true}}, .pieces = 4, .as_actor = true});
}

// 90% of the keys are 0: ties are broken by origin in the splitters too, so no rank gets
// much more than its share.
TEST(SortOp, ManyEqualKeysSpreadOverTheRanks) {
  const Case c{.ranks = 4, .keys = {{0}}, .rows = 20000, .pieces = 3, .skew = 0.9};
  check(c);
  TableChecksum in;
  TableChecksum out;
  const auto got = run_sort(c, in, out);
  for (const auto& rank : got) EXPECT_LT(rank.size(), 4 * 20000 * 3 / 8) << "of 80000 rows";
}

TEST(SortOp, TopKIsTheFirstRowsOnRankZero) {
  check({.ranks = 3, .keys = {{0, true}, {1}}, .pieces = 4, .limit = 100});
  check({.ranks = 2, .keys = {{0}}, .rows = 10, .empty_rank = 1, .limit = 100});
  check({.ranks = 2, .keys = {{1}}, .pieces = 2, .limit = 0});
}

TEST(SortOp, BadInputIsRefused) {
  test::TempDir dir;
  const int rc =
      run_ranks(RankKind::local, 2, test::host_config(dir.path()),
                [&](Communicator& comm, BufferResource& br) {
                  const Table t = part(comm.rank(), 10, 0, br);
                  bool given = false;
                  ops::TableSource once = [&]() -> std::optional<Table> {
                    if (given) return std::nullopt;
                    given = true;
                    return gather(t.view(), std::vector<std::int64_t>{0, 1}, br);
                  };
                  const std::vector<SortKey> bad{{9}};
                  EXPECT_THROW(ops::sort(comm, br, once, bad, {}, [](Table&&) {}), logic_error);
                  ops::TableSource none = []() -> std::optional<Table> { return std::nullopt; };
                  const std::vector<SortKey> good{{0}};
                  EXPECT_THROW(ops::sort(comm, br, none, good, {}, [](Table&&) {}), logic_error);
                  return 0;
                });
  EXPECT_EQ(rc, 0);
}
