// The distributed hash join on 1-4 local ranks: its output, over all ranks, is the same
// multiset of rows (checksum) as the local join of the whole inputs, for every join type, also
// under a small host limit that makes the shuffles spill, and with one rank given no rows; the
// same on the GPU with the tables in device memory (skipped without a GPU).
#include <spillway/comm/launch.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/hash_join.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>

#include "common.hpp"

#include <memory>
#include <mutex>
#include <optional>

using namespace spillway;

namespace {

Table side(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::STRING, TypeId::FLOAT64, decimal128(22, 4), TypeId::DATE32,
             TypeId::TIMESTAMP_NANOSECONDS};
  o.key_cardinality = 300;
  o.null_fraction = 0.03;
  o.max_string = 6;
  o.seed = seed;
  Table t = random_table(o, br);
  return Table(std::move(t).release(), {"k", "s", "v", "d", "day", "ts"});
}

/// Rank r's part of a side of `rows_per_rank` rows (none for rank `empty_rank`).
Table part(Rank r, std::size_t rows_per_rank, std::uint64_t seed, Rank empty_rank,
           BufferResource& br) {
  return side(r == empty_rank ? 0 : rows_per_rank, seed * 100 + static_cast<std::uint64_t>(r), br);
}

/// Where check() puts each rank's tables: host views, host tables handed over, tables in
/// device memory handed over (the GPU join), or either given in pieces.
enum class Input { views, owned, device, host_pieces, device_pieces };

/// A source of `t` in three pieces (the last may be empty), copied into `to`.
ops::TableSource three_pieces(const Table& t, MemoryType to, BufferResource& br) {
  auto pieces = std::make_shared<std::vector<Table>>();
  const std::size_t n = t.num_rows();
  for (std::size_t p = 0; p < 3; ++p) {
    std::vector<std::int64_t> rows;
    for (std::size_t i = n * p / 3; i < n * (p + 1) / 3; ++i) {
      rows.push_back(static_cast<std::int64_t>(i));
    }
    pieces->push_back(copy_table(gather(t.view(), rows, br), to, br, br.stream()));
  }
  return [pieces]() -> std::optional<Table> {
    if (pieces->empty()) return std::nullopt;
    Table t = std::move(pieces->front());
    pieces->erase(pieces->begin());
    return t;
  };
}

void check(int nranks, JoinType type, std::size_t host_limit_mib, Rank empty_rank,
           Input input = Input::views) {
  const bool on_gpu = input == Input::device || input == Input::device_pieces;
  SCOPED_TRACE(std::to_string(nranks) + " ranks, " + to_string(type) +
               (on_gpu ? ", on the GPU" : "") +
               (input == Input::host_pieces || input == Input::device_pieces ? ", in pieces" : ""));
  test::TempDir dir;
  const std::size_t rows = 3000;
  const std::vector<std::size_t> keys{3};  // the decimal
  // What the join of the whole inputs gives.
  TableChecksum want;
  {
    BufferResource br(test::host_config(dir.path()));
    std::vector<Table> ls, rs;
    std::vector<TableView> lv, rv;
    for (Rank r = 0; r < nranks; ++r) {
      ls.push_back(part(r, rows, 1, empty_rank, br));
      rs.push_back(part(r, rows / 2, 2, empty_rank, br));
    }
    for (Rank r = 0; r < nranks; ++r) {
      lv.push_back(ls[static_cast<std::size_t>(r)].view());
      rv.push_back(rs[static_cast<std::size_t>(r)].view());
    }
    const Table l = concat(lv, br);
    const Table rt = concat(rv, br);
    want = checksum(hash_join(l.view(), keys, rt.view(), keys, type, br).view());
  }
  auto cfg = on_gpu ? test::small_config(dir.path()) : test::host_config(dir.path());
  if (host_limit_mib > 0) {
    cfg.limits[index(on_gpu ? MemoryType::DEVICE : MemoryType::HOST)] =
        Limit::bytes(host_limit_mib * MiB);
  }
  std::mutex m;
  TableChecksum got;
  std::size_t parts = 0;
  ops::HashJoinOptions o;
  o.type = type;
  o.partitions = 7;
  const int rc =
      run_ranks(RankKind::local, nranks, cfg, [&](Communicator& comm, BufferResource& br) {
        Table l = part(comm.rank(), rows, 1, empty_rank, br);
        Table r = part(comm.rank(), rows / 2, 2, empty_rank, br);
        const auto out = [&](std::uint32_t, Table&& t) {
          EXPECT_EQ(t.column(0).data().mem_type(), on_gpu ? MemoryType::DEVICE : MemoryType::HOST);
          const TableChecksum c =
              on_gpu ? gpu::checksum(t.view(), br, br.stream()) : checksum(t.view());
          std::lock_guard lock(m);
          got += c;
          ++parts;
        };
        if (input == Input::views) {
          ops::hash_join(comm, br, l.view(), keys, r.view(), keys, o, out);
          return 0;
        }
        if (input == Input::host_pieces || input == Input::device_pieces) {
          const MemoryType to = on_gpu ? MemoryType::DEVICE : MemoryType::HOST;
          ops::hash_join(comm, br, three_pieces(l, to, br), keys, three_pieces(r, to, br), keys, o,
                         out);
          return 0;
        }
        if (input == Input::device) {
          l = copy_table(l, MemoryType::DEVICE, br, br.stream());
          r = copy_table(r, MemoryType::DEVICE, br, br.stream());
        }
        ops::hash_join(comm, br, std::move(l), keys, std::move(r), keys, o, out);
        return 0;
      });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(parts, 7u);  // each partition once, on one rank
  EXPECT_GT(want.rows, 0u);
  EXPECT_EQ(got, want) << "rows " << got.rows << ", want " << want.rows;
}

}  // namespace

TEST(HashJoin, EveryTypeEqualsTheLocalJoinOfTheWholeInputs) {
  for (JoinType t : {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti,
                     JoinType::full}) {
    for (int n : {1, 2, 3}) check(n, t, 0, -1);
  }
}

TEST(HashJoin, UnderASmallHostLimitAndWithARankWithoutRows) {
  check(4, JoinType::inner, 3, -1);
  check(3, JoinType::full, 3, 1);
}

TEST(HashJoin, TablesHandedOverOrInPiecesJoinAsViewsDo) {
  check(2, JoinType::left, 0, -1, Input::owned);
  check(3, JoinType::full, 0, -1, Input::host_pieces);
  check(2, JoinType::inner, 3, 1, Input::host_pieces);
}

TEST(HashJoin, OnTheGpuEveryTypeEqualsTheLocalJoinOfTheWholeInputs) {
  {
    test::TempDir dir;
    BufferResource br(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  }
  for (JoinType t : {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti,
                     JoinType::full}) {
    for (int n : {1, 3}) check(n, t, 0, -1, Input::device);
  }
  check(2, JoinType::inner, 1, 0, Input::device);  // a 1 MiB device limit, a rank without rows
  check(3, JoinType::left_anti, 0, -1, Input::device_pieces);
  check(2, JoinType::full, 1, -1, Input::device_pieces);
}

TEST(HashJoin, SourcesWithoutPiecesOrWithOtherSchemasAreAnError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comm = make_single_communicator();
  const std::vector<std::size_t> k{0};
  const Table t = side(10, 1, br);
  const auto none = []() -> std::optional<Table> { return std::nullopt; };
  const auto ignore = [](std::uint32_t, Table&&) {};
  EXPECT_THROW(
      ops::hash_join(*comm, br, none, k, three_pieces(t, MemoryType::HOST, br), k, {}, ignore),
      logic_error);
  bool first = true;
  const ops::TableSource mixed = [&]() -> std::optional<Table> {
    if (!first) {
      std::vector<Column> cols = side(5, 2, br).release();
      cols.pop_back();
      return Table(std::move(cols), {"k", "s"});
    }
    first = false;
    return side(5, 3, br);
  };
  EXPECT_THROW(
      ops::hash_join(*comm, br, mixed, k, three_pieces(t, MemoryType::HOST, br), k, {}, ignore),
      logic_error);
}

TEST(HashJoin, SidesInDifferentMemoryAreAnError) {
  test::TempDir dir;
  BufferResource br(test::small_config(dir.path()));
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  auto comm = make_single_communicator();
  Table host = side(10, 1, br);
  Table device = copy_table(side(10, 2, br), MemoryType::DEVICE, br, br.stream());
  const std::vector<std::size_t> k{0};
  EXPECT_THROW(ops::hash_join(*comm, br, std::move(host), k, std::move(device), k, {},
                              [](std::uint32_t, Table&&) {}),
               logic_error);
}

TEST(HashJoin, BadKeysAreAnErrorBeforeAnythingIsSent) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comm = make_single_communicator();
  const Table t = side(10, 1, br);
  const std::vector<std::size_t> k{0}, s{1};
  EXPECT_THROW(
      ops::hash_join(*comm, br, t.view(), k, t.view(), s, {}, [](std::uint32_t, Table&&) {}),
      logic_error);
}
