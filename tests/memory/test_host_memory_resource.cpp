#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include "common.hpp"

using namespace spillway;

TEST(HostMemoryResource, ReusesFreedBlocksOfTheSameSize) {
  HostMemoryResource mr(64 * MiB);
  void* a = mr.allocate(8 * MiB + 5, {});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % (2 * MiB), 0u);  // huge-page aligned
  mr.deallocate(a, 8 * MiB + 5, {});
  EXPECT_EQ(mr.cached(), 10 * MiB);    // rounded to 2 MiB
  void* b = mr.allocate(9 * MiB, {});  // same rounded size: the cached block
  EXPECT_EQ(b, a);
  EXPECT_EQ(mr.cached(), 0u);
  void* small = mr.allocate(4 * KiB, {});  // below the threshold: never cached
  mr.deallocate(small, 4 * KiB, {});
  EXPECT_EQ(mr.cached(), 0u);
  mr.deallocate(b, 9 * MiB, {});
  mr.trim_to(0);
  EXPECT_EQ(mr.cached(), 0u);
}

TEST(HostMemoryResource, CacheIsBounded) {
  HostMemoryResource mr(3 * MiB);
  void* a = mr.allocate(2 * MiB, {});
  void* b = mr.allocate(2 * MiB, {});
  mr.deallocate(a, 2 * MiB, {});
  mr.deallocate(b, 2 * MiB, {});  // would exceed 3 MiB: freed instead
  EXPECT_EQ(mr.cached(), 2 * MiB);
}

TEST(HostMemoryResource, SizesAroundTheHugeThresholdKeepTheirAlignment) {
  HostMemoryResource mr(64 * MiB);
  // 4 MiB - 1 and 4 MiB round to the same size, so they must share one alignment class.
  void* a = mr.allocate(4 * MiB - 1, {});
  mr.deallocate(a, 4 * MiB - 1, {});
  void* b = mr.allocate(4 * MiB, {});
  EXPECT_EQ(a, b);
  mr.deallocate(b, 4 * MiB, {});
}

TEST(HostMemoryResource, CachedPlusUsedStaysWithinTheHostLimit) {
  test::TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(16 * MiB);
  cfg.host_cache = Limit::bytes(GiB);  // capped at the limit
  BufferResource br(cfg);
  { auto a = br.allocate(MemoryType::HOST, 10 * MiB); }
  EXPECT_EQ(br.host_cached(), 10 * MiB);
  auto b = br.allocate(MemoryType::HOST, 8 * MiB);  // cannot reuse a 10 MiB block
  EXPECT_LE(br.used(MemoryType::HOST) + br.host_cached(), 16 * MiB);
  auto c = br.allocate(MemoryType::HOST, 8 * MiB);
  EXPECT_EQ(br.host_cached(), 0u);
  EXPECT_EQ(br.used(MemoryType::HOST), 16 * MiB);
}
