// run_ranks: every rank runs with its communicator and BufferResource; a rank that throws is
// reported and makes the run fail, and its peers fail instead of waiting for it; the kinds
// parse; ranks that share a GPU split its pool.
#include <spillway/comm/launch.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include "common.hpp"

#include <mutex>
#include <set>

using namespace spillway;

TEST(Launch, EveryLocalRankRunsWithItsCommunicatorAndResource) {
  test::TempDir dir;
  std::mutex m;
  std::set<Rank> seen;
  const int rc = run_ranks(RankKind::local, 3, test::host_config(dir.path()),
                           [&](Communicator& comm, BufferResource& br) {
                             EXPECT_EQ(comm.nranks(), 3);
                             EXPECT_TRUE(br.is_live(MemoryType::HOST));
                             comm.barrier();
                             std::lock_guard lock(m);
                             seen.insert(comm.rank());
                             return comm.rank() == 2 ? 7 : 0;  // the largest code comes back
                           });
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(seen, (std::set<Rank>{0, 1, 2}));
  EXPECT_EQ(
      run_ranks(RankKind::single, 5, test::host_config(dir.path()),
                [](Communicator& comm, BufferResource&) { return comm.nranks() == 1 ? 0 : 1; }),
      0);
}

TEST(Launch, ARankThatThrowsFailsTheRunAndItsPeersDoNotWait) {
  test::TempDir dir;
  std::mutex m;
  std::vector<std::string> errors;
  LaunchOptions launch;
  launch.on_error = [&](Rank r, const std::string& what) {
    std::lock_guard lock(m);
    errors.push_back(std::to_string(r) + ": " + what);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_ranks(
      RankKind::local, 2, test::host_config(dir.path()),
      [&](Communicator& comm, BufferResource& br) -> int {
        comm.set_timeout(std::chrono::seconds(30));
        if (comm.rank() == 1) throw io_error("rank 1's disk is full");
        // Rank 0 waits for a buffer rank 1 never sends: it must fail when rank 1 leaves.
        auto f = comm.recv(1, Tag{1, 0}, br.allocate(MemoryType::HOST, 64));
        comm.wait(*f);
        return 0;
      },
      launch);
  EXPECT_EQ(rc, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  ASSERT_EQ(errors.size(), 2u);
  std::sort(errors.begin(), errors.end());
  EXPECT_NE(errors[0].find("0: "), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("left"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 1's disk is full"), std::string::npos) << errors[1];
}

TEST(Launch, BadArgumentsAreClearErrors) {
  EXPECT_EQ(parse_rank_kind("local"), RankKind::local);
  EXPECT_EQ(parse_rank_kind("mpi"), RankKind::mpi);
  EXPECT_EQ(parse_rank_kind("single"), RankKind::single);
  EXPECT_THROW((void)parse_rank_kind("threads"), logic_error);
  test::TempDir dir;
  auto ok = [](Communicator&, BufferResource&) { return 0; };
  EXPECT_THROW(run_ranks(RankKind::local, 0, test::host_config(dir.path()), ok), logic_error);
  EXPECT_THROW(run_ranks(RankKind::local, 2, test::host_config(dir.path()), {}), logic_error);
}

TEST(Launch, RanksThatShareAGpuSplitItsPool) {
  BufferResourceConfig c;
  EXPECT_EQ(shared_gpu_config(c, 1), c);
  EXPECT_EQ(shared_gpu_config(c, 3).device_pool_size, Limit::fraction(0.3));
  c.limits[index(MemoryType::DEVICE)] = Limit::bytes(GiB);  // a limit set: left as it is
  EXPECT_EQ(shared_gpu_config(c, 3), c);
  BufferResourceConfig sized;
  sized.device_pool_size = Limit::bytes(2 * GiB);
  EXPECT_EQ(shared_gpu_config(sized, 4), sized);
  EXPECT_GE(ranks_per_gpu(RankKind::local, 4), 1);
  EXPECT_EQ(ranks_per_gpu(RankKind::single, 1), 1);
}
