#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include "common.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

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
  void* small = mr.allocate(4 * KiB, {});  // a page: cached too
  mr.deallocate(small, 4 * KiB, {});
  EXPECT_EQ(mr.cached(), 4 * KiB);
  EXPECT_EQ(mr.allocate(4 * KiB, {}), small);
  mr.deallocate(small, 4 * KiB, {});
  mr.deallocate(b, 9 * MiB, {});
  mr.trim_to(0);
  EXPECT_EQ(mr.cached(), 0u);
}

// Below 1 MiB, blocks are rounded to 16 sizes per doubling of pages, so that chunks of
// nearly the same size reuse each other's blocks (each munmap is a TLB shootdown).
TEST(HostMemoryResource, NearbySizesShareASizeClass) {
  HostMemoryResource mr(64 * MiB);
  EXPECT_EQ(mr.footprint(4097), 8 * KiB);
  EXPECT_EQ(mr.footprint(32 * 4096), 128 * KiB);
  EXPECT_EQ(mr.footprint(33 * 4096), 136 * KiB);    // 33 pages: 34
  EXPECT_EQ(mr.footprint(97 * 4096), 400 * KiB);    // 97 pages: 100
  EXPECT_EQ(mr.footprint(MiB - 1), MiB);            // the last class
  EXPECT_EQ(mr.footprint(MiB + 1), MiB + 4 * KiB);  // pages again from 1 MiB
  for (std::size_t bytes = 2049; bytes < MiB; bytes = bytes * 9 / 8) {
    EXPECT_LE(mr.footprint(bytes), round_up(bytes, 4 * KiB) * 17 / 16) << bytes;
  }
  void* a = mr.allocate(390 * KiB, {});  // 98 pages: 100
  mr.deallocate(a, 390 * KiB, {});
  EXPECT_EQ(mr.cached(), 400 * KiB);
  void* b = mr.allocate(399 * KiB, {});
  EXPECT_EQ(b, a);
  mr.deallocate(b, 399 * KiB, {});
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

// Sizes near SIZE_MAX wrapped when rounded to pages: allocate(HOST, SIZE_MAX) returned a
// buffer whose size() was SIZE_MAX over a few bytes. Every size above the machine's memory is
// now an error, and the host resource itself refuses sizes whose rounding would wrap.
TEST(HostMemoryResource, SizesThatWouldWrapAreRefused) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const std::size_t max = std::numeric_limits<std::size_t>::max();
  for (const std::size_t bytes : {max, max - 1, max - 4096, max - (2u << 20), max / 2 + 1}) {
    EXPECT_THROW((void)br.allocate(MemoryType::HOST, bytes), out_of_memory) << bytes;
    EXPECT_EQ(br.used(MemoryType::HOST), 0u) << "the reservation went back";
  }
  // Larger than the machine, but no wrap: refused before the system is asked.
  try {
    (void)br.allocate(MemoryType::HOST, br.capacity(MemoryType::HOST) + 1);
    FAIL() << "allocated more than the machine's memory";
  } catch (const out_of_memory& e) {
    EXPECT_NE(std::string(e.what()).find("more than the machine has"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(br.used(MemoryType::HOST), 0u);
  EXPECT_EQ(br.peak(MemoryType::HOST), 0u) << "nothing was ever charged";
}

// Each tier charges what it takes from the system. A 64 MiB HOST limit filled with buffers of
// 128 B, 4096 B and 4097 B (each written, so that its pages are resident): the resident memory
// grows by at most the limit plus the bookkeeping of the buffers themselves (the Buffer
// objects and the vector of them, which are not HOST-tier memory) plus 4 MiB (a partly used
// slab per size class, the allocator's own). Before: 4.1 GiB (128 B: a page each), 2.0x the
// limit (4096 B: a page of heap header each) and 3.0x (4097 B).
TEST(HostMemoryResource, ResidentMemoryStaysWithinTheLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer shadow memory and quarantine make resident memory meaningless";
#endif
  constexpr std::size_t limit = 64 * MiB;
  for (const std::size_t size : {std::size_t{128}, std::size_t{4096}, std::size_t{4097}}) {
    test::TempDir dir;
    auto cfg = test::host_config(dir.path());
    cfg.limits[index(MemoryType::HOST)] = Limit::bytes(limit);
    BufferResource br(cfg);
    const std::size_t count = limit / HostMemoryResource().footprint(size);
    std::vector<std::unique_ptr<Buffer>> bufs;
    bufs.reserve(count);
    const std::size_t bookkeeping = count * (round_up(sizeof(Buffer) + 16, 16) + sizeof(void*));
    const std::size_t before = test::resident_bytes();
    for (std::size_t i = 0; i < count; ++i) {
      bufs.push_back(br.allocate(MemoryType::HOST, size));
      std::memset(bufs.back()->data(), static_cast<int>(i), size);
    }
    EXPECT_EQ(br.used(MemoryType::HOST), limit) << size << " B buffers";
    EXPECT_THROW((void)br.allocate(MemoryType::HOST, size), out_of_memory) << "beyond the limit";
    const std::size_t grew = test::resident_bytes() - before;
    std::printf(
        "%zu buffers of %zu B: resident memory grew %.1f MiB for a %.0f MiB limit "
        "(+ %.1f MiB of Buffer objects)\n",
        count, size, static_cast<double>(grew) / MiB, static_cast<double>(limit) / MiB,
        static_cast<double>(bookkeeping) / MiB);
    EXPECT_LE(grew, limit + bookkeeping + 4 * MiB) << size << " B buffers";
  }
}
