// The transfer engine's fault suite, over libfabric tcp and shm: a peer process killed at a
// random point of 10 000-chunk batches to it, while a thread writes to a second peer process
// throughout and reads every batch back. Every ticket to the killed peer ends (never hangs)
// within the peer timeout, the live peer's transfers go on with every byte right, and the
// engine ends. SPILLWAY_FAULT_ROUNDS rounds per provider (default 4; scripts/fault-suite.sh
// runs 200), SPILLWAY_FAULT_SEED the seed (printed). The peers are transfer_ipc_peer.

#include <spillway/core/error.hpp>
#include <spillway/transfer/engine.hpp>

#include <gtest/gtest.h>

#include "peer_process.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace spillway::transfer {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kRegion = 16 << 20;
constexpr auto kPeerTimeout = test::kFastPeerTimeout;

std::size_t env_or(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoull(v) : fallback;
}

/// `n` chunks of `length` bytes spread evenly over the region.
std::vector<Chunk> spread(std::size_t n, std::size_t length) {
  std::vector<Chunk> out;
  const std::size_t step = kRegion / n;
  for (std::size_t i = 0; i < n; ++i) out.push_back({i * step, i * step, length});
  return out;
}

/// Writes batches to `peer` and reads each back, until `stop`: counts the round trips whose
/// bytes came back whole; any other outcome is a failure, described in `failure`.
struct LiveTraffic {
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> verified{0};
  std::atomic<bool> failed{false};
  std::string failure;  // read once `failed` is set or the thread has ended

  void fail(std::string why) {
    failure = std::move(why);
    failed = true;
  }

  void run(TransferEngine& engine, const RemoteRegion& peer, std::uint32_t seed) {
    std::vector<std::uint8_t> src(kRegion);
    std::vector<std::uint8_t> back(kRegion);
    const Region rs = engine.register_memory(src.data(), src.size(), MemoryType::HOST);
    const Region rb = engine.register_memory(back.data(), back.size(), MemoryType::HOST);
    std::mt19937 rng(seed);
    const auto chunks = spread(512, 4096);
    while (!stop.load()) {
      const auto v = static_cast<std::uint8_t>(rng());
      std::iota(src.begin(), src.end(), v);
      std::fill(back.begin(), back.end(), std::uint8_t{0});
      const Ticket w = engine.write(rs, peer, chunks, std::nullopt, Deadline::in(20s));
      if (const Status s = w.wait(); s != Status::ok) {
        fail(std::string("write to the live peer: ") + to_string(s) + ": " + w.message());
        return;
      }
      const Ticket r = engine.read(peer, rb, chunks, Deadline::in(20s));
      if (const Status s = r.wait(); s != Status::ok) {
        fail(std::string("read from the live peer: ") + to_string(s) + ": " + r.message());
        return;
      }
      for (const Chunk& c : chunks) {
        if (std::memcmp(back.data() + c.dst_offset, src.data() + c.src_offset, c.length) != 0) {
          fail("the live peer's bytes differ at offset " + std::to_string(c.dst_offset));
          return;
        }
      }
      verified.fetch_add(1);
    }
  }
};

class FaultSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!SPILLWAY_HAS_LIBFABRIC) GTEST_SKIP() << "built without libfabric";
  }
};

TEST_P(FaultSuite, APeerKilledAtARandomPointNeverHangsTheEngineOrTheLivePeer) {
  const std::string provider = GetParam();
  const std::size_t rounds = env_or("SPILLWAY_FAULT_ROUNDS", 4);
  const auto seed =
      static_cast<std::uint32_t>(env_or("SPILLWAY_FAULT_SEED", std::random_device{}()));
  std::printf("fault suite over %s: %zu rounds, SPILLWAY_FAULT_SEED=%u\n", provider.c_str(), rounds,
              seed);
  std::mt19937 rng(seed);
  std::size_t gone = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) +
                 " (SPILLWAY_FAULT_SEED=" + std::to_string(seed) + ")");
    test::PeerProcess dying("host", kRegion, "libfabric/" + provider);
    test::PeerProcess living("host", kRegion, "libfabric/" + provider);
    ASSERT_FALSE(dying.metadata.empty());
    ASSERT_FALSE(living.metadata.empty());
    auto engine = std::make_unique<TransferEngine>(test::fast_failing_options(provider));
    std::vector<std::uint8_t> src(kRegion, 0x5a);
    const Region rs = engine->register_memory(src.data(), src.size(), MemoryType::HOST);
    engine->add_peer(dying.metadata);
    engine->add_peer(living.metadata);
    LiveTraffic live;
    std::thread traffic(
        [&] { live.run(*engine, living.region, static_cast<std::uint32_t>(rng())); });

    const auto chunks = spread(10000, 1024);
    std::vector<Ticket> tickets;
    for (int i = 0; i < 3; ++i) tickets.push_back(engine->write(rs, dying.region, chunks, 7u));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    dying.kill_now();
    const std::size_t verified_at_kill = live.verified.load();
    const auto killed_at = std::chrono::steady_clock::now();
    for (auto& t : tickets) {
      const Status s = t.wait(kPeerTimeout + 5s);
      EXPECT_NE(s, Status::in_progress) << "a ticket to the killed peer hangs";
      gone += s != Status::ok;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at, kPeerTimeout + 5s);
    // The live peer carries on: two more whole round trips.
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (live.verified.load() < verified_at_kill + 2 && !live.failed.load() &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    live.stop = true;
    traffic.join();
    EXPECT_EQ(live.failure, "");
    EXPECT_GE(live.verified.load(), verified_at_kill + 2) << "the live peer's transfers stopped";
    // The engine ends, whatever the provider did.
    auto ended = std::async(std::launch::async, [&] { engine.reset(); });
    EXPECT_EQ(ended.wait_for(10s), std::future_status::ready) << "the engine's end hangs";
    if (HasFailure()) {
      if (ended.wait_for(0s) != std::future_status::ready) std::_Exit(1);  // cannot go on
      return;
    }
  }
  std::printf("%zu of %zu batches to the killed peers ended other than ok\n", gone, rounds * 3);
}

INSTANTIATE_TEST_SUITE_P(Providers, FaultSuite, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace spillway::transfer
