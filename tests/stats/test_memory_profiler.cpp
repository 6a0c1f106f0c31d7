#include <spillway/core/units.hpp>
#include <spillway/stats/memory_profiler.hpp>

#include <gtest/gtest.h>

#include <thread>

using namespace spillway;

TEST(MemoryProfiler, RecordsPeakAccumAndMax) {
  MemoryProfiler p;
  p.on_allocate(0, 100);  // before the scope: counts for g-peak only
  {
    SPILLWAY_MEMORY_PROFILE(p, "work");
    p.on_allocate(0, 50);
    p.on_allocate(0, 30);
    p.on_deallocate(0, 50);
    p.on_allocate(0, 10);
  }
  const auto recs = p.records(0);
  ASSERT_EQ(recs.size(), 1u);
  const auto& [key, r] = *recs.begin();
  EXPECT_NE(key.find("test_memory_profiler.cpp:"), std::string::npos) << key;
  EXPECT_NE(key.find("(work)"), std::string::npos) << key;
  EXPECT_EQ(r.ncalls, 1u);
  EXPECT_EQ(r.peak, 80);          // 50 + 30 above the level at entry
  EXPECT_EQ(r.global_peak, 180);  // 100 + 50 + 30
  EXPECT_EQ(r.accum, 90);
  EXPECT_EQ(r.max_alloc, 50);
  EXPECT_TRUE(p.records(1).begin()->second.peak == 0);
}

TEST(MemoryProfiler, CountsAllocationsFromOtherThreads) {
  MemoryProfiler p;
  {
    SPILLWAY_MEMORY_PROFILE(p, "scope");
    std::thread other([&] {
      p.on_allocate(2, MiB);
      p.on_allocate(2, MiB);
    });
    other.join();
  }
  const auto r = p.records(2).begin()->second;
  EXPECT_EQ(r.peak, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(r.accum, static_cast<std::int64_t>(2 * MiB));
}

TEST(MemoryProfiler, ReportSortedByPeak) {
  MemoryProfiler p;
  for (int i = 0; i < 2; ++i) {
    SPILLWAY_MEMORY_PROFILE(p, "small");
    p.on_allocate(0, 10);
    p.on_deallocate(0, 10);
  }
  {
    SPILLWAY_MEMORY_PROFILE(p, "big");
    p.on_allocate(0, GiB);
    p.on_deallocate(0, GiB);
  }
  const std::string r = p.report(0, "DEVICE");
  EXPECT_NE(r.find("ncalls"), std::string::npos);
  EXPECT_NE(r.find("g-peak"), std::string::npos);
  EXPECT_LT(r.find("(big)"), r.find("(small)")) << r;
  EXPECT_EQ(
      p.records(0).at(p.records(0).begin()->first).ncalls + p.records(0).rbegin()->second.ncalls,
      3u);
  EXPECT_NE(p.to_json(0).find("\"ncalls\":2"), std::string::npos);
}
