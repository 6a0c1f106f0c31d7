// An engine of several backends: each batch goes by the first backend, in the engine's order,
// that the peer has too, that both regions are registered with and that carries their kinds of
// memory. Between engines of this process, over loopback and libfabric's tcp and shm.

#include <spillway/core/error.hpp>
#include <spillway/transfer/engine.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace spillway::transfer {
namespace {

using namespace std::chrono_literals;

EngineOptions with(const std::string& backends) {
  EngineOptions o;
  o.backend = backends;
  o.heartbeat_interval = 50ms;
  o.peer_timeout = 2000ms;
  return o;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

/// A host buffer of `n` bytes registered with `engine`.
struct Buffer {
  Buffer(TransferEngine& engine, std::size_t n, std::uint32_t seed) : bytes(n) {
    std::mt19937 rng(seed);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    region = engine.register_memory(bytes.data(), n, MemoryType::HOST);
  }
  std::vector<std::uint8_t> bytes;
  Region region;
};

/// Writes `src` into `dst` (owned by `target`) with a scattered batch and an imm; checks
/// that the bytes landed.
void write_and_check(TransferEngine& initiator, const Buffer& src, TransferEngine& target,
                     Buffer& dst, std::uint32_t imm) {
  const RemoteRegion remote =
      RemoteRegion::from_bytes(target.export_region(dst.region, 0, dst.bytes.size()).to_bytes());
  const std::vector<Chunk> chunks{{0, 8192, 4096}, {12288, 0, 4096}, {4096, 20000, 5000}};
  const Ticket t = initiator.write(src.region, remote, chunks, imm, Deadline::in(20s));
  ASSERT_EQ(target.expect_imm(imm, 1, Deadline::in(20s)).wait(), Status::ok);
  ASSERT_EQ(t.wait(), Status::ok) << t.message();
  for (const Chunk& c : chunks) {
    EXPECT_EQ(
        std::memcmp(dst.bytes.data() + c.dst_offset, src.bytes.data() + c.src_offset, c.length), 0);
  }
}

class EngineBackends : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SPILLWAY_HAS_LIBFABRIC) GTEST_SKIP() << "built without libfabric";
  }
};

TEST_F(EngineBackends, EachPeerGetsTheFirstBackendBothHave) {
  TransferEngine a(with("loopback, libfabric/shm,libfabric/tcp"));
  TransferEngine tcp_only(with("libfabric/tcp"));
  TransferEngine shm_and_tcp(with("libfabric/tcp,libfabric/shm"));
  TransferEngine loopback_only(with("loopback"));
  EXPECT_EQ(a.backend_name(), "loopback,libfabric/shm,libfabric/tcp");
  a.add_peer(tcp_only.metadata());
  a.add_peer(shm_and_tcp.metadata());
  a.add_peer(loopback_only.metadata());
  Buffer src(a, 32768, 1);
  Buffer to_tcp(tcp_only, 32768, 2);
  Buffer to_shm(shm_and_tcp, 32768, 3);
  Buffer to_loopback(loopback_only, 32768, 4);
  // `a`'s order decides: shm before tcp, though the peer lists tcp first.
  EXPECT_EQ(a.backend_for(src.region, tcp_only.export_region(to_tcp.region, 0, 32768)),
            "libfabric/tcp");
  EXPECT_EQ(a.backend_for(src.region, shm_and_tcp.export_region(to_shm.region, 0, 32768)),
            "libfabric/shm");
  EXPECT_EQ(a.backend_for(src.region, loopback_only.export_region(to_loopback.region, 0, 32768)),
            "loopback");
  write_and_check(a, src, tcp_only, to_tcp, 11);
  write_and_check(a, src, shm_and_tcp, to_shm, 12);
  write_and_check(a, src, loopback_only, to_loopback, 13);
  // And back, with the peers' engines as initiators (their order: tcp first).
  const PeerId back = shm_and_tcp.add_peer(a.metadata());
  EXPECT_EQ(shm_and_tcp.peers(), std::vector<PeerId>{back});
  Buffer dst(a, 32768, 5);
  EXPECT_EQ(shm_and_tcp.backend_for(to_shm.region, a.export_region(dst.region, 0, 32768)),
            "libfabric/tcp");
  write_and_check(shm_and_tcp, to_shm, a, dst, 14);
  // Reads go the same way.
  std::vector<std::uint8_t> got(4096);
  const Region rg = a.register_memory(got.data(), got.size(), MemoryType::HOST);
  const Ticket r = a.read(tcp_only.export_region(to_tcp.region, 0, 32768), rg,
                          std::vector<Chunk>{{8192, 0, 4096}}, Deadline::in(20s));
  ASSERT_EQ(r.wait(), Status::ok) << r.message();
  EXPECT_EQ(std::memcmp(got.data(), to_tcp.bytes.data() + 8192, 4096), 0);
}

TEST_F(EngineBackends, ARemoteRegionOfBackendsTheInitiatorLacksIsRefusedBeforeAnythingMoves) {
  TransferEngine a(with("libfabric/tcp"));
  TransferEngine b(with("libfabric/shm,libfabric/tcp"));
  a.add_peer(b.metadata());
  Buffer src(a, 8192, 1);
  Buffer dst(b, 8192, 2);
  const std::vector<std::uint8_t> before = dst.bytes;
  RemoteRegion remote = b.export_region(dst.region, 0, 8192);
  ASSERT_EQ(remote.keys.size(), 2u);
  EXPECT_EQ(remote.keys[0].backend, "libfabric/shm");
  std::erase_if(remote.keys, [](const RemoteKey& k) { return k.backend == "libfabric/tcp"; });
  remote = RemoteRegion::from_bytes(remote.to_bytes());
  const std::string why = message_of([&] {
    a.write(src.region, remote, std::vector<Chunk>{{0, 0, 4096}}, 1u);
  });
  EXPECT_NE(why.find("libfabric/tcp: the remote region is not registered with it"),
            std::string::npos)
      << why;
  EXPECT_NE(message_of([&] { (void)a.backend_for(src.region, remote); }).find("no backend"),
            std::string::npos);
  EXPECT_TRUE(dst.bytes == before);
  // A region with no key at all does not parse.
  remote.keys.clear();
  EXPECT_THROW(RemoteRegion::from_bytes(remote.to_bytes()), corrupt_data_error);
}

TEST_F(EngineBackends, EnginesWithNoBackendInCommonAreRefusedByName) {
  TransferEngine a(with("loopback"));
  TransferEngine b(with("libfabric/tcp"));
  const std::string why = message_of([&] { a.add_peer(b.metadata()); });
  EXPECT_NE(why.find("libfabric/tcp"), std::string::npos) << why;
  EXPECT_NE(why.find("none in common"), std::string::npos) << why;
  EXPECT_TRUE(a.peers().empty());
}

TEST_F(EngineBackends, ABadListIsAnErrorThatNamesIt) {
  EXPECT_NE(
      message_of([] { TransferEngine e(with("libfabric/tcp,libfabric/tcp")); }).find("named twice"),
      std::string::npos);
  EXPECT_NE(message_of([] {
              TransferEngine e(with("loopback,carrier-pigeon"));
            }).find("'carrier-pigeon'"),
            std::string::npos);
  EXPECT_NE(message_of([] { TransferEngine e(with("loopback,")); }).find("unknown backend ''"),
            std::string::npos);
  EXPECT_NE(message_of([] { TransferEngine e(with("libfabric/")); }).find("names no provider"),
            std::string::npos);
  EXPECT_THROW(TransferEngine(with("auto,loopback")), logic_error);
}

TEST_F(EngineBackends, AKernelShareOutsideZeroToOneIsAnErrorThatNamesIt) {
  for (const double share : {-0.1, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    EngineOptions o = with("loopback");
    o.ipc_kernel_share = share;
    const std::string why = message_of([&] { TransferEngine e(o); });
    EXPECT_NE(why.find("ipc_kernel_share"), std::string::npos) << share << ": " << why;
  }
  EngineOptions o = with("loopback");
  o.ipc_kernel_share = 0.4;
  EXPECT_NO_THROW(TransferEngine e(o));
}

}  // namespace
}  // namespace spillway::transfer
