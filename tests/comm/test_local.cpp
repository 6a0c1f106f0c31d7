// The conformance suite on the local communicator (ranks as threads) for 1 to 4 ranks, plus
// what only the local communicator can show: a rank that leaves, the single communicator and
// the progress thread.
#include <spillway/comm/collectives.hpp>
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/progress_thread.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/core/cuda.hpp>

#include "comm/conformance.hpp"
#include "common.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

using namespace spillway;

namespace {

/// Runs `body` on `nranks` threads, each with its rank's communicator and BufferResource (on
/// the rank's GPU where there are GPUs).
void run_ranks(int nranks, const std::function<void(Communicator&, BufferResource&)>& body) {
  test::TempDir dir;
  LaunchOptions launch;
  launch.on_error = [](Rank r, const std::string& what) {
    ADD_FAILURE() << "rank " << r << ": " << what;
  };
  const int rc = spillway::run_ranks(
      RankKind::local, nranks, test::small_config(dir.path()),
      [&](Communicator& comm, BufferResource& br) {
        comm.set_timeout(std::chrono::seconds(60));
        body(comm, br);
        comm.barrier();  // nobody leaves while others still talk
        return 0;
      },
      launch);
  EXPECT_EQ(rc, 0);
}

using Param = std::tuple<std::size_t, int>;  // case, ranks

class LocalConformance : public ::testing::TestWithParam<Param> {};

TEST_P(LocalConformance, Passes) {
  const auto [index, nranks] = GetParam();
  run_ranks(nranks, test::conformance_cases()[index].body);
}

INSTANTIATE_TEST_SUITE_P(Cases, LocalConformance,
                         ::testing::Combine(::testing::Range(std::size_t{0},
                                                             test::conformance_cases().size()),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return test::conformance_cases()[std::get<0>(info.param)].name + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace

TEST(LocalCommunicator, ARankThatLeavesFailsItsPeersPromptly) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(2);
  auto r = comms[0]->recv(1, Tag{1, 1}, br.allocate(MemoryType::HOST, 16));
  comms[1].reset();  // rank 1 is gone without sending
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comms[0]->wait(*r);
    ADD_FAILURE() << "no error";
  } catch (const comm_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 left"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_THROW(comms[0]->barrier(), comm_error);
}

// A collective waiting on a rank that left fails at once, naming it, not after the timeout
// (a rank whose shuffle failed kept the others' benchmark collectives waiting 300 s); what the
// rank sent before it left still counts. Many rounds: the leaving races the waiting.
TEST(LocalCommunicator, ACollectiveOnARankThatLeftFailsAtOnceAndKeepsWhatItSent) {
  for (int round = 0; round < 50; ++round) {
    auto comms = LocalCommunicator::create(3);
    for (auto& c : comms) c->set_timeout(std::chrono::seconds(60));
    const std::vector<std::int64_t> v{round};
    // All three take part in op 7, ranks 1 and 2 leaving right after it; op 8 then waits on
    // ranks that left.
    std::thread two([&] {
      EXPECT_EQ(allreduce(*comms[2], 7, std::span(v), ReduceOp::sum)[0], 3 * round);
      comms[2].reset();
    });
    std::thread one([&] {
      EXPECT_EQ(allreduce(*comms[1], 7, std::span(v), ReduceOp::sum)[0], 3 * round);
      comms[1].reset();
    });
    EXPECT_EQ(allreduce(*comms[0], 7, std::span(v), ReduceOp::sum)[0], 3 * round);
    one.join();
    two.join();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)allreduce(*comms[0], 8, std::span(v), ReduceOp::sum);
      ADD_FAILURE() << "an allreduce without ranks 1 and 2 completed";
    } catch (const comm_error& e) {
      EXPECT_NE(std::string(e.what()).find("nothing from rank(s) 1, 2; rank 1 left"),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
}

TEST(LocalCommunicator, ADroppedFutureLeavesNothingBehind) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comms = LocalCommunicator::create(2);
  { auto r = comms[1]->recv(0, Tag{2, 0}, br.allocate(MemoryType::HOST, 32)); }  // dropped
  auto r = comms[1]->recv(0, Tag{2, 0}, br.allocate(MemoryType::HOST, 32));
  auto s = comms[0]->send(test::make_host(br, 32, 5), 1, Tag{2, 0});
  comms[1]->wait(*r);
  EXPECT_EQ(test::verify(br, *comms[1]->release(std::move(r)), 5), 32U);
}

// Transfers between device buffers are queued and issued together, one batched copy per
// GPU: pieces of 1 byte to 70 KiB at odd offsets (a shuffle's columns landing in their
// partitions' buffers), one of 24 MiB, each lands whole and in its place; a receive dropped
// while its copy is queued still leaves its send complete.
TEST(LocalCommunicator, DevicePiecesOfOddSizesAndOffsetsLandInPlace) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  test::TempDir dir;
  BufferResource br(test::small_config(dir.path()));
  auto comms = LocalCommunicator::create(2);
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 700; ++i) sizes.push_back((i * 7919) % 70001 + 1);
  sizes.push_back(24 * MiB);
  std::size_t total = 0;
  for (const std::size_t n : sizes) total += n;
  auto src = test::make_in(br, MemoryType::DEVICE, total + sizes.size(), 11);
  auto dst = br.allocate(MemoryType::DEVICE, total + 3 * sizes.size(), br.stream());
  cuda::memset_device(dst->data(), 0, dst->size());
  std::vector<std::unique_ptr<Future>> recvs;
  std::vector<std::unique_ptr<Future>> sends;
  std::vector<std::size_t> from;
  std::vector<std::size_t> to;
  for (std::size_t i = 0, at = 0; i < sizes.size(); at += sizes[i], ++i) {
    from.push_back(at + i);  // each piece one byte further off its neighbour
    to.push_back(at + 3 * i + 1);
    recvs.push_back(comms[1]->recv(0, Tag{3, 0}, BufferResource::view(*dst, to[i], sizes[i])));
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sends.push_back(comms[0]->send(BufferResource::view(*src, from[i], sizes[i]), 1, Tag{3, 0}));
  }
  for (auto& f : recvs) comms[1]->wait(*f);
  for (auto& f : sends) comms[0]->wait(*f);
  recvs.clear();
  const auto want = test::make_host(br, src->size(), 11);
  const auto got = br.move(std::move(dst), MemoryType::HOST, br.stream());
  br.stream().synchronize();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(std::memcmp(got->data() + to[i], want->data() + from[i], sizes[i]), 0)
        << "piece " << i << " of " << sizes[i] << " bytes";
    ASSERT_EQ(got->data()[to[i] - 1], std::byte{0}) << "a byte before piece " << i << " written";
  }
  // A receive dropped while its copy waits in the queue: the copy is issued and waited for.
  auto lost = br.allocate(MemoryType::DEVICE, 4096, br.stream());
  auto r = comms[1]->recv(0, Tag{4, 0}, std::move(lost));
  auto s = comms[0]->send(BufferResource::view(*src, 5, 4096), 1, Tag{4, 0});
  r.reset();
  comms[0]->wait(*s);
}

TEST(SingleCommunicator, SendsToItself) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comm = make_single_communicator();
  EXPECT_EQ(comm->nranks(), 1);
  EXPECT_EQ(comm->rank(), 0);
  auto s = comm->send(test::make_host(br, 1000, 9), 0, Tag{1, 0});
  auto r = comm->recv(0, Tag{1, 0}, br.allocate(MemoryType::HOST, 1000));
  comm->wait(*r);
  comm->wait(*s);
  EXPECT_EQ(test::verify(br, *comm->release(std::move(r)), 9), 1000U);
  comm->barrier();
}

TEST(ProgressThread, RunsFunctionsUntilDoneAndReportsErrors) {
  Logger log(0, 1);
  ProgressThread pt(log);
  std::atomic<int> calls{0};
  auto id = pt.add_function([&] {
    return ++calls < 100 ? ProgressThread::Progress::busy : ProgressThread::Progress::done;
  });
  pt.wait_done(id);
  EXPECT_EQ(calls.load(), 100);
  auto bad =
      pt.add_function([]() -> ProgressThread::Progress { throw comm_error("peer vanished"); });
  EXPECT_THROW(pt.wait_done(bad), comm_error);
  std::atomic<bool> running{false};
  auto forever = pt.add_function([&] {
    running = true;
    return ProgressThread::Progress::busy;
  });
  while (!running) std::this_thread::yield();
  pt.remove_function(forever);  // returns: the function is no longer called
}

// A function with nothing to do (a rank waiting on a slow peer) is polled for a moment, then
// ever less often: after the first 2 ms it is called at most once per `max_sleep` (1 ms), where
// polling all the time (the thread before; here a backoff that never ends) calls it as often as
// a core allows. The test counts calls, not CPU seconds: what one wake-up costs depends on the
// build (ASan, TSan) and on the load, but a backoff can only make the calls fewer.
TEST(ProgressThread, BacksOffWhileEveryFunctionIsIdle) {
  Logger log(0, 1);
  using std::chrono::milliseconds;
  auto calls_while_waiting = [&](ProgressThread::Backoff backoff) {
    ProgressThread pt(log, backoff);
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> calls{0};
    auto id = pt.add_function([&] {
      calls.fetch_add(1, std::memory_order_relaxed);
      return stop ? ProgressThread::Progress::done : ProgressThread::Progress::idle;
    });
    std::this_thread::sleep_for(milliseconds(100));  // past the spin and the first sleeps
    const std::int64_t before = calls.load();
    const double cpu_before = test::process_cpu_seconds();
    std::this_thread::sleep_for(milliseconds(400));
    const std::int64_t during = calls.load() - before;
    const double cpu = test::process_cpu_seconds() - cpu_before;
    stop = true;
    pt.wake();
    pt.wait_done(id);
    return std::pair{during, cpu};
  };
  const auto [spinning, spinning_cpu] = calls_while_waiting({.spin = std::chrono::hours(1)});
  const auto [backing_off, backing_off_cpu] = calls_while_waiting({});
  std::printf(
      "in 0.4 s of waiting: %lld calls polling (%.3f CPU s), %lld backing off (%.3f CPU s)\n",
      static_cast<long long>(spinning), spinning_cpu, static_cast<long long>(backing_off),
      backing_off_cpu);
  // One call per 1 ms sleep at most: 400, and twice that leaves room for spurious wake-ups.
  EXPECT_LE(backing_off, 800) << "the idle thread kept polling";
  EXPECT_GE(backing_off, 1) << "the idle function was not called at all";
  // A polling thread that got no core (CI's two cores busy with other tests) cannot show the
  // difference; one that did calls the function tens of thousands of times.
  if (spinning < 4000) GTEST_SKIP() << "the machine is too busy to compare: " << spinning;
  EXPECT_GT(spinning, 5 * backing_off);
}

// wake() ends a backoff at once: a function idle under a 10 s sleep runs again within seconds.
TEST(ProgressThread, WakeEndsABackoff) {
  Logger log(0, 1);
  using std::chrono::seconds;
  ProgressThread pt(
      log,
      {.spin = std::chrono::microseconds(0), .first_sleep = seconds(10), .max_sleep = seconds(10)});
  std::mutex m;
  std::condition_variable cv;
  int calls = 0;
  auto id = pt.add_function([&] {
    std::lock_guard lock(m);
    ++calls;
    cv.notify_all();
    return calls < 3 ? ProgressThread::Progress::idle : ProgressThread::Progress::done;
  });
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return calls >= 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // asleep for 10 s now
  lock.unlock();
  pt.wake();
  lock.lock();
  EXPECT_TRUE(cv.wait_for(lock, seconds(5), [&] { return calls >= 2; })) << "wake() was not heard";
  lock.unlock();
  pt.wake();
  pt.wait_done(id);
}
