// The adaptors around a BufferResource's tiers: statistics (on by default), spill injection,
// and a user's own, on real host memory and real spill files.
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/spill_injection_adaptor.hpp>
#include <spillway/memory/spillable_store.hpp>
#include <spillway/memory/statistics_adaptor.hpp>

#include "../common.hpp"

#include <gtest/gtest.h>

#include <atomic>

using namespace spillway;

namespace {

/// A user's own policy: counts what goes through it.
class Counting final : public ResourceAdaptor {
 public:
  Counting(std::unique_ptr<MemoryResource> up, std::atomic<int>& allocs, std::atomic<int>& frees)
      : ResourceAdaptor(std::move(up)), allocs_{allocs}, frees_{frees} {}
  [[nodiscard]] std::string describe() const override {
    return "counting " + ResourceAdaptor::describe();
  }

 private:
  void* do_allocate(std::size_t bytes, Stream stream) override {
    ++allocs_;
    return ResourceAdaptor::do_allocate(bytes, stream);
  }
  void do_deallocate(void* p, std::size_t bytes, Stream stream) noexcept override {
    ++frees_;
    ResourceAdaptor::do_deallocate(p, bytes, stream);
  }
  std::atomic<int>& allocs_;
  std::atomic<int>& frees_;
};

}  // namespace

TEST(ResourceAdaptors, StatisticsAreOnByDefault) {
  test::TempDir dir;
  const auto cfg = test::host_config(dir.path());
  ASSERT_EQ(cfg.adaptors.size(), 1u);
  EXPECT_EQ(cfg.adaptors[0].name, "statistics");
  BufferResource br(cfg);
  {
    SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "three buffers");
    auto a = test::make_host(br, 100 * KiB, 1);
    auto b = test::make_host(br, 200 * KiB, 2);
    auto c = test::make_host(br, 3 * MiB, 3);
  }
  const auto alloc = br.statistics().get("alloc-host");
  ASSERT_TRUE(alloc.has_value());
  EXPECT_EQ(alloc->count, 3u);
  EXPECT_EQ(alloc->bytes, double(100 * KiB + 200 * KiB + 3 * MiB));
  const auto records = br.statistics().memory_profiler().records(index(MemoryType::HOST));
  ASSERT_EQ(records.size(), 1u);
  const MemoryRecord& r = records.begin()->second;
  EXPECT_EQ(r.ncalls, 1u);  // (the scope's)
  // What the tier was charged for the three (at least their sizes), all held at the end.
  EXPECT_GE(r.accum, std::int64_t(100 * KiB + 200 * KiB + 3 * MiB));
  EXPECT_EQ(r.peak, r.accum);
  EXPECT_GE(r.max_alloc, std::int64_t(3 * MiB));
}

TEST(ResourceAdaptors, WithoutTheStatisticsAdaptorNothingIsTimed) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.adaptors.clear();
  BufferResource br(cfg);
  auto a = test::make_host(br, 64 * KiB, 1);
  EXPECT_FALSE(br.statistics().get("alloc-host").has_value());
  EXPECT_EQ(test::verify(br, *a, 1), 64 * KiB);
}

TEST(ResourceAdaptors, AUsersOwnAdaptorWrapsEveryLiveTier) {
  test::TempDir dir;
  std::atomic<int> allocs{0};
  std::atomic<int> frees{0};
  auto cfg = test::small_config(dir.path());
  cfg.adaptors.push_back({"counting", [&](BufferResource&, std::unique_ptr<MemoryResource> up) {
                            return std::make_unique<Counting>(std::move(up), allocs, frees);
                          }});
  {
    BufferResource br(cfg);
    EXPECT_NE(br.describe().find("counting"), std::string::npos) << br.describe();
    std::vector<std::unique_ptr<Buffer>> bufs;
    int expected = 0;
    for (MemoryType t : {MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST}) {
      if (!br.is_live(t)) continue;
      bufs.push_back(br.allocate(t, 4096));
      ++expected;
    }
    EXPECT_EQ(allocs.load(), expected);
    bufs.clear();
    EXPECT_EQ(frees.load(), expected);
    // The statistics adaptor inside it still sees every allocation.
    EXPECT_EQ(br.statistics().get("alloc-host")->count, 1u);
  }
}

TEST(ResourceAdaptors, SpillInjectionSpillsTheTierAtAnAllocation) {
  test::TempDir dir;
  auto cfg = test::with_spill_injection(test::host_config(dir.path()), 1.0);
  EXPECT_EQ(cfg.adaptors.back().name, "spill_injection(1)");
  BufferResource br(cfg);
  EXPECT_NE(br.describe().find("spill injection 1.00"), std::string::npos) << br.describe();
  SpillableStore store(br);
  const auto key = store.insert(test::make_host(br, 300 * KiB + 5, 7));
  EXPECT_EQ(store.bytes_in(MemoryType::HOST), 300 * KiB + 5);
  // No limit is near: only the injection moves the stored buffer to DISK.
  auto other = br.allocate(MemoryType::HOST, 1000);
  EXPECT_EQ(store.bytes_in(MemoryType::DISK), 300 * KiB + 5);
  EXPECT_GE(br.statistics().get("spill-injected")->count, 1u);
  auto back = store.extract(key, MemoryType::HOST);
  EXPECT_EQ(test::verify(br, *back, 7), 300 * KiB + 5);
}

TEST(ResourceAdaptors, BadAdaptorsAreClearErrors) {
  EXPECT_THROW((void)spill_injection_adaptor(1.5), logic_error);
  EXPECT_THROW((void)spill_injection_adaptor(-0.1), logic_error);
  EXPECT_THROW((void)ResourceAdaptor(nullptr), logic_error);
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.adaptors.push_back({"broken", [](BufferResource&, std::unique_ptr<MemoryResource>) {
                            return std::unique_ptr<MemoryResource>{};
                          }});
  try {
    BufferResource br(cfg);
    FAIL() << "an adaptor that returns no resource was accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'broken' gave no resource"), std::string::npos)
        << e.what();
  }
  cfg.adaptors.back().wrap = nullptr;
  EXPECT_THROW(BufferResource{cfg}, logic_error);
}

TEST(ResourceAdaptors, TheSettingAddsSpillInjection) {
  OptionValues o;
  o.spill_injection = 0.25;
  const BufferResourceConfig cfg(o);
  ASSERT_EQ(cfg.adaptors.size(), 2u);
  EXPECT_EQ(cfg.adaptors[1].name, "spill_injection(0.25)");
  EXPECT_NE(cfg, BufferResourceConfig{});
}
