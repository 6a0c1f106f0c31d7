// The conformance suite on the transfer communicator with ranks as threads of this process,
// each with an engine of its own, meeting in a rendezvous directory: over the loopback backend
// and libfabric's tcp and shm providers, 1 to 4 ranks. Plus what only this communicator shows:
// a rank that goes away, a dropped receive, run_ranks(transfer) and a bad rendezvous file.
// (Between processes, ctest runs the MPI test binaries under spillway-run with
// SPILLWAY_TEST_COMM=transfer.)
#include <spillway/comm/launch.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/transfer.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/shuffle/shuffler.hpp>

#include "comm/conformance.hpp"
#include "common.hpp"

#include <fstream>
#include <thread>

using namespace spillway;
using namespace std::chrono_literals;

namespace {

struct Backend {
  const char* name;
  const char* backend;
  const char* provider;
  std::size_t window{64 * MiB};  // the device window; 0: device buffers staged through host
};

const std::vector<Backend>& backends() {
  static const std::vector<Backend> all = [] {
    std::vector<Backend> v{{"loopback", "loopback", ""}};
#if SPILLWAY_HAS_LIBFABRIC
    v.push_back({"tcp", "libfabric", "tcp"});
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // CI time; shm runs in
    v.push_back({"shm", "libfabric", "shm"});  // the plain build and between processes
#endif
    v.push_back({"tcp_staged", "libfabric", "tcp", 0});
#endif
    return v;
  }();
  return all;
}

/// The communicators of `n` ranks (made on threads, as making them is collective), each with
/// its own BufferResource, meeting in `dir`.
struct Ranks {
  std::vector<std::unique_ptr<BufferResource>> brs;
  std::vector<std::unique_ptr<Communicator>> comms;

  Ranks(int n, const Backend& b, const std::string& dir) : brs(n), comms(n) {
    std::vector<std::thread> threads;
    for (Rank r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        if (const int dev = LocalCommunicator::device_of(r); dev >= 0) cuda::set_device(dev);
        brs[r] = std::make_unique<BufferResource>(test::small_config(dir));
        const LaunchInfo launch{r, n, -1, dir, "test"};
        TransferCommOptions o;
        o.backend = b.backend;
        o.provider = b.provider;
        o.ipc_window = b.window;
        comms[r] = make_transfer_communicator(*brs[r], launch, o);
        comms[r]->set_timeout(60s);
      });
    }
    for (auto& t : threads) t.join();
  }
  ~Ranks() {
    comms.clear();  // before their resources
  }
};

using Param = std::tuple<std::size_t, int, std::size_t>;  // case, ranks, backend

class TransferConformance : public ::testing::TestWithParam<Param> {};

/// Skips a case without a device window where there is no GPU: it is then the tcp case again.
#define SPILLWAY_SKIP_IF_SAME_AS_TCP(b)                                                \
  if ((b).window == 0 && !cuda::is_available()) {                                      \
    GTEST_SKIP() << "without a GPU this is the tcp case (no device buffers to stage)"; \
  }

TEST_P(TransferConformance, Passes) {
  const auto [index, nranks, backend] = GetParam();
  SPILLWAY_SKIP_IF_SAME_AS_TCP(backends()[backend]);
  test::TempDir dir;
  Ranks ranks(nranks, backends()[backend], dir.path());
  std::vector<std::thread> threads;
  for (Rank r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *ranks.comms[r];
      try {
        if (const int dev = LocalCommunicator::device_of(r); dev >= 0) cuda::set_device(dev);
        test::conformance_cases()[index].body(comm, *ranks.brs[r]);
        comm.barrier();  // nobody leaves while others still talk
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
        ranks.comms[r].reset();  // the peers fail instead of waiting
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Under the sanitizers (several times slower, on CI's two cores), 3 ranks: several peers.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPILLWAY_TRANSFER_RANKS 3
#else
#define SPILLWAY_TRANSFER_RANKS 1, 2, 3, 4
#endif

INSTANTIATE_TEST_SUITE_P(Cases, TransferConformance,
                         ::testing::Combine(::testing::Range(std::size_t{0},
                                                             test::conformance_cases().size()),
                                            ::testing::Values(SPILLWAY_TRANSFER_RANKS),
                                            ::testing::Range(std::size_t{0}, backends().size())),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return test::conformance_cases()[std::get<0>(info.param)].name + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks_" +
                                  backends()[std::get<2>(info.param)].name;
                         });

class TransferCommunicator : public ::testing::TestWithParam<std::size_t> {
 protected:
  [[nodiscard]] const Backend& backend() const { return backends()[GetParam()]; }
};

TEST_P(TransferCommunicator, ARankThatGoesFailsItsPeersPromptly) {
  SPILLWAY_SKIP_IF_SAME_AS_TCP(backend());
  test::TempDir dir;
  Ranks ranks(3, backend(), dir.path());
  BufferResource& br = *ranks.brs[0];
  auto r = ranks.comms[0]->recv(1, Tag{1, 1}, br.allocate(MemoryType::HOST, 16));
  auto s = ranks.comms[0]->send(test::make_host(br, 4096, 3), 1, Tag{1, 2});
  ranks.comms[1].reset();  // rank 1 is gone without a word
  const auto t0 = std::chrono::steady_clock::now();
  for (Future* f : {r.get(), s.get()}) {
    try {
      ranks.comms[0]->wait(*f);
      ADD_FAILURE() << "no error";
    } catch (const comm_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 is gone"), std::string::npos) << e.what();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // What waits on rank 1 with nothing posted (a message it will never send) can tell.
  EXPECT_TRUE(ranks.comms[0]->has_left(1));
  EXPECT_FALSE(ranks.comms[0]->has_left(2));
  // Ranks 0 and 2 still talk.
  auto r2 = ranks.comms[2]->recv(0, Tag{1, 3}, ranks.brs[2]->allocate(MemoryType::HOST, 100));
  auto s2 = ranks.comms[0]->send(test::make_host(br, 100, 8), 2, Tag{1, 3});
  std::thread sender([&] { ranks.comms[0]->wait(*s2); });  // a send moves while it is tested
  ranks.comms[2]->wait(*r2);
  sender.join();
  EXPECT_EQ(test::verify(*ranks.brs[2], *ranks.comms[2]->release(std::move(r2)), 8), 100U);
}

// A shuffle waiting for a rank's finish message, which has no transfer posted to fail, ends
// as soon as the engine reports the rank gone (Communicator::has_left), not at its timeout.
TEST_P(TransferCommunicator, AShuffleWaitingOnAGoneRankFailsAtOnce) {
  SPILLWAY_SKIP_IF_SAME_AS_TCP(backend());
  test::TempDir dir;
  Ranks ranks(2, backend(), dir.path());
  Shuffler s(*ranks.comms[0], 1, 2, *ranks.brs[0]);
  s.insert_finished();
  ranks.comms[1].reset();  // rank 1 is gone before it finished
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)s.wait_any(std::chrono::seconds(50));
    ADD_FAILURE() << "no error";
  } catch (const comm_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 left the communicator before it finished"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // the communicator's timeout: 60 s
}

TEST_P(TransferCommunicator, ADroppedReceiveIsNotMatched) {
  SPILLWAY_SKIP_IF_SAME_AS_TCP(backend());
  test::TempDir dir;
  Ranks ranks(2, backend(), dir.path());
  BufferResource& br = *ranks.brs[1];
  { auto dropped = ranks.comms[1]->recv(0, Tag{2, 0}, br.allocate(MemoryType::HOST, 32)); }
  auto r = ranks.comms[1]->recv(0, Tag{2, 0}, br.allocate(MemoryType::HOST, 32));
  {  // once rank 0 is through, the withdrawal (sent before the barrier) is in
    std::thread other([&] { ranks.comms[1]->barrier(); });
    ranks.comms[0]->barrier();
    other.join();
  }
  auto s = ranks.comms[0]->send(test::make_host(*ranks.brs[0], 32, 5), 1, Tag{2, 0});
  std::thread t([&] { ranks.comms[0]->wait(*s); });
  ranks.comms[1]->wait(*r);
  t.join();
  EXPECT_EQ(test::verify(br, *ranks.comms[1]->release(std::move(r)), 5), 32U);
}

TEST_P(TransferCommunicator, LargeSmallMessagesGoInPieces) {
  SPILLWAY_SKIP_IF_SAME_AS_TCP(backend());
  test::TempDir dir;
  Ranks ranks(2, backend(), dir.path());
  std::vector<std::uint8_t> big(3 * MiB + 17);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31 + 7);
  ranks.comms[0]->send_message(big, 1, Tag{3, 1});
  ranks.comms[0]->send_message({1, 2, 3}, 1, Tag{3, 1});
  std::vector<Message> got;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (got.size() < 2 && std::chrono::steady_clock::now() < until) {
    if (auto m = ranks.comms[1]->recv_any(Tag{3, 1})) got.push_back(std::move(*m));
  }
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0].source, 0);
  EXPECT_TRUE(got[0].data == big);
  EXPECT_EQ(got[1].data, (std::vector<std::uint8_t>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Backends, TransferCommunicator,
                         ::testing::Range(std::size_t{0}, backends().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(backends()[info.param].name);
                         });

TEST(TransferRanks, RunRanksMeetsInAPrivateDirectory) {
  test::TempDir dir;
  std::atomic<int> sum{0};
  const int rc =
      run_ranks(RankKind::transfer, 3, test::host_config(dir.path()),
                [&](Communicator& comm, BufferResource& br) {
                  EXPECT_STREQ(comm.kind(), "transfer");
                  const Rank to = (comm.rank() + 1) % comm.nranks();
                  const Rank from = (comm.rank() + 2) % comm.nranks();
                  auto r = comm.recv(from, Tag{4, 0}, br.allocate(MemoryType::HOST, 8));
                  auto s = comm.send(test::make_host(br, 8, comm.rank()), to, Tag{4, 0});
                  comm.wait(*s);
                  comm.wait(*r);
                  sum += static_cast<int>(test::verify(br, *comm.release(std::move(r)), from) == 8);
                  comm.barrier();
                  return 0;
                });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(sum.load(), 3);
}

TEST(TransferRanks, ARankThatThrowsEndsTheOthersWait) {
  test::TempDir dir;
  LaunchOptions o;
  std::atomic<int> errors{0};
  o.on_error = [&](Rank, const std::string&) { ++errors; };
  auto config = test::host_config(dir.path());
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_ranks(
      RankKind::transfer, 2, config,
      [&](Communicator& comm, BufferResource&) {
        if (comm.rank() == 1) throw std::runtime_error("rank 1 gives up");
        comm.barrier();
        return 0;
      },
      o);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(errors.load(), 2);  // rank 1's own error, and rank 0's barrier
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
}

TEST(TransferRanks, CorruptRendezvousDataIsAClearError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  { std::ofstream(dir.path() + "/bad.transfer-0-1") << "zz"; }
  const LaunchInfo launch{0, 2, -1, dir.path(), "bad"};
  try {
    TransferCommOptions o;
    o.backend = "loopback";
    make_transfer_communicator(br, launch, o);
    ADD_FAILURE() << "no error";
  } catch (const corrupt_data_error& e) {
    EXPECT_NE(std::string(e.what()).find("hex"), std::string::npos) << e.what();
  }
}

}  // namespace
