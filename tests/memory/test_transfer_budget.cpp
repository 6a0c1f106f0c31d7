// TransferBudget: shares within the limit, one share of any size while none is held, shares
// returned by their destructors (moved ones once), threads taking and returning concurrently
// never over the limit; a BufferResource's budget is a quarter of its smallest tier limit.
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/memory/transfer_budget.hpp>

#include "common.hpp"

#include <thread>

using namespace spillway;

TEST(TransferBudget, SharesStayWithinTheLimitOnceOneIsHeld) {
  TransferBudget b(100);
  auto big = b.try_take(250);  // none held: any one share
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(b.taken(), 250u);
  EXPECT_FALSE(b.try_take(1).has_value());
  big.reset();
  EXPECT_EQ(b.taken(), 0u);
  auto x = b.try_take(60);
  ASSERT_TRUE(x.has_value());
  EXPECT_FALSE(b.try_take(41).has_value());
  auto y = b.try_take(40);
  ASSERT_TRUE(y.has_value());
  EXPECT_EQ(b.taken(), 100u);
  TransferBudget::Share moved = std::move(*x);
  x.reset();  // the moved-from share returns nothing
  EXPECT_EQ(b.taken(), 100u);
  moved.release();
  EXPECT_EQ(b.taken(), 40u);
  moved.release();  // twice: once
  EXPECT_EQ(b.taken(), 40u);
}

TEST(TransferBudget, ConcurrentSharesNeverExceedTheLimit) {
  constexpr std::size_t limit = 1000;
  TransferBudget b(limit);
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        const std::size_t bytes = 1 + static_cast<std::size_t>((i * 7 + t * 13) % 300);
        if (auto s = b.try_take(bytes)) {
          if (b.taken() > limit) over = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over.load());
  EXPECT_EQ(b.taken(), 0u);
}

TEST(TransferBudget, AResourcesBudgetIsAQuarterOfItsSmallestLimit) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(6 * MiB);
  BufferResource br(cfg);
  EXPECT_EQ(br.transfer_budget().limit(), 6 * MiB / 4);
  cfg.limits[index(MemoryType::HOST)] = Limit::unlimited();
  BufferResource unlimited(cfg);
  EXPECT_EQ(unlimited.transfer_budget().limit(), unlimited_bytes);
}
