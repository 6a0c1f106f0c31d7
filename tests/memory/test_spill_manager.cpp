#include <spillway/core/error.hpp>
#include <spillway/memory/spill_manager.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace spillway;

TEST(SpillManager, HigherPriorityFirstAndStopsWhenEnough) {
  SpillManager sm([](MemoryType) { return std::size_t{0}; });
  std::vector<int> calls;
  auto low = sm.add_spill_function(
      [&](MemoryType, std::size_t) {
        calls.push_back(0);
        return std::size_t{100};
      },
      0);
  auto high = sm.add_spill_function(
      [&](MemoryType, std::size_t) {
        calls.push_back(10);
        return std::size_t{60};
      },
      10);
  EXPECT_EQ(sm.spill(MemoryType::HOST, 50), 60u);  // the high one alone was enough
  EXPECT_EQ(calls, std::vector<int>({10}));
  calls.clear();
  EXPECT_EQ(sm.spill(MemoryType::HOST, 100), 160u);
  EXPECT_EQ(calls, std::vector<int>({10, 0}));
  sm.remove_spill_function(high);
  sm.remove_spill_function(low);
  EXPECT_EQ(sm.spill(MemoryType::HOST, 1), 0u);
}

TEST(SpillManager, FunctionsGetTheRemainingDeficit) {
  SpillManager sm([](MemoryType) { return std::size_t{0}; });
  std::vector<std::size_t> asked;
  for (int i = 0; i < 3; ++i) {
    sm.add_spill_function(
        [&](MemoryType t, std::size_t b) {
          EXPECT_EQ(t, MemoryType::DEVICE);
          asked.push_back(b);
          return std::size_t{30};
        },
        0);
  }
  EXPECT_EQ(sm.spill(MemoryType::DEVICE, 70), 90u);
  EXPECT_EQ(asked, std::vector<std::size_t>({70, 40, 10}));
}

TEST(SpillManager, HandleUnregisters) {
  SpillManager sm([](MemoryType) { return std::size_t{0}; });
  {
    SpillFunctionHandle h(
        sm, [](MemoryType, std::size_t) { return std::size_t{5}; }, 0);
    EXPECT_EQ(sm.spill(MemoryType::HOST, 5), 5u);
  }
  EXPECT_EQ(sm.spill(MemoryType::HOST, 5), 0u);
  EXPECT_THROW(sm.add_spill_function({}, 0), logic_error);
}

TEST(SpillManager, ExceptionsPropagate) {
  SpillManager sm([](MemoryType) { return std::size_t{0}; });
  sm.add_spill_function([](MemoryType, std::size_t) -> std::size_t { throw io_error("disk full"); },
                        0);
  EXPECT_THROW(sm.spill(MemoryType::HOST, 1), io_error);
  // The function is idle again afterwards, so removing it does not hang.
}

TEST(SpillManager, BackgroundThreadKeepsHeadroom) {
  std::atomic<std::size_t> free_host{100};
  SpillManager sm([&](MemoryType t) {
    return t == MemoryType::HOST ? free_host.load() : std::size_t{1} << 40;
  });
  sm.add_spill_function(
      [&](MemoryType t, std::size_t b) {
        EXPECT_EQ(t, MemoryType::HOST);
        free_host += b;
        return b;
      },
      0);
  std::array<std::size_t, 4> headroom{};
  headroom[index(MemoryType::HOST)] = 1000;
  sm.start_background(std::chrono::milliseconds(5), headroom);
  for (int i = 0; i < 400 && free_host.load() < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  sm.stop_background();
  EXPECT_GE(free_host.load(), 1000u);
}

TEST(SpillManager, ConcurrentSpillAndRemove) {
  SpillManager sm([](MemoryType) { return std::size_t{0}; });
  std::atomic<std::size_t> total{0};
  auto id = sm.add_spill_function(
      [&](MemoryType, std::size_t b) {
        total += b;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        return b;
      },
      0);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      for (int j = 0; j < 50; ++j) sm.spill(MemoryType::HOST, 1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  sm.remove_spill_function(id);  // waits for running calls, then no more calls
  const std::size_t after_remove = total.load();
  for (auto& t : ts) t.join();
  EXPECT_EQ(total.load(), after_remove);
}
