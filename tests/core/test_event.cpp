// Events: plain ones come from a per-device pool and are reused; timed ones can be timed.
// Skips without a GPU (a CPU build's events record nothing and are always complete).
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/stream.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

using namespace spillway;

namespace {
constexpr std::size_t bytes = 64 << 20;
/// Some GPU work on `stream`: one half of `dev` copied onto the other.
void copy_halves(void* dev, Stream stream) {
  cuda::memcpy_async(dev, static_cast<std::byte*>(dev) + bytes / 2, bytes / 2, stream);
}
}  // namespace

TEST(Event, WithoutAGpuItIsAlwaysComplete) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  Event e;
  e.record(Stream{});
  EXPECT_TRUE(e.is_complete());
  EXPECT_EQ(e.handle(), nullptr);
  e.synchronize();
}

TEST(Event, AReleasedEventIsReusedAndTellsItsNewRecord) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  OwningStream stream;
  void* dev = cuda::malloc_device(bytes);
  void* first = nullptr;
  {
    Event a;
    EXPECT_TRUE(a.is_complete());  // nothing recorded
    a.record(stream);
    first = a.handle();
    ASSERT_NE(first, nullptr);
    a.synchronize();
  }
  Event b;  // on this thread nobody else takes it from the pool meanwhile
  copy_halves(dev, stream);
  b.record(stream);
  EXPECT_EQ(b.handle(), first);
  b.synchronize();
  EXPECT_TRUE(b.is_complete());
  Event moved = std::move(b);
  EXPECT_EQ(b.handle(), nullptr);
  EXPECT_EQ(moved.handle(), first);
  cuda::free_device(dev);
}

TEST(Event, PlainEventsAreNotTimedAndTimedOnesAre) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  OwningStream stream;
  void* dev = cuda::malloc_device(bytes);
  Event start = Event::timed();
  Event end = Event::timed();
  Event plain;
  start.record(stream);
  plain.record(stream);
  copy_halves(dev, stream);
  end.record(stream);
  end.synchronize();
  EXPECT_GE(cuda::event_elapsed_ms(start.handle(), end.handle()), 0.0f);
  EXPECT_THROW((void)cuda::event_elapsed_ms(plain.handle(), end.handle()), cuda_error);
  cuda::free_device(dev);
}

TEST(Event, ManyThreadsRecordAndWaitOnPooledEvents) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  std::vector<std::thread> threads;
  std::atomic<int> complete{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      OwningStream a;
      OwningStream b;
      for (int i = 0; i < 500; ++i) {
        Event e;
        e.record(a);
        e.wait_on(b);
        Event f;
        f.record(b);
        f.synchronize();
        if (e.is_complete()) ++complete;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(complete.load(), 2000);
}
