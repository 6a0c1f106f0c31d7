// The operators as actors, on 1-3 local ranks: the shuffle actor puts every row in the
// partition its key hashes to, each partition once over all ranks, also with a rank without
// rows and under a small limit; a join followed by a group-by as one network
// gives the groups of the local join and group-by of the whole inputs; an actor that fails on
// one rank stops that rank's network with its error and the other rank's within the
// communicator's timeout.
#include <spillway/comm/communicator.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/actors.hpp>
#include <spillway/streaming/actors.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/groupby.hpp>
#include <spillway/table/hashing.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/pack.hpp>

#include "common.hpp"
#include "ops/table_pieces.hpp"

#include <chrono>
#include <mutex>
#include <set>

using namespace spillway;
using streaming::Channel;
using streaming::map;
using streaming::Network;
using streaming::NetworkReport;
using streaming::sink;
using streaming::source;
using streaming::TableSource;

namespace {

/// Rank r's rows of one side: an INT64 key of 200 values and an INT64 value.
Table side(Rank r, std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT64};
  o.key_cardinality = 200;
  o.seed = seed + 10 * static_cast<std::uint64_t>(r);
  return random_table(o, br);
}

void check_shuffle(int nranks, bool on_gpu, std::size_t limit_mib, Rank empty_rank) {
  SCOPED_TRACE(std::to_string(nranks) + " ranks" + (on_gpu ? " on the GPU" : "") + ", limit " +
               std::to_string(limit_mib) + " MiB, empty rank " + std::to_string(empty_rank));
  constexpr std::uint32_t kParts = 5;
  constexpr std::size_t kRows = 20000;
  test::TempDir dir;
  auto cfg = on_gpu ? test::small_config(dir.path()) : test::host_config(dir.path());
  if (limit_mib > 0) {
    cfg.limits[index(on_gpu ? MemoryType::DEVICE : MemoryType::HOST)] =
        Limit::bytes(limit_mib * MiB);
  }
  const MemoryType tier = on_gpu ? MemoryType::DEVICE : MemoryType::HOST;
  std::mutex m;
  TableChecksum want;
  TableChecksum got;
  std::set<std::uint32_t> seen;
  bool misplaced = false;
  const int rc =
      run_ranks(RankKind::local, nranks, cfg, [&](Communicator& comm, BufferResource& br) {
        const Table t = side(comm.rank(), comm.rank() == empty_rank ? 0 : kRows, 1, br);
        {
          std::lock_guard lock(m);
          want += checksum(t.view());
        }
        Network net(br, &comm);
        Channel& in = net.channel("in");
        Channel& out = net.channel("out");
        net.add("source", {}, {&in}, source(test::pieces(t, 7, tier, br)));
        net.add("shuffle", {&in}, {&out}, ops::shuffle_actor({0}, kParts, 0, tier));
        net.add(
            "sink", {&out}, {},
            sink(
                [&](streaming::Message&& msg) {
                  const Table host = on_gpu
                                         ? copy_table(msg.table, MemoryType::HOST, br, br.stream())
                                         : std::move(msg.table);
                  br.stream().synchronize();
                  const TableChecksum c = checksum(host.view());
                  bool wrong = false;
                  if (host.num_rows() > 0) {
                    const std::vector<std::size_t> keys{0};
                    const PartitionedTable p = hash_partition(host.view(), keys, kParts, br);
                    wrong =
                        p.offsets[msg.partition + 1] - p.offsets[msg.partition] != host.num_rows();
                  }
                  std::lock_guard lock(m);
                  EXPECT_TRUE(seen.insert(msg.partition).second) << "partition " << msg.partition;
                  got += c;
                  misplaced |= wrong;
                },
                tier));
        net.run();
        if (limit_mib > 0) {
          EXPECT_LE(br.peak(tier), limit_mib * MiB);
        }
        return 0;
      });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(seen.size(), kParts);
  EXPECT_FALSE(misplaced);
  EXPECT_GT(want.rows, kRows - 1);
  EXPECT_EQ(got, want);
}

}  // namespace

TEST(OpActors, TheShuffleActorPutsEveryRowInItsPartitionOnce) {
  for (int n : {1, 2, 3}) check_shuffle(n, false, 0, -1);
  check_shuffle(3, false, 2, 1);  // a 2 MiB host limit, a rank without rows
}

TEST(OpActors, TheShuffleActorOnTheGpu) {
  {
    test::TempDir dir;
    BufferResource br(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  }
  check_shuffle(2, true, 0, -1);
  check_shuffle(3, true, 1, 0);  // a 1 MiB device limit, a rank without rows
}

// left ⋈ right on the key, then GROUP BY the key with COUNT and SUM of both values, as one
// network on 2 ranks, against the local join and group-by of the whole inputs.
TEST(OpActors, AJoinThenAGroupByAsOneNetworkEqualsTheLocalOnes) {
  constexpr int kRanks = 2;
  constexpr std::size_t kRows = 3000;
  const std::vector<Aggregation> aggs{{0, AggOp::count}, {1, AggOp::sum}, {3, AggOp::sum}};
  test::TempDir dir;
  TableChecksum want;
  {
    BufferResource br(test::host_config(dir.path()));
    std::vector<Table> l;
    std::vector<Table> r;
    std::vector<TableView> lv;
    std::vector<TableView> rv;
    for (Rank k = 0; k < kRanks; ++k) {
      l.push_back(side(k, kRows, 1, br));
      r.push_back(side(k, kRows / 3, 2, br));
    }
    for (const Table& t : l) lv.push_back(t.view());
    for (const Table& t : r) rv.push_back(t.view());
    const std::vector<std::size_t> key{0};
    const Table joined =
        hash_join(concat(lv, br).view(), key, concat(rv, br).view(), key, JoinType::inner, br);
    want = checksum(groupby(joined.view(), key, aggs, br).view());
  }
  std::mutex m;
  TableChecksum got;
  const int rc =
      run_ranks(RankKind::local, kRanks, test::host_config(dir.path()),
                [&](Communicator& comm, BufferResource& br) {
                  const Table l = side(comm.rank(), kRows, 1, br);
                  const Table r = side(comm.rank(), kRows / 3, 2, br);
                  Network net(br, &comm);
                  Channel& lc = net.channel("left");
                  Channel& rc2 = net.channel("right");
                  Channel& joined = net.channel("joined");
                  Channel& groups = net.channel("groups");
                  constexpr MemoryType H = MemoryType::HOST;
                  net.add("left", {}, {&lc}, source(test::pieces(l, 3, H, br)));
                  net.add("right", {}, {&rc2}, source(test::pieces(r, 2, H, br)));
                  ops::HashJoinOptions jo;
                  jo.partitions = 4;
                  jo.op = 0;
                  net.add("join", {&lc, &rc2}, {&joined}, ops::hash_join_actor({0}, {0}, jo, H));
                  ops::GroupByOptions go;
                  go.partitions = 3;
                  go.op = 10;
                  net.add("groupby", {&joined}, {&groups}, ops::groupby_actor({0}, aggs, go, H));
                  net.add("sink", {&groups}, {},
                          sink(
                              [&](streaming::Message&& msg) {
                                const TableChecksum c = checksum(msg.table.view());
                                std::lock_guard lock(m);
                                got += c;
                              },
                              H));
                  const NetworkReport report = net.run();
                  EXPECT_GT(report.actors[2].stats.messages_out, 0u);  // the join sent chunks
                  return 0;
                });
  EXPECT_EQ(rc, 0);
  EXPECT_GT(want.rows, 100u);
  EXPECT_EQ(got, want);
}

// Rank 1's map throws on its first message: its network fails with that error; rank 0's
// shuffle waits for rank 1's rows and fails with a comm_error within the 2 s timeout, over the
// local communicator (ranks as threads) and over transfer engines (each rank its own).
TEST(OpActors, AFailureOnOneRankStopsEveryRanksNetwork) {
  for (const RankKind kind : {RankKind::local, RankKind::transfer}) {
    SCOPED_TRACE(kind == RankKind::local ? "local" : "transfer");
    test::TempDir dir;
    std::mutex m;
    std::vector<std::string> errors(2);
    std::vector<double> seconds(2);
    const int rc = run_ranks(
        kind, 2, test::host_config(dir.path()), [&](Communicator& comm, BufferResource& br) {
          comm.set_timeout(std::chrono::seconds(2));
          const Table t = side(comm.rank(), 5000, 3, br);
          Network net(br, &comm);
          Channel& a = net.channel("a");
          Channel& b = net.channel("b");
          Channel& c = net.channel("c");
          const Rank me = comm.rank();
          net.add("source", {}, {&a}, source(test::pieces(t, 4, MemoryType::HOST, br)));
          net.add("check", {&a}, {&b},
                  map(
                      [me](Table&& x) -> std::optional<Table> {
                        if (me == 1) throw std::runtime_error("a bad row on rank 1");
                        return std::move(x);
                      },
                      MemoryType::HOST));
          net.add("shuffle", {&b}, {&c}, ops::shuffle_actor({0}, 2, 0, MemoryType::HOST));
          net.add("sink", {&c}, {}, sink([](streaming::Message&&) {}, MemoryType::HOST));
          const auto t0 = std::chrono::steady_clock::now();
          try {
            net.run();
          } catch (const std::exception& e) {
            std::lock_guard lock(m);
            errors[static_cast<std::size_t>(me)] = e.what();
          }
          seconds[static_cast<std::size_t>(me)] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          return 0;
        });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(errors[1], "a bad row on rank 1");
    // The local communicator says rank 1 left, the transfer engine that peer 1 is gone.
    EXPECT_TRUE(errors[0].find("rank 1") != std::string::npos ||
                errors[0].find("peer 1") != std::string::npos)
        << errors[0];
    EXPECT_LT(seconds[0], 10.0);
    EXPECT_LT(seconds[1], 10.0);
  }
}
