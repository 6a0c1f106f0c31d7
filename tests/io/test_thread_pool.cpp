#include <spillway/core/error.hpp>
#include <spillway/core/topology.hpp>
#include <spillway/io/thread_pool.hpp>

#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <stdexcept>
#include <vector>

using spillway::io::ThreadPool;

TEST(ThreadPool, SubmitReturnsResults) {
  ThreadPool pool(3);
  std::vector<std::future<int>> f;
  for (int i = 0; i < 50; ++i) f.push_back(pool.submit([i] { return i * i; }));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(f[i].get(), i * i);
}

TEST(ThreadPool, ParallelForRunsEveryIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ParallelForRethrowsAfterAllFinished) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(20,
                                 [&](std::size_t i) {
                                   ran.fetch_add(1);
                                   if (i == 7) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 20);
}

TEST(ThreadPool, NestedParallelForMakesProgress) {
  ThreadPool pool(1);  // the only worker is busy with the outer loop: the caller must help
  std::atomic<int> total{0};
  pool.parallel_for(
      4, [&](std::size_t) { pool.parallel_for(4, [&](std::size_t) { total.fetch_add(1); }); });
  EXPECT_EQ(total.load(), 16);
}

TEST(ThreadPool, ZeroThreadsIsAnError) {
  EXPECT_THROW(ThreadPool(0), spillway::logic_error);
}

TEST(ThreadPool, WorkersRunOnTheGivenCpus) {
  const auto allowed = spillway::topology::allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const std::vector<int> one{allowed.front()};
  ThreadPool pool(2, one);
  EXPECT_EQ(pool.cpus(), one);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(pool.submit([] { return sched_getcpu(); }).get(), one.front());
  }
  ThreadPool anywhere(1);
  EXPECT_TRUE(anywhere.cpus().empty());
  EXPECT_EQ(anywhere.submit([] { return spillway::topology::allowed_cpus(); }).get(), allowed);
}
