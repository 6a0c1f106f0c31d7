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
#include <spillway/table/spillable_tables.hpp>

#include "common.hpp"
#include "ops/table_pieces.hpp"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

using namespace spillway;

namespace {

Table side(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64,     TypeId::STRING, TypeId::FLOAT64,
             decimal128(22, 4), TypeId::DATE32, TypeId::TIMESTAMP_NANOSECONDS};
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

void check(int nranks, JoinType type, std::size_t host_limit_mib, Rank empty_rank,
           Input input = Input::views, std::size_t chunk_bytes = 0) {
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
  std::map<std::uint32_t, Rank> owner;  // each partition's rank
  std::size_t chunks = 0;
  std::size_t largest = 0;     // rows of the largest chunk
  std::size_t chunk_rows = 0;  // the plan's bound
  ops::HashJoinOptions o;
  o.type = type;
  o.partitions = 7;
  o.output_chunk_bytes = chunk_bytes;
  const int rc =
      run_ranks(RankKind::local, nranks, cfg, [&](Communicator& comm, BufferResource& br) {
        Table l = part(comm.rank(), rows, 1, empty_rank, br);
        Table r = part(comm.rank(), rows / 2, 2, empty_rank, br);
        std::set<std::uint32_t> done;  // partitions whose chunks have all come
        std::optional<std::uint32_t> current;
        const auto out = [&](std::uint32_t p, Table&& t) {
          EXPECT_EQ(t.column(0).data().mem_type(), on_gpu ? MemoryType::DEVICE : MemoryType::HOST);
          const TableChecksum c =
              on_gpu ? gpu::checksum(t.view(), br, br.stream()) : checksum(t.view());
          // A partition's chunks come one after another.
          if (current != p) {
            if (current) done.insert(*current);
            EXPECT_EQ(done.count(p), 0u) << "partition " << p << " came back after another";
            current = p;
          }
          std::lock_guard lock(m);
          got += c;
          ++chunks;
          largest = std::max(largest, t.num_rows());
          const auto [it, fresh] = owner.emplace(p, comm.rank());
          EXPECT_EQ(it->second, comm.rank()) << "partition " << p << " on two ranks";
        };
        ops::JoinPlan plan;
        if (input == Input::views) {
          plan = ops::hash_join(comm, br, l.view(), keys, r.view(), keys, o, out);
        } else if (input == Input::host_pieces || input == Input::device_pieces) {
          const MemoryType to = on_gpu ? MemoryType::DEVICE : MemoryType::HOST;
          plan = ops::hash_join(comm, br, test::pieces(l, 3, to, br), keys,
                                test::pieces(r, 3, to, br), keys, o, out);
        } else {
          if (input == Input::device) {
            l = copy_table(l, MemoryType::DEVICE, br, br.stream());
            r = copy_table(r, MemoryType::DEVICE, br, br.stream());
          }
          plan = ops::hash_join(comm, br, std::move(l), keys, std::move(r), keys, o, out);
        }
        EXPECT_EQ(plan.kind, ops::JoinPlan::Kind::shuffle);
        EXPECT_EQ(plan.partitions, 7u);
        EXPECT_EQ(plan.device, on_gpu);
        std::lock_guard lock(m);
        chunk_rows = plan.chunk_rows;
        return 0;
      });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(owner.size(), 7u);  // each partition on one rank
  EXPECT_GE(chunks, 7u);
  EXPECT_LE(largest, chunk_rows);
  if (chunk_bytes > 0) {
    EXPECT_GT(chunks, 7u) << "small chunks split no partition";
  }
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

// Output chunks of 16 KiB (a few hundred rows): every partition's join comes in many chunks,
// none larger than the plan's bound, and together they are the whole join.
TEST(HashJoin, TheOutputComesInChunksOfBoundedSize) {
  check(2, JoinType::inner, 0, -1, Input::views, 16 << 10);
  check(3, JoinType::full, 3, 1, Input::owned, 16 << 10);
  check(2, JoinType::left, 0, -1, Input::host_pieces, 16 << 10);
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
  check(2, JoinType::left, 0, -1, Input::device, 16 << 10);  // many chunks a partition
}

// Sources cannot be measured ahead: 16 partitions a rank, or as many as the right side's
// size the caller gives asks for.
TEST(HashJoin, ThePlanOfSourcesTakesTheRightSidesSizeWhenGiven) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comm = make_single_communicator();
  const std::vector<std::size_t> k{0};
  const Table t = side(300, 1, br);
  const auto ignore = [](std::uint32_t, Table&&) {};
  ops::HashJoinOptions o;
  ops::JoinPlan p = ops::hash_join(*comm, br, test::pieces(t, 3, MemoryType::HOST, br), k,
                                   test::pieces(t, 3, MemoryType::HOST, br), k, o, ignore);
  EXPECT_EQ(p.partitions, 16u);
  EXPECT_FALSE(p.sizes_known);
  o.right_bytes = 100 << 10;
  o.partition_bytes = 10 << 10;
  o.broadcast_bytes = 0;  // (else a right side this small is broadcast)
  p = ops::hash_join(*comm, br, test::pieces(t, 3, MemoryType::HOST, br), k,
                     test::pieces(t, 3, MemoryType::HOST, br), k, o, ignore);
  EXPECT_EQ(p.partitions, 10u) << to_string(p);
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
      ops::hash_join(*comm, br, none, k, test::pieces(t, 3, MemoryType::HOST, br), k, {}, ignore),
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
      ops::hash_join(*comm, br, mixed, k, test::pieces(t, 3, MemoryType::HOST, br), k, {}, ignore),
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

namespace {

/// The plan hash_join chooses with `o` (partitions left to it) on `nranks` local ranks, each
/// with its part of a 3000-row left and 1500-row right side, and whether its output equals
/// the local join of the whole inputs; each rank's chunks are checked to come with the
/// rank's number as their partition under the broadcast plan. `pieces`: the sides as sources
/// of three pieces.
ops::JoinPlan plan_and_check(int nranks, const ops::HashJoinOptions& o, bool device = false,
                             bool pieces = false) {
  test::TempDir dir;
  const std::vector<std::size_t> keys{0, 3};
  TableChecksum want;
  {
    BufferResource br(test::host_config(dir.path()));
    std::vector<Table> ls, rs;
    std::vector<TableView> lv, rv;
    for (Rank r = 0; r < nranks; ++r) {
      ls.push_back(part(r, 3000 / nranks, 1, -1, br));
      rs.push_back(part(r, 1500 / nranks, 2, -1, br));
      lv.push_back(ls.back().view());
      rv.push_back(rs.back().view());
    }
    want = checksum(
        hash_join(concat(lv, br).view(), keys, concat(rv, br).view(), keys, o.type, br).view());
  }
  std::mutex m;
  TableChecksum got;
  ops::JoinPlan plan;
  const auto cfg = device ? test::small_config(dir.path()) : test::host_config(dir.path());
  const int rc =
      run_ranks(RankKind::local, nranks, cfg, [&](Communicator& comm, BufferResource& br) {
        const MemoryType to = device ? MemoryType::DEVICE : MemoryType::HOST;
        // (Host tables for three_pieces, which copies each piece into `to`.)
        const MemoryType whole = pieces ? MemoryType::HOST : to;
        Table l = copy_table(part(comm.rank(), 3000 / nranks, 1, -1, br), whole, br, br.stream());
        Table r = copy_table(part(comm.rank(), 1500 / nranks, 2, -1, br), whole, br, br.stream());
        std::optional<Rank> broadcast_partition;
        const auto out = [&](std::uint32_t partition, Table&& t) {
          EXPECT_EQ(t.column(0).data().mem_type(), to);
          const TableChecksum c =
              device ? gpu::checksum(t.view(), br, br.stream()) : checksum(t.view());
          broadcast_partition = static_cast<Rank>(partition);
          std::lock_guard lock(m);
          got += c;
        };
        const ops::JoinPlan p =
            pieces ? ops::hash_join(comm, br, test::pieces(l, 3, to, br), keys,
                                    test::pieces(r, 3, to, br), keys, o, out)
                   : ops::hash_join(comm, br, std::move(l), keys, std::move(r), keys, o, out);
        if (p.kind == ops::JoinPlan::Kind::broadcast) {
          EXPECT_EQ(broadcast_partition, comm.rank()) << "a rank's chunks are its own partition";
        }
        EXPECT_EQ(p.device, device);
        std::lock_guard lock(m);
        plan = p;
        return 0;
      });
  EXPECT_EQ(rc, 0);
  EXPECT_GT(want.rows, 0u);
  EXPECT_EQ(got, want) << "rows " << got.rows << ", want " << want.rows;
  return plan;
}

}  // namespace

// A right side under broadcast_bytes is allgathered and each rank joins its own left rows
// against it; a full join, broadcast_bytes 0 or a larger right side shuffles, into as many
// partitions as partition_bytes asks for (at least one per rank).
TEST(HashJoin, ThePlanBroadcastsASmallRightSideAndSizesPartitions) {
  for (int n : {1, 3}) {
    for (JoinType t : {JoinType::inner, JoinType::left, JoinType::left_semi, JoinType::left_anti}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, " + to_string(t));
      ops::HashJoinOptions o;
      o.type = t;
      const ops::JoinPlan p = plan_and_check(n, o);
      EXPECT_EQ(p.kind, ops::JoinPlan::Kind::broadcast) << to_string(p);
      EXPECT_TRUE(p.sizes_known);
      EXPECT_GT(p.right_bytes, 0u);
      EXPECT_NE(to_string(p).find("broadcast join"), std::string::npos) << to_string(p);
    }
  }
  ops::HashJoinOptions full;
  full.type = JoinType::full;
  EXPECT_EQ(plan_and_check(2, full).kind, ops::JoinPlan::Kind::shuffle);
  ops::HashJoinOptions sized;
  sized.broadcast_bytes = 0;
  sized.partition_bytes = 10 << 10;
  const ops::JoinPlan p = plan_and_check(3, sized);
  EXPECT_EQ(p.kind, ops::JoinPlan::Kind::shuffle);
  EXPECT_EQ(p.partitions, (p.right_bytes + (10 << 10) - 1) / (10 << 10)) << to_string(p);
  EXPECT_GT(p.partitions, 3u);
  EXPECT_NE(to_string(p).find(std::to_string(p.partitions) + " partitions"), std::string::npos);
  sized.partition_bytes = 1 << 30;  // one partition would do: one per rank
  EXPECT_EQ(plan_and_check(3, sized).partitions, 3u);
}

// Sources whose right side's size is given and small: the broadcast plan (the right pieces
// concatenated and allgathered, each left piece joined against them as it comes); without the
// size, the shuffle plan.
TEST(HashJoin, SourcesWithASmallRightSideOfKnownSizeAreBroadcast) {
  for (int n : {1, 3}) {
    for (JoinType t : {JoinType::inner, JoinType::left_anti}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, " + to_string(t));
      ops::HashJoinOptions o;
      o.type = t;
      o.right_bytes = 100 << 10;
      EXPECT_EQ(plan_and_check(n, o, false, true).kind, ops::JoinPlan::Kind::broadcast);
      o.right_bytes = 0;
      EXPECT_EQ(plan_and_check(n, o, false, true).kind, ops::JoinPlan::Kind::shuffle);
    }
  }
}

TEST(HashJoin, OnTheGpuTheBroadcastPlanJoinsInDeviceMemory) {
  {
    test::TempDir dir;
    BufferResource probe(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(probe, MemoryType::DEVICE);
  }
  for (JoinType t : {JoinType::inner, JoinType::left_anti}) {
    ops::HashJoinOptions o;
    o.type = t;
    EXPECT_EQ(plan_and_check(3, o, true).kind, ops::JoinPlan::Kind::broadcast);
    o.right_bytes = 100 << 10;  // sources in device memory
    EXPECT_EQ(plan_and_check(2, o, true, true).kind, ops::JoinPlan::Kind::broadcast);
  }
  ops::HashJoinOptions sized;
  sized.broadcast_bytes = 0;
  sized.partition_bytes = 20 << 10;
  EXPECT_GT(plan_and_check(2, sized, true).partitions, 2u);
}

// An output larger than the 2 MiB host limit of each of 2 ranks, kept in SpillableTables
// as it comes: it waits on disk, and all of it comes back equal to the local join.
TEST(HashJoin, AnOutputLargerThanTheLimitIsKeptSpillable) {
  test::TempDir dir;
  const std::vector<std::size_t> keys{0};
  TableChecksum want;
  {
    BufferResource br(test::host_config(dir.path()));
    const Table l0 = part(0, 3000, 1, -1, br), l1 = part(1, 3000, 1, -1, br);
    const Table r0 = part(0, 1500, 2, -1, br), r1 = part(1, 1500, 2, -1, br);
    const std::array<TableView, 2> lv{l0.view(), l1.view()}, rv{r0.view(), r1.view()};
    want = checksum(
        hash_join(concat(lv, br).view(), keys, concat(rv, br).view(), keys, JoinType::inner, br)
            .view());
  }
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(2 * MiB);
  std::mutex m;
  TableChecksum got;
  std::size_t on_disk = 0;
  const int rc = run_ranks(RankKind::local, 2, cfg, [&](Communicator& comm, BufferResource& br) {
    SpillableTables kept(br);
    {
      const Table l = part(comm.rank(), 3000, 1, -1, br);
      const Table r = part(comm.rank(), 1500, 2, -1, br);
      ops::hash_join(comm, br, l.view(), keys, r.view(), keys, {},
                     [&](std::uint32_t, Table&& t) { kept.push(std::move(t)); });
    }
    const std::size_t disk = kept.bytes_in(MemoryType::DISK);
    TableChecksum mine;
    while (std::optional<Table> t = kept.pop(MemoryType::HOST)) mine += checksum(t->view());
    EXPECT_LE(br.peak(MemoryType::HOST), 2 * MiB);
    std::lock_guard lock(m);
    got += mine;
    on_disk += disk;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_GT(on_disk, 2 * MiB);  // more than a rank can hold
  EXPECT_GT(want.rows, 50000u);
  EXPECT_EQ(got, want) << "rows " << got.rows << ", want " << want.rows;
}
