// The soak (scripts/soak.sh runs it long): shuffle after shuffle of random rank counts, shapes,
// feeds, skew, HOST limits and spill injection on local ranks. After each: every row arrived
// once (checksums), every tier's used bytes are back to zero, no spill file is open and no spill
// directory is left; over the whole run the resident memory does not grow.
#include <spillway/comm/launch.hpp>

#include "common.hpp"
#include "shuffle/soak_common.hpp"

#include <cstdio>
#include <mutex>

using namespace spillway;

TEST(Soak, RandomShufflesLeaveNothingBehind) {
  const int shuffles = test::soak_shuffles(100);
  std::size_t rss_after_warmup = 0;
  double spilled = 0;  // bytes moved HOST -> DISK over the soak
  for (int i = 0; i < shuffles; ++i) {
    const test::SoakCase c = test::soak_case(1, i);
    test::TempDir dir;
    TableChecksum in_sum;
    TableChecksum out_sum;
    std::mutex m;
    auto cfg = test::host_config(dir.path());
    if (c.host_limit_mib > 0)
      cfg.limits[index(MemoryType::HOST)] = Limit::bytes(c.host_limit_mib * MiB);
    cfg = test::with_spill_injection(cfg, c.spill_injection);
    if (c.background_spilling) {
      cfg.spill_period = std::chrono::milliseconds(1);
      cfg.headroom[index(MemoryType::HOST)] = c.host_limit_mib * MiB;  // spill all it can
    }
    LaunchOptions launch;
    launch.on_error = [&](Rank r, const std::string& what) {
      ADD_FAILURE() << "shuffle " << i << ", rank " << r << ": " << what;
    };
    run_ranks(
        RankKind::local, c.nranks, cfg,
        [&](Communicator& comm, BufferResource& br) {
          const auto [in, out] = test::shuffle_rank(comm, br, c.skew, 1, c.feed, c.shape);
          for (MemoryType t : all_memory_types) {
            EXPECT_EQ(br.used(t), 0U)
                << "shuffle " << i << ", rank " << comm.rank() << ": " << to_string(t);
          }
          std::lock_guard lock(m);
          for (const char* name : {"copy-host-to-disk", "spill-host-to-disk"}) {
            if (const auto s = br.statistics().get(name)) spilled += s->bytes;
          }
          in_sum += in;
          out_sum += out;
          return 0;
        },
        launch);
    ASSERT_EQ(in_sum, out_sum) << "shuffle " << i << ": rows in " << in_sum.rows << ", out "
                               << out_sum.rows;
    EXPECT_EQ(test::open_files_under(dir.path()), 0) << "shuffle " << i;
    EXPECT_TRUE(dir.entries().empty()) << "shuffle " << i << " left " << dir.entries().front();
    if (i == shuffles / 10) rss_after_warmup = test::resident_bytes();
    if (HasFailure()) return;
  }
  const std::size_t rss = test::resident_bytes();
  std::printf(
      "%d shuffles, %.1f MiB spilled to disk: resident memory %.1f MiB after the first "
      "tenth, %.1f MiB at the end\n",
      shuffles, spilled / MiB, static_cast<double>(rss_after_warmup) / MiB,
      static_cast<double>(rss) / MiB);
  EXPECT_GT(spilled, 0) << "the soak never spilled: its limits are too loose";
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // (their quarantines grow)
  EXPECT_LE(rss, rss_after_warmup + 64 * MiB) << "resident memory grew over the soak";
#endif
}
