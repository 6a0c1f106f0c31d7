// Conformance suite typed over every memory tier: allocation, copies to and from every other
// tier with contents verified, limits, reservations, concurrent use.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_step.hpp>
#include <spillway/memory/spill_files.hpp>

#include "common.hpp"

#include <atomic>
#include <thread>

using namespace spillway;
using test::TempDir;

template <MemoryType T>
struct Tier {
  static constexpr MemoryType value = T;
};

template <typename TierT>
class TierConformance : public ::testing::Test {
 protected:
  static constexpr MemoryType tier = TierT::value;
  TempDir dir_;
};

using AllTiers = ::testing::Types<Tier<MemoryType::DEVICE>, Tier<MemoryType::PINNED_HOST>,
                                  Tier<MemoryType::HOST>, Tier<MemoryType::DISK>>;
struct TierName {
  template <typename T>
  static std::string GetName(int) {
    return std::string(to_string(T::value));
  }
};
TYPED_TEST_SUITE(TierConformance, AllTiers, TierName);

// What a tier is charged for a buffer of `bytes`: HOST in size classes (slabs, then whole pages in
// 16 sizes per doubling below 1 MiB) and pages,
// DISK in 4 KiB blocks, the GPU's pools as asked.
std::size_t charged(MemoryType t, std::size_t bytes) {
  if (t == MemoryType::HOST) return HostMemoryResource().footprint(bytes);
  if (t == MemoryType::DISK) return SpillFiles::footprint(bytes);
  return bytes;
}

TYPED_TEST(TierConformance, ReserveAndAllocate) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType t = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  auto res = br.reserve(t, MiB);
  EXPECT_EQ(res.size(), MiB);
  EXPECT_EQ(res.mem_type(), t);
  EXPECT_EQ(br.used(t), MiB);
  if (t == MemoryType::DISK) {
    EXPECT_THROW((void)br.allocate(res, 10), logic_error);  // DISK buffers come from copies
    return;
  }
  auto a = br.allocate(res, 300 * KiB);
  auto b = br.allocate(res, 700 * KiB);
  auto z = br.allocate(res, 0);
  const std::size_t taken = charged(t, 300 * KiB) + charged(t, 700 * KiB);
  EXPECT_EQ(res.size(), 1 * MiB - taken);
  EXPECT_EQ(a->mem_type(), t);
  EXPECT_EQ(a->size(), 300 * KiB);
  EXPECT_NE(a->data(), nullptr);
  EXPECT_EQ(z->size(), 0u);
  EXPECT_THROW((void)br.allocate(res, MiB), logic_error);  // more than is left
  EXPECT_EQ(br.used(t), MiB);
  res.release();
  EXPECT_EQ(br.used(t), taken);
  a.reset();
  b.reset();
  EXPECT_EQ(br.used(t), 0u);
  const auto st = br.statistics().get("alloc-" + std::string(stat_name(t)));
  ASSERT_TRUE(st.has_value());
  EXPECT_DOUBLE_EQ(st->bytes, 1000.0 * KiB);
}

TYPED_TEST(TierConformance, CopyToAndFromEveryTierKeepsContents) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType from = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, from);
  // Sizes that cross piece (64 KiB) and staging (128 KiB halves) boundaries, and odd tails.
  for (std::size_t n : {std::size_t{1}, std::size_t{4095}, 64 * KiB, 300 * KiB + 7, 3 * MiB + 1}) {
    for (MemoryType to : all_memory_types) {
      if (!br.is_live(to)) continue;
      const std::uint64_t seed = n * 31 + index(from) * 7 + index(to);
      auto src = test::make_in(br, from, n, seed);
      ASSERT_EQ(src->mem_type(), from);
      auto res = br.reserve(to, n);
      auto dst = br.copy(*src, res, br.stream());
      ASSERT_EQ(dst->mem_type(), to);
      ASSERT_EQ(dst->size(), n);
      dst->wait();
      EXPECT_EQ(test::verify(br, *dst, seed), n)
          << to_string(from) << " -> " << to_string(to) << " n=" << n;
      EXPECT_EQ(test::verify(br, *src, seed), n) << "source changed by the copy";
    }
  }
  for (MemoryType t : all_memory_types) EXPECT_EQ(br.used(t), 0u) << to_string(t);
}

TYPED_TEST(TierConformance, MoveReleasesTheSource) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType from = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, from);
  for (MemoryType to : all_memory_types) {
    if (!br.is_live(to) || to == from) continue;
    auto buf = test::make_in(br, from, 500 * KiB, 9);
    const std::size_t before = br.used(from);
    buf = br.move(std::move(buf), to);
    EXPECT_EQ(buf->mem_type(), to);
    EXPECT_EQ(br.used(from), before - charged(from, 500 * KiB));
    EXPECT_EQ(br.used(to), charged(to, 500 * KiB));
    EXPECT_EQ(test::verify(br, *buf, 9), 500 * KiB);
  }
}

TYPED_TEST(TierConformance, LimitIsHard) {
  auto cfg = test::small_config(this->dir_.path());
  constexpr MemoryType t = TestFixture::tier;
  cfg.limits[index(t)] = Limit::bytes(4 * MiB);
  BufferResource br(cfg);
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  EXPECT_EQ(br.limit(t), 4 * MiB);
  auto r1 = br.reserve(t, 3 * MiB);
  EXPECT_FALSE(br.try_reserve(t, 2 * MiB).has_value());
  try {
    (void)br.reserve(t, 2 * MiB);  // nothing is spillable: out of memory
    FAIL() << "reserved past the limit";
  } catch (const out_of_memory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string(to_string(t)) + ": 3.00 MiB of 4.00 MiB in use"),
              std::string::npos)
        << msg;
  }
  try {
    const MemoryStep step("a test's step");
    (void)br.reserve(t, 5 * MiB);
    FAIL() << "reserved more than the limit";
  } catch (const out_of_memory& e) {  // the step, and why the tier could not take it
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a test's step: cannot reserve 5.00 MiB of " + std::string(to_string(t))),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("larger than its limit of 4.00 MiB"), std::string::npos) << msg;
  }
  auto r2 = br.reserve(t, MiB);  // exactly to the limit
  EXPECT_EQ(br.used(t), 4 * MiB);
  EXPECT_EQ(br.available(t), 0u);
  EXPECT_LE(br.peak(t), br.limit(t));
}

TYPED_TEST(TierConformance, ReservationsReturnOnDestructionAndMove) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType t = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  const std::size_t c123 = charged(t, 123);
  {
    auto r = br.reserve(t, 123);
    EXPECT_EQ(br.used(t), c123);
    MemoryReservation moved = std::move(r);
    EXPECT_EQ(r.size(), 0u);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(moved.size(), c123);
    EXPECT_EQ(br.used(t), c123);
    MemoryReservation other = br.reserve(t, 7);
    other = std::move(moved);  // other's bytes go back
    EXPECT_EQ(br.used(t), c123);
  }
  EXPECT_EQ(br.used(t), 0u);
  EXPECT_EQ(br.peak(t), c123 + charged(t, 7));
}

TYPED_TEST(TierConformance, ConcurrentUseStaysUnderTheLimit) {
  auto cfg = test::small_config(this->dir_.path());
  constexpr MemoryType t = TestFixture::tier;
  cfg.limits[index(t)] = Limit::bytes(6 * MiB);
  BufferResource br(cfg);
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  std::atomic<int> failures{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      OwningStream stream;
      for (int i = 0; i < 20; ++i) {
        const std::size_t n = (1 + (th + i) % 3) * 256 * KiB + 17;
        const std::uint64_t seed = static_cast<std::uint64_t>(th * 1000 + i);
        auto res = br.try_reserve(t, n);
        // Another thread may hold the memory: allowed, never over the limit.
        if (!res) continue;
        auto src_res = br.try_reserve(MemoryType::HOST, n);
        if (!src_res) continue;
        auto src = br.allocate(*src_res, n);
        test::fill_pattern(src->data(), n, seed);
        auto dst = br.copy(*src, *res, stream);
        dst->wait();
        if (test::verify(br, *dst, seed) != n) failures.fetch_add(1);
        done.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(done.load(), 0);
  EXPECT_LE(br.peak(t), br.limit(t));
  EXPECT_EQ(br.used(t), 0u);
}

// A view borrows bytes of a buffer: same tier and pointer, nothing reserved, nothing freed;
// it keeps what it was given alive.
TYPED_TEST(TierConformance, ViewsBorrowWithoutCharging) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType t = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  if (t == MemoryType::DISK) {
    auto host = br.allocate(MemoryType::HOST, KiB);
    auto disk = br.move(std::move(host), MemoryType::DISK);
    EXPECT_THROW((void)BufferResource::view(*disk, 0, 1), logic_error);
    return;
  }
  std::shared_ptr<const Buffer> parent(br.allocate(t, MiB));
  const std::size_t used = br.used(t);
  auto v = BufferResource::view(*parent, 4 * KiB, 8 * KiB, parent);
  EXPECT_TRUE(v->is_view());
  EXPECT_FALSE(parent->is_view());
  EXPECT_EQ(v->mem_type(), t);
  EXPECT_EQ(v->size(), 8 * KiB);
  EXPECT_EQ(v->data(), parent->data() + 4 * KiB);
  EXPECT_EQ(br.used(t), used);
  EXPECT_THROW((void)BufferResource::view(*parent, MiB - 1, 2), logic_error);
  EXPECT_THROW((void)BufferResource::view(*parent, MiB + 1, 0), logic_error);
  parent.reset();  // the view holds it
  EXPECT_EQ(br.used(t), used);
  v.reset();
  EXPECT_EQ(br.used(t), used - MiB);
}

// Views of one block laid out one after another at aligned offsets join into one view of the
// span, which holds the block; anything else does not join and is left as it was.
TYPED_TEST(TierConformance, AdjacentViewsJoin) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType t = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, t);
  if (t == MemoryType::DISK) return;  // no views
  std::shared_ptr<const Buffer> block(br.allocate(t, MiB));
  std::shared_ptr<const Buffer> other(br.allocate(t, MiB));
  const std::size_t used = br.used(t);
  const auto run = [&] {  // 100, 0 and 300 bytes at 0, 256 and 256
    std::vector<std::unique_ptr<Buffer>> parts;
    parts.push_back(BufferResource::view(*block, 0, 100, block));
    parts.push_back(BufferResource::view(*block, 256, 0, block));
    parts.push_back(BufferResource::view(*block, 256, 300, block));
    return parts;
  };
  auto parts = run();
  EXPECT_TRUE(parts[1]->follows(*parts[0], 256));
  EXPECT_TRUE(parts[2]->follows(*parts[1], 256));
  EXPECT_FALSE(parts[2]->follows(*parts[0], 128));  // 128 would put it at 128
  EXPECT_FALSE(parts[0]->follows(*parts[2], 256));
  auto joined = BufferResource::join(parts, 256);
  ASSERT_NE(joined, nullptr);
  EXPECT_TRUE(parts.empty());
  EXPECT_TRUE(joined->is_view());
  EXPECT_EQ(joined->data(), block->data());
  EXPECT_EQ(joined->size(), 556U);
  EXPECT_EQ(br.used(t), used);
  // Not joined: a gap, another block, a buffer that is not a view, none.
  const auto refused = [&](std::vector<std::unique_ptr<Buffer>> p) {
    const std::size_t n = p.size();
    EXPECT_EQ(BufferResource::join(p, 256), nullptr);
    EXPECT_EQ(p.size(), n);
  };
  {
    std::vector<std::unique_ptr<Buffer>> p;
    p.push_back(BufferResource::view(*block, 0, 100, block));
    p.push_back(BufferResource::view(*block, 512, 10, block));
    refused(std::move(p));
  }
  {
    std::vector<std::unique_ptr<Buffer>> p;
    p.push_back(BufferResource::view(*block, 0, 100, block));
    p.push_back(BufferResource::view(*other, 0, 10, other));
    refused(std::move(p));
  }
  {
    std::vector<std::unique_ptr<Buffer>> p;
    p.push_back(BufferResource::view(*block, 0, 256));  // holds nothing
    p.push_back(BufferResource::view(*block, 256, 10));
    refused(std::move(p));
  }
  {
    std::vector<std::unique_ptr<Buffer>> p;
    p.push_back(br.allocate(t, 256));
    p.push_back(br.allocate(t, 256));
    refused(std::move(p));
  }
  refused({});
  block.reset();  // the joined view holds it
  other.reset();
  EXPECT_EQ(br.used(t), used - MiB);
  joined.reset();
  EXPECT_EQ(br.used(t), used - 2 * MiB);
}

TEST(BufferResource, AbsentTiersAreAClearError) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  BufferResource br(cfg);
  EXPECT_FALSE(br.is_live(MemoryType::DEVICE));
  EXPECT_FALSE(br.is_live(MemoryType::PINNED_HOST));
  EXPECT_EQ(br.top_tier(), MemoryType::HOST);
  try {
    (void)br.reserve(MemoryType::DEVICE, 1);
    FAIL();
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("DEVICE tier is not available"), std::string::npos);
  }
  auto buf = test::make_host(br, 10, 1);
  EXPECT_THROW((void)br.move(std::move(buf), MemoryType::PINNED_HOST), logic_error);
}

// SPILLWAY_PINNED_RESERVE maps pinned memory up front: allocations within it do not grow
// the pool; one beyond it does, and the statistics name the growth.
TEST(BufferResource, PinnedReserveIsMappedUpFrontAndGrowthIsCounted) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(256 * MiB);
  cfg.pinned_reserve = Limit::bytes(64 * MiB);
  BufferResource br(cfg);
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::PINNED_HOST);
  if (br.describe().find("cudaMemPool") == std::string::npos) GTEST_SKIP() << "no pinned pool";
  auto within = br.allocate(MemoryType::PINNED_HOST, 48 * MiB, br.stream());
  EXPECT_FALSE(br.statistics().get("alloc-pinned_host-grow").has_value());
  auto beyond = br.allocate(MemoryType::PINNED_HOST, 128 * MiB, br.stream());
  const auto grew = br.statistics().get("alloc-pinned_host-grow");
  ASSERT_TRUE(grew.has_value());
  EXPECT_GE(grew->bytes, 128.0 * MiB - 16.0 * MiB);  // what the 64 MiB left could not hold
  test::fill_pattern(beyond->data(), beyond->size(), 9);
  EXPECT_EQ(test::check_pattern(beyond->data(), beyond->size(), 9), beyond->size());
}

TEST(BufferResource, AnUnlimitedPinnedReserveNeedsAPinnedLimit) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::unlimited();
  cfg.pinned_reserve = Limit::unlimited();
  EXPECT_THROW(BufferResource{cfg}, logic_error);
}

TEST(BufferResource, FractionLimitsResolveAgainstCapacity) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::fraction(0.5);
  cfg.limits[index(MemoryType::DISK)] = Limit::fraction(0.25);
  BufferResource br(cfg);
  EXPECT_GT(br.capacity(MemoryType::HOST), 0u);
  EXPECT_EQ(br.limit(MemoryType::HOST), br.capacity(MemoryType::HOST) / 2);
  EXPECT_NEAR(static_cast<double>(br.limit(MemoryType::DISK)),
              static_cast<double>(br.capacity(MemoryType::DISK)) / 4, 1.0);
}

TEST(BufferResource, ReserveFirstFitLandsLowerWithoutEvicting) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(MiB);
  BufferResource br(cfg);
  auto hog = br.reserve(MemoryType::HOST, MiB);  // HOST full
  const std::array<MemoryType, 2> order{MemoryType::HOST, MemoryType::DISK};
  auto r = br.reserve_first_fit(order, 512 * KiB);
  EXPECT_EQ(r.mem_type(), MemoryType::DISK);
  EXPECT_FALSE(br.statistics().get("spill-host-freed").has_value());
  hog.release();
  auto r2 = br.reserve_first_fit(order, 512 * KiB);
  EXPECT_EQ(r2.mem_type(), MemoryType::HOST);
}

TEST(BufferResource, ReserveFirstFitKeepsTheHeadroomFree) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(MiB);
  cfg.headroom[index(MemoryType::HOST)] = 256 * KiB;
  BufferResource br(cfg);
  const std::array<MemoryType, 2> order{MemoryType::HOST, MemoryType::DISK};
  auto a = br.reserve_first_fit(order, 512 * KiB);  // leaves 512 KiB free: HOST
  EXPECT_EQ(a.mem_type(), MemoryType::HOST);
  auto b = br.reserve_first_fit(order, 384 * KiB);  // would leave 128 KiB < headroom: lower
  EXPECT_EQ(b.mem_type(), MemoryType::DISK);
  auto c = br.reserve(MemoryType::HOST, 512 * KiB);  // a plain reserve may use the headroom
  EXPECT_EQ(br.used(MemoryType::HOST), MiB);
  // The last tier of the order is not held back by its headroom.
  c.release();
  const std::array<MemoryType, 1> host_only{MemoryType::HOST};
  auto d = br.reserve_first_fit(host_only, 384 * KiB);
  EXPECT_EQ(d.mem_type(), MemoryType::HOST);
}

TEST(BufferResource, MemoryProfileSeesAllocationsFromEveryThread) {
  TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.use_gpu = false;
  BufferResource br(cfg);
  {
    SPILLWAY_MEMORY_PROFILE(br.statistics().memory_profiler(), "two_threads");
    auto mine = br.allocate(MemoryType::HOST, MiB);
    std::thread other([&] { auto theirs = br.allocate(MemoryType::HOST, 2 * MiB); });
    other.join();
  }
  const auto recs = br.statistics().memory_profiler().records(index(MemoryType::HOST));
  ASSERT_EQ(recs.size(), 1u);
  const MemoryRecord& r = recs.begin()->second;
  EXPECT_EQ(r.ncalls, 1u);
  EXPECT_EQ(r.peak, static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(r.accum, static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(r.max_alloc, static_cast<std::int64_t>(2 * MiB));
  const std::string report = br.statistics().report();
  EXPECT_NE(report.find("alloc-host: 3.00 MiB"), std::string::npos) << report;
  EXPECT_NE(report.find("Memory profiling (host)"), std::string::npos) << report;
  EXPECT_NE(report.find("(two_threads)"), std::string::npos) << report;
}

// Memory that is only busy is not a failure: a reservation that finds its tier full of memory
// that cannot spill waits for some of it to be freed (a transfer finishing, another thread's
// buffer going). Before, it failed at once, so whether a shuffle fitted a limit depended on the
// run (10 of 70 runs failed at a limit the tool said sufficed).
TEST(BufferResource, AReservationWaitsForBusyMemoryInsteadOfFailing) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(4 * MiB);
  cfg.memory_wait = std::chrono::milliseconds(5000);
  BufferResource br(cfg);
  auto held = br.allocate(MemoryType::HOST, 3 * MiB);  // not spillable: in no store
  std::thread freer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    held.reset();
  });
  auto res = br.reserve(MemoryType::HOST, 2 * MiB);  // waits for the release
  EXPECT_EQ(res.size(), 2 * MiB);
  freer.join();
  const auto waited = br.statistics().get("reserve-waited-for-memory");
  ASSERT_TRUE(waited.has_value());
  EXPECT_GE(waited->count, 1U);
}

// Memory that stays in use fails after memory_wait, naming the tier; 0 fails at once.
TEST(BufferResource, MemoryThatStaysInUseFailsAfterTheWait) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(4 * MiB);
  for (const auto wait : {std::chrono::milliseconds(0), std::chrono::milliseconds(300)}) {
    cfg.memory_wait = wait;
    BufferResource br(cfg);
    auto held = br.allocate(MemoryType::HOST, 3 * MiB);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW((void)br.reserve(MemoryType::HOST, 2 * MiB), out_of_memory);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, wait);
    EXPECT_LT(took, wait + std::chrono::seconds(3));
  }
}

// out_of_memory is a std::bad_alloc (as RMM's), so code that catches allocation failures sees
// a limit that cannot be met, with its message.
TEST(BufferResource, OutOfMemoryIsABadAlloc) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(MiB);
  BufferResource br(cfg);
  try {
    (void)br.reserve(MemoryType::HOST, 2 * MiB);
    ADD_FAILURE() << "no error";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reserve 2.00 MiB of HOST"), std::string::npos)
        << e.what();
  }
}

// Writes of host memory the resource does not own (an Arrow buffer) into every tier that takes
// one, at an offset, whole or gathered from parts; complete on return. DISK and ranges outside
// the buffer are refused.
TYPED_TEST(TierConformance, WritesOfHostMemoryKeepContents) {
  BufferResource br(test::small_config(this->dir_.path()));
  constexpr MemoryType to = TestFixture::tier;
  SPILLWAY_SKIP_UNLESS_LIVE(br, to);
  std::vector<std::byte> host(9 * MiB + 5);
  if (to == MemoryType::DISK) {
    auto disk = br.move(br.allocate(MemoryType::HOST, KiB), MemoryType::DISK);
    EXPECT_THROW(br.write(*disk, 0, host.data(), KiB), logic_error);
    return;
  }
  for (std::size_t n : {std::size_t{0}, std::size_t{4095}, 4 * MiB, host.size()}) {
    const std::uint64_t seed = n + 11;
    test::fill_pattern(host.data(), n, seed);
    auto dst = br.allocate(to, n + 3, br.stream());
    br.write(*dst, 3, host.data(), n, br.stream());
    // The same bytes gathered from three parts of odd sizes into another buffer.
    const std::size_t a = n / 3 + 1 > n ? n : n / 3 + 1;
    const std::size_t b = (n - a) / 2;
    const std::array<BufferResource::HostBytes, 3> parts{
        BufferResource::HostBytes(host.data(), a), BufferResource::HostBytes(host.data() + a, b),
        BufferResource::HostBytes(host.data() + a + b, n - a - b)};
    auto gathered = br.allocate(to, n, br.stream());
    br.write(*gathered, 0, parts, br.stream());
    std::fill(host.begin(), host.end(), std::byte{0});  // the copies owe nothing to the source
    auto view = BufferResource::view(*dst, 3, n);
    EXPECT_EQ(test::verify(br, *view, seed), n) << to_string(to) << " n=" << n;
    EXPECT_EQ(test::verify(br, *gathered, seed), n) << to_string(to) << " gathered, n=" << n;
  }
  auto small = br.allocate(to, KiB);
  EXPECT_THROW(br.write(*small, 0, nullptr, KiB), logic_error);
  EXPECT_THROW(br.write(*small, 1, host.data(), KiB), logic_error);
}

// Large copies between pageable HOST memory and the GPU go through pinned staging taken from
// the PINNED_HOST tier (seen in its peak) and keep every byte, across pieces and odd tails;
// with the pinned tier full they take the plain path and keep every byte too.
TEST(BufferResource, LargeHostDeviceCopiesGoThroughPinnedStaging) {
  test::TempDir dir;
  for (const bool pinned_full : {false, true}) {
    auto cfg = test::small_config(dir.path());
    cfg.limits[index(MemoryType::PINNED_HOST)] = Limit::bytes(64 * MiB);
    BufferResource br(cfg);
    SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
    SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::PINNED_HOST);
    std::optional<MemoryReservation> hog;
    if (pinned_full) hog = br.reserve(MemoryType::PINNED_HOST, br.limit(MemoryType::PINNED_HOST));
    for (std::size_t n : {4 * MiB, 9 * MiB + 3, 33 * MiB + 4095}) {
      const std::uint64_t seed = n * 3 + (pinned_full ? 1 : 0);
      auto src = test::make_in(br, MemoryType::HOST, n, seed);
      auto up_res = br.reserve(MemoryType::DEVICE, n);
      auto dev = br.copy(*src, up_res, br.stream());
      dev->wait();
      ASSERT_EQ(test::verify(br, *dev, seed), n) << "HOST -> DEVICE, n=" << n;
      auto down_res = br.reserve(MemoryType::HOST, n);
      auto back = br.copy(*dev, down_res, br.stream());
      back->wait();
      EXPECT_EQ(test::verify(br, *back, seed), n) << "DEVICE -> HOST, n=" << n;
    }
    if (pinned_full) {
      EXPECT_EQ(br.peak(MemoryType::PINNED_HOST), br.limit(MemoryType::PINNED_HOST));
    } else {
      EXPECT_GT(br.peak(MemoryType::PINNED_HOST), 0u) << "no staging was taken";
    }
    EXPECT_EQ(br.used(MemoryType::DEVICE), 0u);
  }
}
