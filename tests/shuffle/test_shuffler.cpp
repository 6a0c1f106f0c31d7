// The shuffle on the local communicator (1-4 ranks as threads, host memory): every row reaches
// the owner of its partition, none is lost, duplicated or changed (order-independent checksums
// summed over ranks), with streaming inserts, forced spilling, skew, empty partitions and two
// shuffles at once; clear errors for misuse and for a peer that never finishes.
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include "common.hpp"
#include "shuffle/detail/wire.hpp"
#include "shuffle/shuffle_common.hpp"

#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

using namespace spillway;

namespace {

struct Setup {
  int nranks;
  double spill_injection{0};
  double skew{0};
  OpID shuffles{1};  // concurrent shuffles per rank
  test::Feed feed{test::Feed::streaming};
  test::Shape shape{};
};

/// Runs rank(comm, br) on `nranks` local ranks (run_ranks), each with a BufferResource of
/// config(spill_dir); the checksums of what the ranks put in and took out, summed over the
/// ranks, must agree. A rank that throws fails the test and leaves the group (so that the
/// others fail too instead of waiting).
template <typename ConfigFn, typename RankFn>
void expect_rows_arrive(int nranks, ConfigFn&& config, RankFn&& rank) {
  test::TempDir dir;
  TableChecksum in_sum;
  TableChecksum out_sum;
  std::mutex m;
  LaunchOptions launch;
  launch.on_error = [](Rank r, const std::string& what) {
    ADD_FAILURE() << "rank " << r << ": " << what;
  };
  const int rc = run_ranks(
      RankKind::local, nranks, config(dir.path()),
      [&](Communicator& comm, BufferResource& br) {
        const auto [in, out] = rank(comm, br);
        std::lock_guard lock(m);
        in_sum += in;
        out_sum += out;
        return 0;
      },
      launch);
  EXPECT_EQ(rc, 0);
  EXPECT_GT(in_sum.rows, 0U);
  EXPECT_EQ(in_sum, out_sum) << "rows in " << in_sum.rows << ", out " << out_sum.rows;
}

void run(const Setup& setup) {
  const auto config = [&](const std::string& spill_dir) {
    return test::with_spill_injection(test::host_config(spill_dir), setup.spill_injection);
  };
  expect_rows_arrive(setup.nranks, config, [&](Communicator& comm, BufferResource& br) {
    TableChecksum in_sum;
    TableChecksum out_sum;
    std::mutex m;
    std::vector<std::thread> ops;
    for (OpID op = 1; op <= setup.shuffles; ++op) {
      ops.emplace_back([&, op] {
        try {
          const auto [in, out] =
              test::shuffle_rank(comm, br, setup.skew, op, setup.feed, setup.shape);
          std::lock_guard lock(m);
          in_sum += in;
          out_sum += out;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << comm.rank() << " op " << op << ": " << e.what();
        }
      });
    }
    for (auto& t : ops) t.join();
    comm.barrier();
    return std::pair{in_sum, out_sum};
  });
}

}  // namespace

class ShuffleRanks : public ::testing::TestWithParam<int> {};

TEST_P(ShuffleRanks, EveryRowArrivesOnceAtItsOwner) {
  run({GetParam()});
}

TEST_P(ShuffleRanks, WithSpillingForcedEverywhere) {
  run({GetParam(), 0.5});
}

TEST_P(ShuffleRanks, AllRowsInOnePartition) {
  run({GetParam(), 0, 1.0});
}

TEST_P(ShuffleRanks, TwoShufflesAtOnce) {
  run({GetParam(), 0, 0, 2});
}

// Direct chunks: each partition lands in one buffer laid out as the concatenation of every
// rank's chunk (the extracted partition is that one chunk), straight from packed partitions or
// from row ranges of the input table, also with spilling forced and all rows in one partition.
// These tables' column pieces are small: direct only with shuffle_direct_piece 0.
TEST_P(ShuffleRanks, DirectChunksLandInOneBuffer) {
  OptionsGuard guard;
  options::set_shuffle_direct_piece(0);
  run({GetParam(), 0, 0, 1, test::Feed::direct_chunks});
}

TEST_P(ShuffleRanks, DirectChunksWithSpillingAndSkew) {
  OptionsGuard guard;
  options::set_shuffle_direct_piece(0);
  run({GetParam(), 0.5, 1.0, 1, test::Feed::direct_chunks});
}

TEST_P(ShuffleRanks, DirectRowRangesOfTheInputTable) {
  run({GetParam(), 0, 0, 2, test::Feed::direct_table});
}

TEST_P(ShuffleRanks, ATableHashedByTheShuffler) {
  OptionsGuard guard;
  options::set_shuffle_direct_piece(0);
  run({GetParam(), 0.5, 0.5, 1, test::Feed::hashed_table});
}

// With the default shuffle_direct_piece, small column pieces go as packed chunks instead (a
// message per partition, concatenated at the owner); every row still arrives once.
TEST_P(ShuffleRanks, SmallColumnPiecesGoPacked) {
  run({GetParam(), 0, 0.5, 1, test::Feed::direct_chunks});
  run({GetParam(), 0.5, 0, 1, test::Feed::hashed_table});
}

// Many partitions, most of them empty (200 distinct keys): each is handed out once, with
// streaming and direct chunks (waiting was a scan of every local partition per call: 20000
// partitions took 13 s). Under the sanitizers,
// 2000 (ThreadSanitizer took over 20 s for the first of 20000 on 4 ranks).
TEST_P(ShuffleRanks, TwentyThousandPartitions) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr PartID partitions = 2000;
#else
  constexpr PartID partitions = 20000;
#endif
  const test::Shape shape{.rows = 20000, .partitions = partitions};
  run({.nranks = GetParam(), .shape = shape});
  run({.nranks = GetParam(), .feed = test::Feed::direct_chunks, .shape = shape});
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShuffleRanks, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// 500 shuffles one after another on one op id, on 2 and 3 local ranks: each rank's messages
// of the next shuffle must wait for its next Shuffler and never reach the one still finishing
// (before: 5 of 5 runs failed with "no partition completed" or mixed counts within 7 shuffles).
class ReusedOpId : public ::testing::TestWithParam<int> {};

TEST_P(ReusedOpId, FiveHundredShufflesOneAfterAnother) {
  expect_rows_arrive(GetParam(), test::host_config, [](Communicator& comm, BufferResource& br) {
    comm.set_timeout(std::chrono::seconds(20));
    return test::reuse_op_id(comm, br, 1, 500);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReusedOpId, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Two live Shufflers with one op id on one communicator would take each other's messages.
TEST(Shuffler, TwoLiveShufflersWithOneOpIdAreAnError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(1);
  Shuffler a(*comms[0], 5, 2, br);
  try {
    Shuffler b(*comms[0], 5, 2, br);
    FAIL() << "a second live Shuffler of op 5";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("op id 5 is in use"), std::string::npos) << e.what();
  }
  Shuffler c(*comms[0], 6, 2, br);  // another id is fine
}

TEST(Shuffler, AnOpIdIsFreeAgainOnceItsShufflerIsGone) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(1);
  { Shuffler a(*comms[0], 5, 2, br); }
  Shuffler b(*comms[0], 5, 2, br);
}

TEST(Shuffler, MisuseIsAClearError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(1);
  Shuffler s(*comms[0], 1, 4, br);
  std::unordered_map<PartID, PackedData> bad;
  bad.emplace(9, PackedData{});
  EXPECT_THROW(s.insert(std::move(bad)), logic_error);
  EXPECT_THROW(s.extract(2), logic_error);  // not complete: inserts are not finished
  s.insert_finished();
  EXPECT_THROW(s.insert({}), logic_error);
  EXPECT_THROW(s.insert_finished(), logic_error);
  EXPECT_EQ(s.local_partitions().size(), 4U);
  for (int i = 0; i < 4; ++i) {
    const PartID pid = s.wait_any(std::chrono::seconds(5));
    EXPECT_TRUE(s.extract(pid).empty());
  }
  EXPECT_THROW(s.extract(0), logic_error);  // twice
  EXPECT_THROW(Shuffler(*comms[0], 2, 0, br), logic_error);
}

// A device table handed to the Shuffler to hash: partitioned a column at a time on the GPU
// (gpu::PartitionPlan), each column sent as soon as it is placed. Two ranks on one GPU, 2 and 7
// partitions (the two place passes), with and without a device limit that makes most incoming
// bytes land on the host; every row arrives once (checksums over both ranks), the partitions
// are where hashing puts them (the same checksums as gpu::partition_and_pack's chunks).
TEST(Shuffler, ADeviceTableIsPartitionedColumnByColumn) {
  test::TempDir dir;
  {
    BufferResource probe(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(probe, MemoryType::DEVICE);
  }
  // Its column pieces are small: placed column by column (direct) with shuffle_direct_piece
  // 0, or when the GPU has no room for a packed copy beside the table (the limit); else packed.
  for (const auto& [total, limited, force_direct] :
       {std::tuple{2U, false, true}, std::tuple{2U, true, true}, std::tuple{7U, false, true},
        std::tuple{7U, true, true}, std::tuple{7U, false, false}, std::tuple{7U, true, false}}) {
    {
      OptionsGuard guard;
      if (force_direct) options::set_shuffle_direct_piece(0);
      const bool direct = force_direct || limited;
      SCOPED_TRACE(std::to_string(total) + " partitions" + (limited ? ", device limit" : "") +
                   (direct ? ", direct" : ", packed"));
      auto comms = LocalCommunicator::create(2);
      for (auto& c : comms) c->set_timeout(std::chrono::seconds(30));  // a failed rank: not 300 s
      std::mutex m;
      std::vector<TableChecksum> expected(total);
      std::vector<TableChecksum> got(total);
      std::vector<std::thread> threads;
      for (Rank r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
          try {
            // The limit: the input (5 columns), a group of placed columns (at most 2) and the
            // partition ids fit, the partitions' final buffers (5 columns) mostly not.
            auto cfg = test::small_config(dir.path());
            constexpr std::size_t rows = 300007;
            constexpr std::size_t columns = 5;
            if (limited) cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(rows * 4 * 9);
            BufferResource br(cfg);
            BufferResource unlimited(test::small_config(dir.path()));  // for the expected sums
            Table t =
                gpu::random_int32_table(rows, columns, -1000000, 1000000, 11 + r, br, br.stream());
            const std::size_t keys[] = {2};
            auto chunks = gpu::partition_and_pack(t.view(), keys, total, unlimited, br.stream(), 3);
            for (PartID p = 0; p < total; ++p) {
              const UnpackedTable u = gpu::unpack(std::move(chunks[p]), br.stream());
              const TableChecksum sum = gpu::checksum(u.view(), unlimited, br.stream());
              std::lock_guard lock(m);
              expected[p] += sum;
            }
            Communicator& comm = *comms[static_cast<std::size_t>(r)];
            Shuffler s(comm, 1, total, br);
            s.insert_finished(std::move(t), keys, 3);
            EXPECT_EQ(t.num_columns(), 0U);  // consumed
            while (!s.finished()) {
              const PartID pid = s.wait_any(std::chrono::seconds(30));
              auto parts = s.extract(pid);
              // Direct: one buffer; packed: a chunk from each rank.
              ASSERT_EQ(parts.size(), direct ? 1U : 2U);
              for (auto& part : parts) {
                // Summed where it is: a partition that landed on the host would need the
                // device memory that this rank's sends still hold until they complete.
                const TableChecksum sum =
                    part.payload->mem_type() == MemoryType::DEVICE
                        ? gpu::checksum(gpu::unpack(std::move(part), br.stream()).view(), br,
                                        br.stream())
                        : checksum(unpack(std::move(part)).view());
                std::lock_guard lock(m);
                got[pid] += sum;
              }
            }
            const auto landed = br.statistics().get("recv-into-host-memory");
            EXPECT_EQ(limited, landed.has_value() && landed->bytes > 0) << "rank " << r;
            EXPECT_LE(br.peak(MemoryType::DEVICE), limited ? rows * 4 * 9 : ~std::size_t{0});
            comm.barrier();
          } catch (const std::exception& e) {
            ADD_FAILURE() << "rank " << r << ": " << e.what();
          }
        });
      }
      for (auto& th : threads) th.join();
      for (PartID p = 0; p < total; ++p) {
        EXPECT_EQ(expected[p], got[p]) << "partition " << p << ": rows " << expected[p].rows
                                       << " inserted, " << got[p].rows << " extracted";
      }
    }
  }
}

TEST(Shuffler, DirectMisuseIsAClearError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(1);
  RandomTableOptions o;
  o.rows = 100;
  o.types = {TypeId::INT32, TypeId::STRING};
  auto strings = std::make_shared<const Table>(random_table(o, br));
  o.types = {TypeId::INT32};
  auto ints = std::make_shared<const Table>(random_table(o, br));
  Shuffler s(*comms[0], 1, 2, br);
  const std::vector<std::size_t> good{0, 50, 100};
  EXPECT_THROW(s.insert_finished(strings, good), logic_error);  // not fixed-width
  EXPECT_THROW(s.insert_finished(ints, std::vector<std::size_t>{0, 100}), logic_error);
  EXPECT_THROW(s.insert_finished(ints, std::vector<std::size_t>{0, 60, 50}), logic_error);
  EXPECT_THROW(s.insert_finished(ints, std::vector<std::size_t>{0, 50, 99}), logic_error);
  EXPECT_THROW(s.insert_finished(nullptr, good), logic_error);
  s.insert_finished(ints, good);
  EXPECT_THROW(s.insert_finished(ints, good), logic_error);  // twice
  std::size_t rows = 0;
  for (int i = 0; i < 2; ++i) {
    const PartID pid = s.wait_any(std::chrono::seconds(5));
    auto chunks = s.extract(pid);
    ASSERT_EQ(chunks.size(), 1U);
    rows += unpack(std::move(chunks[0])).view().num_rows();
  }
  EXPECT_EQ(rows, 100U);
}

// A rank takes no incoming chunk before it joins the shuffle (its first insert or
// insert_finished): its memory is the input's until then. Rank 1 sends everything at once;
// rank 0 holds nothing of it while it has not joined, and all of it after.
TEST(Shuffler, IncomingChunksWaitUntilTheRankJoins) {
  test::TempDir dir;
  auto comms = LocalCommunicator::create(2);
  BufferResource br0(test::host_config(dir.path()));
  BufferResource br1(test::host_config(dir.path()));
  const Table table = random_int32_table(50000, 3, 0, 1000, 3, br1);
  const TableChecksum sent = checksum(table.view());
  std::size_t payload = 0;
  std::thread peer([&] {
    try {
      Shuffler s(*comms[1], 1, 2, br1);  // partition 0 is rank 0's
      std::unordered_map<PartID, PackedData> chunks;
      chunks.emplace(0, pack(table.view(), br1));
      payload = chunks.at(0).payload->size();
      s.insert(std::move(chunks));
      s.insert_finished();
      EXPECT_TRUE(s.extract(s.wait_any(std::chrono::seconds(10))).empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank 1: " << e.what();
    }
  });
  {
    Shuffler s(*comms[0], 1, 2, br0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 has sent by now
    EXPECT_EQ(br0.used(MemoryType::HOST), 0U) << "a chunk was received before rank 0 joined";
    s.insert_finished();
    const PartID pid = s.wait_any(std::chrono::seconds(10));
    EXPECT_EQ(pid, 0U);
    auto chunks = s.extract(pid);
    ASSERT_EQ(chunks.size(), 1U);
    EXPECT_EQ(chunks[0].payload->size(), payload);
    EXPECT_EQ(checksum(unpack(std::move(chunks[0])).view()), sent);
  }
  peer.join();
}

// A partition taken by extract() without waiting is not handed out again by wait_any, which
// returns the others once each, then refuses.
TEST(Shuffler, AnExtractedPartitionIsNotWaitedForAgain) {
  test::TempDir dir;
  auto comms = LocalCommunicator::create(1);
  BufferResource br(test::host_config(dir.path()));
  const Table table = random_int32_table(3000, 2, 0, 1000, 3, br);
  Shuffler s(*comms[0], 1, 4, br);
  auto packed = partition_and_pack(table.view(), std::vector<std::size_t>{0}, 4, br, 7);
  std::unordered_map<PartID, PackedData> chunks;
  for (PartID pid = 0; pid < 4; ++pid) chunks.emplace(pid, std::move(packed[pid]));
  s.insert(std::move(chunks));  // kept here, as they arrive: complete at insert_finished
  s.insert_finished();
  (void)s.extract(2);
  std::set<PartID> seen;
  for (int i = 0; i < 3; ++i) seen.insert(s.wait_any(std::chrono::seconds(5)));
  EXPECT_EQ(seen, (std::set<PartID>{0, 1, 3}));
  EXPECT_THROW((void)s.wait_any(std::chrono::milliseconds(1)), logic_error);
  EXPECT_THROW((void)s.extract(2), logic_error);
}

// The statistics give the shuffle's time per chunk: its chunks are those its partitions
// received (its own included), its time from construction to destruction.
TEST(Shuffler, TheStatisticsSayWhatAChunkCost) {
  test::TempDir dir;
  auto comms = LocalCommunicator::create(1);
  BufferResource br(test::host_config(dir.path()));
  const Table table = random_int32_table(3000, 2, 0, 1000, 3, br);
  {
    Shuffler s(*comms[0], 1, 4, br);
    for (int round = 0; round < 3; ++round) {
      auto packed = partition_and_pack(table.view(), std::vector<std::size_t>{0}, 4, br, 7);
      std::unordered_map<PartID, PackedData> chunks;
      for (PartID pid = 0; pid < 4; ++pid) chunks.emplace(pid, std::move(packed[pid]));
      s.insert(std::move(chunks));
    }
    s.insert_finished();
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(s.extract(s.wait_any(std::chrono::seconds(5))).size(), 3U);
  }
  const auto stats = br.statistics().snapshot();
  ASSERT_TRUE(stats.contains("shuffle-chunks"));
  EXPECT_EQ(stats.at("shuffle-chunks").count, 12U);
  EXPECT_GT(stats.at("shuffle-chunks").seconds, 0.0);
  EXPECT_NE(br.statistics().report().find("shuffle-chunks: "), std::string::npos);
  EXPECT_NE(br.statistics().report().find(" each)"), std::string::npos);
}

// A consumer pulls partitions as tables, one at a time, while the rest wait spilled: under a
// host limit of a fraction of the data every chunk goes to disk, and extract_table brings a
// partition's chunks back into host memory only as it is concatenated. Together the tables
// are the input; a partition no rank had rows of is a table without columns.
TEST(Shuffler, ExtractTablePullsSpilledPartitionsIntoTheTierAskedFor) {
  test::TempDir dir;
  auto comms = LocalCommunicator::create(1);
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(1 << 20);
  BufferResource br(cfg);
  TableChecksum want;
  Shuffler s(*comms[0], 1, 8, br);
  for (std::uint64_t piece = 0; piece < 20; ++piece) {  // 2 MiB in all, twice the limit
    RandomTableOptions o;
    o.rows = 3000;
    o.types = {TypeId::INT64, decimal128(20, 2), TypeId::STRING, TypeId::DATE32};
    o.key_cardinality = 400;  // partitions of about the same size: a partition twice fits
    o.null_fraction = 0.1;
    o.max_string = 4;
    o.seed = piece;
    const Table table = random_table(o, br);
    want += checksum(table.view());
    auto packed = partition_and_pack(table.view(), std::vector<std::size_t>{0}, 8, br, 7);
    std::unordered_map<PartID, PackedData> chunks;
    for (PartID pid = 0; pid < 8; ++pid) {
      if (packed[pid].payload->size() > 0) chunks.emplace(pid, std::move(packed[pid]));
    }
    s.insert(std::move(chunks));
  }
  s.insert_finished();
  EXPECT_GT(br.used(MemoryType::DISK), 0u) << "nothing waited on disk";
  TableChecksum got;
  for (int i = 0; i < 8; ++i) {
    const Table t = s.extract_table(s.wait_any(std::chrono::seconds(5)), MemoryType::HOST);
    ASSERT_EQ(t.num_columns(), 4u);
    EXPECT_EQ(t.column(1).type(), decimal128(20, 2));
    EXPECT_EQ(t.column(0).data().mem_type(), MemoryType::HOST);
    got += checksum(t.view());
  }
  EXPECT_EQ(got, want);
  EXPECT_LE(br.peak(MemoryType::HOST), 1u << 20);
  Shuffler none(*comms[0], 2, 2, br);
  none.insert_finished();
  EXPECT_EQ(none.extract_table(0, MemoryType::HOST).num_columns(), 0u) << "no rows: no columns";
  EXPECT_THROW((void)none.extract_table(1, MemoryType::DISK), logic_error);
}

// The timeout names what is missing, and the chunk announced to rank 1 that waits for rank 1
// to be ready for it.
TEST(Shuffler, APeerThatNeverFinishesTimesOut) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(2);
  comms[0]->set_timeout(std::chrono::milliseconds(500));  // the destructor waits this long
  Shuffler s(*comms[0], 1, 2, br);                        // rank 1 never joins
  const Table table = random_int32_table(100, 1, 0, 10, 1, br);
  std::unordered_map<PartID, PackedData> chunks;
  chunks.emplace(1, pack(table.view(), br));  // partition 1: rank 1's
  s.insert(std::move(chunks));
  s.insert_finished();
  try {
    (void)s.wait_any(std::chrono::milliseconds(300));
    ADD_FAILURE() << "no timeout";
  } catch (const comm_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 of 2 ranks finished"), std::string::npos) << what;
    EXPECT_NE(what.find("1 payloads announced, waiting for their owners to be ready"),
              std::string::npos)
        << what;
  }
}

// A peer that leaves the group (a local rank that failed) while this rank waits on it without a
// transfer posted, for its finish or its ready for announced payloads, fails the shuffle at
// once, naming it: not after the timeout (30 s here).
TEST(Shuffler, APeerThatLeavesFailsTheShuffleAtOnce) {
  for (const bool announce : {false, true}) {
    test::TempDir dir;
    BufferResource br(test::host_config(dir.path()));
    auto comms = LocalCommunicator::create(2);
    comms[0]->set_timeout(std::chrono::seconds(30));
    Shuffler s(*comms[0], 1, 2, br);
    if (announce) {
      const Table table = random_int32_table(100, 1, 0, 10, 1, br);
      std::unordered_map<PartID, PackedData> chunks;
      chunks.emplace(1, pack(table.view(), br));  // partition 1: rank 1's
      s.insert(std::move(chunks));
    }
    s.insert_finished();
    if (announce) {  // rank 1's finish (one chunk of partition 0 sent), never a ready message
      comms[1]->send_message(
          detail::encode_finish({.counts = {{0, 1}}, .direct = {}, .direct_groups = 1}), 0,
          Tag{1, 2});
    }
    dynamic_cast<LocalCommunicator&>(*comms[1]).leave();
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)s.wait_any(std::chrono::seconds(20));
      ADD_FAILURE() << "no error";
    } catch (const comm_error& e) {
      const std::string want = announce ? "rank 1 left the communicator before it was ready for 1"
                                        : "rank 1 left the communicator before it finished";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
}

// A rank waiting for a slow peer does not busy-wait: rank 1 joins after 1.5 s, and the second
// of waiting in between costs the process a small part of one core (it cost two cores, both
// ranks' progress threads polling, before the progress thread backed off: 1.99 s per second).
TEST(Shuffler, WaitingForASlowPeerCostsLittleCpu) {
  test::TempDir dir;
  auto comms = LocalCommunicator::create(2);
  BufferResource br0(test::host_config(dir.path()));
  BufferResource br1(test::host_config(dir.path()));
  const Table table = random_int32_table(1000, 2, 0, 100, 3, br1);
  double waiting_cpu = 0;
  std::thread peer([&] {
    Shuffler s(*comms[1], 1, 2, br1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 is waiting by now
    const double before = test::process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    waiting_cpu = test::process_cpu_seconds() - before;
    std::unordered_map<PartID, PackedData> chunks;
    chunks.emplace(0, pack(table.view(), br1));
    s.insert(std::move(chunks));
    s.insert_finished();
    EXPECT_TRUE(s.extract(s.wait_any(std::chrono::seconds(10))).empty());
  });
  {
    Shuffler s(*comms[0], 1, 2, br0);
    s.insert_finished();
    const PartID pid = s.wait_any(std::chrono::seconds(10));
    EXPECT_EQ(pid, 0U);
    EXPECT_EQ(checksum(unpack(std::move(s.extract(pid).at(0))).view()), checksum(table.view()));
  }
  peer.join();
  std::printf("CPU seconds in 1 s of waiting for a slow peer: %.3f\n", waiting_cpu);
  EXPECT_LT(waiting_cpu, 0.15) << "the waiting rank polled all the time";
}

// A shuffle abandoned after wait_any timed out is destroyed at once: the destructor waits for
// the sends to finish only after a normal end (every local partition handed out). Before, it
// waited a second full timeout (10 s at a 5 s timeout; 10 minutes by default).
TEST(Shuffler, AnAbandonedShuffleCostsOneTimeoutNotTwo) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(2);
  comms[0]->set_timeout(std::chrono::seconds(20));
  const auto start = std::chrono::steady_clock::now();
  {
    Shuffler s(*comms[0], 1, 2, br);  // rank 1 never joins
    s.insert_finished();
    EXPECT_THROW((void)s.wait_any(std::chrono::milliseconds(300)), comm_error);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5)) << "the destructor waited for the timeout again";
}

TEST(Shuffler, ARankThatFailsMidShuffleFailsThePeersAndLeavesNoSpillFiles) {
  // Rank 1 inserts part of its data (spilled to disk: spill injection) and then fails; the
  // other ranks get a comm_error within their timeout, and every spill file is gone after.
  test::TempDir dir;
  auto comms = LocalCommunicator::create(3);
  const auto timeout = std::chrono::seconds(2);
  std::vector<std::string> errors(3);
  std::vector<double> seconds(3, 0);
  std::vector<std::thread> threads;
  for (Rank r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        auto cfg = test::with_spill_injection(test::host_config(dir.path()), 1.0);
        BufferResource br(cfg);
        Communicator& comm = *comms[static_cast<std::size_t>(r)];
        comm.set_timeout(timeout);
        RandomTableOptions o;
        o.rows = 20000;
        o.types = {TypeId::INT64, TypeId::STRING};
        o.seed = static_cast<std::uint64_t>(r);
        const Table t = random_table(o, br);
        auto packed = partition_and_pack(t.view(), std::vector<std::size_t>{0}, 6, br);
        Shuffler s(comm, 1, 6, br);
        for (PartID pid = 0; pid < 6; ++pid) {
          if (r == 1 && pid == 3) throw std::runtime_error("rank 1 fails mid-shuffle");
          std::unordered_map<PartID, PackedData> one;
          one.emplace(pid, std::move(packed[pid]));
          s.insert(std::move(one));
        }
        s.insert_finished();
        while (!s.finished()) (void)s.extract(s.wait_any(timeout));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
      comms[static_cast<std::size_t>(r)].reset();  // a failed rank leaves the group
      seconds[static_cast<std::size_t>(r)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[1], "rank 1 fails mid-shuffle");
  for (const Rank r : {0, 2}) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_FALSE(errors[i].empty()) << "rank " << r << " finished a shuffle that lost a rank";
    EXPECT_LT(seconds[i], 3.0 * 2) << "rank " << r << ": " << errors[i];
  }
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    ++left;
  }
  EXPECT_EQ(left, 0U) << "spill files or directories left in " << dir.path();
}

// A truncated chunk header, a truncated ready message and a ready message for payloads
// never announced each fail the shuffle with the reason.
TEST(Shuffler, CorruptMessagesAreRejected) {
  const std::vector<std::uint8_t> ready = detail::encode_ready(2);
  const std::vector<std::tuple<std::vector<std::uint8_t>, std::uint8_t, std::string>> cases{
      {{1, 2, 3}, 0, "corrupt shuffle chunk"},
      {{1, 2, 3}, 3, "corrupt shuffle ready"},
      {ready, 3, "were announced to it and waiting"}};
  for (const auto& [message, stage, what] : cases) {
    test::TempDir dir;
    BufferResource br(test::host_config(dir.path()));
    auto comms = LocalCommunicator::create(2);
    Shuffler s(*comms[0], 1, 2, br);
    comms[1]->send_message(message, 0, Tag{1, stage});
    try {
      (void)s.wait_any(std::chrono::seconds(10));
      ADD_FAILURE() << what << ": accepted";
    } catch (const corrupt_data_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

// Direct chunks are announced in the finish message: metadata that does not parse, and a
// direct chunk that its chunk counts do not account for, fail the shuffle with the reason.
TEST(Shuffler, CorruptDirectChunksAreRejected) {
  auto finish = [](std::uint64_t counted, std::vector<std::uint8_t> metadata,
                   std::uint32_t groups = 1) {
    std::vector<std::uint8_t> m;
    auto put = [&](auto v) {
      for (std::size_t i = 0; i < sizeof v; ++i)
        m.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    };
    put(std::uint32_t{0x4E465053});  // "SPFN"
    put(std::uint32_t{1});           // one count: partition 0
    put(std::uint32_t{0});
    put(counted);
    put(std::uint32_t{1});  // one direct chunk of partition 0
    put(std::uint32_t{0});
    put(std::uint64_t{64});
    put(static_cast<std::uint32_t>(metadata.size()));
    m.insert(m.end(), metadata.begin(), metadata.end());
    put(groups);  // the direct columns' groups
    return m;
  };
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 16;
  o.types = {TypeId::INT32};
  const Table t = random_table(o, br);
  PackedData good = pack(t.view(), br);
  const std::pair<std::vector<std::uint8_t>, const char*> cases[] = {
      {finish(1, {1, 2, 3}), "corrupt packed metadata"},
      {finish(0, good.metadata), "do not account for"},
      {finish(1, good.metadata, 0), "0 direct column groups"},
      {finish(1, good.metadata, 17), "17 direct column groups"},
  };
  for (const auto& [message, expected] : cases) {
    auto comms = LocalCommunicator::create(2);
    Shuffler s(*comms[0], 1, 2, br);
    s.insert_finished();
    comms[1]->send_message(message, 0, Tag{1, 2});
    try {
      (void)s.wait_any(std::chrono::seconds(10));
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const corrupt_data_error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}
