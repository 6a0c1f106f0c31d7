// The transfer engine between processes over libfabric tcp and shm: a peer killed in the middle
// of a batch, and a peer that stops answering (SIGSTOP), end every ticket to it as peer_gone
// within the peer timeout, while transfers to another process carry on. Neither provider
// reports a dead peer itself; the engine's control channel does.

#include <spillway/core/error.hpp>
#include <spillway/transfer/engine.hpp>

#include <gtest/gtest.h>

#include "peer_process.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace spillway::transfer {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kRegion = 32 << 20;
constexpr auto kPeerTimeout = test::kFastPeerTimeout;

bool write_all(int fd, const std::vector<std::uint8_t>& bytes) {
  const auto n = static_cast<std::uint32_t>(bytes.size());
  return ::write(fd, &n, sizeof(n)) == sizeof(n) &&
         ::write(fd, bytes.data(), n) == static_cast<ssize_t>(n);
}

std::vector<std::uint8_t> read_message(int fd) {
  std::uint32_t n = 0;
  if (::read(fd, &n, sizeof(n)) != sizeof(n)) return {};
  std::vector<std::uint8_t> out(n);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out.data() + got, n - got);
    if (r <= 0) return {};
    got += static_cast<std::size_t>(r);
  }
  return out;
}

/// A child process with an engine and a registered region, which it announces (metadata,
/// then the region) and then waits to be killed.
struct Target {
  pid_t pid{-1};
  std::vector<std::uint8_t> metadata;
  RemoteRegion region;

  static Target start(const std::string& provider) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    Target t;
    t.pid = ::fork();
    if (t.pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      ::close(fds[0]);
      try {
        TransferEngine engine(test::fast_failing_options(provider));
        std::vector<std::uint8_t> memory(kRegion, 0);
        const Region r = engine.register_memory(memory.data(), memory.size(), MemoryType::HOST);
        if (!write_all(fds[1], engine.metadata()) ||
            !write_all(fds[1], engine.export_region(r, 0, memory.size()).to_bytes())) {
          ::_exit(3);
        }
        for (;;) ::pause();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "target: %s\n", e.what());
        ::_exit(2);
      }
    }
    ::close(fds[1]);
    t.metadata = read_message(fds[0]);
    const auto region = read_message(fds[0]);
    ::close(fds[0]);
    if (!region.empty()) t.region = RemoteRegion::from_bytes(region);
    return t;
  }
  void kill_now(int sig = SIGKILL) const { ::kill(pid, sig); }
  void reap() const {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

class ProcessTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!SPILLWAY_HAS_LIBFABRIC) GTEST_SKIP() << "built without libfabric";
  }
};

/// Batches of `chunks` 4 KiB chunks spread over the first half of the regions.
std::vector<Chunk> spread(std::size_t chunks) {
  std::vector<Chunk> out;
  for (std::size_t i = 0; i < chunks; ++i) out.push_back({i * 8192, i * 8192, 4096});
  return out;
}

TEST_P(ProcessTest, APeerKilledMidBatchEndsAsPeerGoneAndTheOtherPeerCarriesOn) {
  // The children are forked before this process starts any thread.
  Target dying = Target::start(GetParam());
  Target living = Target::start(GetParam());
  ASSERT_FALSE(dying.metadata.empty());
  ASSERT_FALSE(living.metadata.empty());
  TransferEngine engine(test::fast_failing_options(GetParam()));
  std::vector<std::uint8_t> src(kRegion);
  std::iota(src.begin(), src.end(), 0);
  const Region rs = engine.register_memory(src.data(), src.size(), MemoryType::HOST);
  const PeerId to_dying = engine.add_peer(dying.metadata);
  engine.add_peer(living.metadata);

  const auto chunks = spread(2048);  // 8 MiB a batch
  std::vector<Ticket> tickets;
  for (int i = 0; i < 64; ++i) tickets.push_back(engine.write(rs, dying.region, chunks, 1u));
  std::this_thread::sleep_for(5ms);
  const auto killed_at = std::chrono::steady_clock::now();
  dying.kill_now();
  // Meanwhile a batch to the other process, read back to check it.
  ASSERT_EQ(engine.write(rs, living.region, chunks, 2u, Deadline::in(30s)).wait(), Status::ok);
  std::vector<std::uint8_t> back(kRegion, 0);
  const Region rb = engine.register_memory(back.data(), back.size(), MemoryType::HOST);
  ASSERT_EQ(engine.read(living.region, rb, chunks, Deadline::in(30s)).wait(), Status::ok);
  for (const Chunk& c : chunks) {
    ASSERT_EQ(0, std::memcmp(back.data() + c.dst_offset, src.data() + c.src_offset, c.length));
  }
  int gone = 0;
  for (auto& t : tickets) {
    const Status s = t.wait(kPeerTimeout + 5s);
    ASSERT_NE(s, Status::in_progress) << "a ticket to the killed peer hangs";
    ASSERT_TRUE(s == Status::ok || s == Status::peer_gone) << to_string(s) << ": " << t.message();
    gone += s == Status::peer_gone;
  }
  const auto ended_after = std::chrono::steady_clock::now() - killed_at;
  EXPECT_GT(gone, 0) << "every batch finished before the kill: make them larger";
  EXPECT_LT(ended_after, kPeerTimeout + 5s);
  EXPECT_EQ(engine.peers().size(), 1u);
  // After the peer is gone, a new write to its region ends at once.
  EXPECT_EQ(engine.write(rs, dying.region, chunks).wait(1s), Status::peer_gone);
  EXPECT_THROW(engine.send_control(to_dying, std::vector<std::uint8_t>{1}), comm_error);
  dying.reap();
  living.reap();
}

TEST_P(ProcessTest, APeerThatStopsAnsweringIsGoneAfterThePeerTimeout) {
  Target target = Target::start(GetParam());
  ASSERT_FALSE(target.metadata.empty());
  TransferEngine engine(test::fast_failing_options(GetParam()));
  std::vector<std::uint8_t> src(kRegion, 7);
  const Region rs = engine.register_memory(src.data(), src.size(), MemoryType::HOST);
  engine.add_peer(target.metadata);
  ASSERT_EQ(engine.write(rs, target.region, spread(16), 1u, Deadline::in(30s)).wait(), Status::ok);
  target.kill_now(SIGSTOP);  // alive, connections open, but silent
  const auto stopped_at = std::chrono::steady_clock::now();
  const Ticket t = engine.write(rs, target.region, spread(2048));  // no deadline
  const Status s = t.wait(kPeerTimeout + 10s);
  const auto after = std::chrono::steady_clock::now() - stopped_at;
  EXPECT_EQ(s, Status::peer_gone) << t.message();
  EXPECT_NE(t.message().find("sent nothing for"), std::string::npos) << t.message();
  EXPECT_GE(after, kPeerTimeout - 100ms);
  EXPECT_LT(after, kPeerTimeout + 3s);
  target.reap();  // before the engine ends
}

// shm too: a peer stopped or killed while it holds a lock of the memory it shares with this
// engine stops only that peer's endpoint (the backend gives each shm peer its own), and the
// engine's worker, which never enters the provider, finds the peer gone.
INSTANTIATE_TEST_SUITE_P(Providers, ProcessTest, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace spillway::transfer
