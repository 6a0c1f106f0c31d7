// The cuda_ipc backend between two processes on one GPU (skipped without one): batches of
// scattered chunks from device memory into another process's pinned, shared (written
// one-sided: the target copies nothing), pageable and device memory and back, with every copy
// method; imms; a forged remote range refused without writing anything (by the target, or by
// the initiator for shared memory); host to host refused; a killed target ends its tickets as
// peer_gone. The other process is ipc_peer (a fresh exec: CUDA does not survive a fork).

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/transfer/engine.hpp>

#include <gtest/gtest.h>

#include "peer_process.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace spillway::transfer {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kRegion = 1 << 20;  // a dump of it fits one control message

/// The other process: started with its memory kind, killed (if still there) when done.
struct Peer : test::PeerProcess {
  explicit Peer(const std::string& kind, const std::string& backends = "cuda_ipc")
      : PeerProcess(kind, kRegion, backends) {}
};

std::vector<std::uint8_t> ask(TransferEngine& e, PeerId peer, std::vector<std::uint8_t> m) {
  e.send_control(peer, m);
  auto reply = e.recv_control(20s);
  EXPECT_TRUE(reply.has_value()) << "the peer process did not answer";
  return reply ? reply->second : std::vector<std::uint8_t>{};
}

std::uint64_t chunks_the_peer_copied(TransferEngine& e, PeerId peer) {
  const auto r = ask(e, peer, {'C'});
  std::uint64_t n = ~std::uint64_t{0};
  if (r.size() == sizeof(n)) std::memcpy(&n, r.data(), sizeof(n));
  return n;
}

bool peer_got_imm(TransferEngine& e, PeerId peer, std::uint32_t imm) {
  std::vector<std::uint8_t> m{'E', 0, 0, 0, 0};
  std::memcpy(m.data() + 1, &imm, 4);
  const auto r = ask(e, peer, m);
  return r.size() == 1 && r[0] == 1;
}

/// Scattered chunks of odd sizes, none overlapping on either side.
std::vector<Chunk> scattered(std::size_t n, std::size_t max_len, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::size_t slot = kRegion / n;
  std::vector<std::size_t> src(n);
  std::vector<std::size_t> dst(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = dst[i] = i;
  std::shuffle(src.begin(), src.end(), rng);
  std::shuffle(dst.begin(), dst.end(), rng);
  std::vector<Chunk> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = 1 + rng() % std::min(max_len, slot);
    const std::size_t skew = rng() % (slot - len + 1);
    out.push_back({src[i] * slot + skew, dst[i] * slot, len});
  }
  return out;
}

/// Device memory of this process with random bytes, and their host copy.
struct DeviceSource {
  void* ptr{cuda::malloc_device(kRegion)};
  std::vector<std::uint8_t> host = std::vector<std::uint8_t>(kRegion);
  DeviceSource() {
    std::mt19937_64 rng(7);
    for (auto& b : host) b = static_cast<std::uint8_t>(rng());
    cuda::memcpy_async(ptr, host.data(), kRegion, Stream{});
    Stream{}.synchronize();
  }
  ~DeviceSource() { cuda::free_device(ptr); }
  DeviceSource(const DeviceSource&) = delete;
  DeviceSource& operator=(const DeviceSource&) = delete;
};

EngineOptions ipc(const std::string& copy) {
  EngineOptions o;
  o.backend = "cuda_ipc";
  o.ipc_copy = copy;
  o.heartbeat_interval = 50ms;
  o.peer_timeout = 2000ms;
  return o;
}

class CudaIpc : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  }
};

// Device memory here into the other process's memory of each kind, then read back into
// pinned memory here; every byte is checked, and those outside the chunks stay zero.
TEST_P(CudaIpc, ScatteredChunksArriveExactlyWithTheirImm) {
  const auto& [kind, copy] = GetParam();
  TransferEngine engine(ipc(copy));
  Peer other(kind);
  ASSERT_FALSE(other.metadata.empty()) << "ipc_peer did not start";
  const PeerId peer = engine.add_peer(other.metadata);
  DeviceSource src;
  const Region rs = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
  for (const std::size_t max_len : {std::size_t{1}, std::size_t{4096}, std::size_t{70000}}) {
    ASSERT_EQ(ask(engine, peer, {'F', 0}), std::vector<std::uint8_t>{1});
    const auto chunks = scattered(max_len == 1 ? 1000 : 12, max_len, 11);
    const std::uint32_t imm = 100 + static_cast<std::uint32_t>(max_len);
    const Ticket t = engine.write(rs, other.region, chunks, imm, Deadline::in(20s));
    ASSERT_EQ(t.wait(), Status::ok) << t.message();
    EXPECT_TRUE(peer_got_imm(engine, peer, imm));
    // Device and shared memory there: this process copied; other host memory: the target.
    const std::uint64_t copied = chunks_the_peer_copied(engine, peer);
    if (kind == "device" || kind == "shared") {
      EXPECT_EQ(copied, 0u) << "the target copied a batch written one-sided";
    } else {
      EXPECT_GE(copied, chunks.size()) << "the target did not copy";
    }
    std::vector<std::uint8_t> expected(kRegion, 0);
    for (const Chunk& c : chunks) {
      std::memcpy(expected.data() + c.dst_offset, src.host.data() + c.src_offset, c.length);
    }
    const auto dump = ask(engine, peer, {'D'});
    ASSERT_EQ(dump.size(), kRegion);
    ASSERT_TRUE(dump == expected) << "bytes differ after a write of chunks up to " << max_len;

    // And back: the same chunks, read from there into pinned memory here.
    void* back = cuda::malloc_pinned(kRegion);
    std::memset(back, 0, kRegion);
    const Region rb = engine.register_memory(back, kRegion, MemoryType::PINNED_HOST);
    std::vector<Chunk> reversed;
    for (const Chunk& c : chunks) reversed.push_back({c.dst_offset, c.src_offset, c.length});
    if (kind == "device") {
      const Ticket r = engine.read(other.region, rb, reversed, Deadline::in(20s));
      ASSERT_EQ(r.wait(), Status::ok) << r.message();
      for (const Chunk& c : chunks) {
        ASSERT_EQ(0, std::memcmp(static_cast<std::uint8_t*>(back) + c.src_offset,
                                 src.host.data() + c.src_offset, c.length));
      }
    } else {  // host memory there and here: cuda_ipc does not carry it
      try {
        (void)engine.read(other.region, rb, reversed, Deadline::in(20s));
        ADD_FAILURE() << "cuda_ipc took a batch between host memory";
      } catch (const logic_error& e) {
        EXPECT_NE(std::string(e.what()).find("cuda_ipc: it does not carry these kinds of memory"),
                  std::string::npos)
            << e.what();
      }
    }
    engine.deregister_memory(rb);
    cuda::free_pinned(back);
  }
  engine.send_control(peer, std::vector<std::uint8_t>{'Q'});
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, CudaIpc,
    ::testing::Combine(::testing::Values("pinned", "shared", "host", "device"),
                       ::testing::Values("kernel", "batch", "per_chunk", "mixed", "auto")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// Mixed copies with the kernel's share set near either end: the kernel's pieces and the copy
// engines' (with 0.05, ~950 of 1000 pieces: several calls of cudaMemcpyBatchAsync) together
// write every byte, into memory the initiator writes (shared) and memory the target copies
// into (pinned).
TEST(CudaIpcShare, EveryShareOfMixedCopiesWritesEveryByte) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  for (const char* kind : {"shared", "pinned"}) {
    for (const double share : {0.05, 0.95}) {
      EngineOptions o = ipc("mixed");
      o.ipc_kernel_share = share;
      TransferEngine engine(o);
      Peer other(kind);
      ASSERT_FALSE(other.metadata.empty()) << "ipc_peer did not start";
      const PeerId peer = engine.add_peer(other.metadata);
      DeviceSource src;
      const Region rs = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
      ASSERT_EQ(ask(engine, peer, {'F', 0}), std::vector<std::uint8_t>{1});
      const auto chunks = scattered(1000, 1000, 5);
      const Ticket t = engine.write(rs, other.region, chunks, 7, Deadline::in(20s));
      ASSERT_EQ(t.wait(), Status::ok) << t.message();
      EXPECT_TRUE(peer_got_imm(engine, peer, 7));
      std::vector<std::uint8_t> expected(kRegion, 0);
      for (const Chunk& c : chunks) {
        std::memcpy(expected.data() + c.dst_offset, src.host.data() + c.src_offset, c.length);
      }
      ASSERT_TRUE(ask(engine, peer, {'D'}) == expected)
          << "bytes differ into " << kind << " memory with a kernel share of " << share;
      engine.send_control(peer, std::vector<std::uint8_t>{'Q'});
    }
  }
}

// Shared memory whose file the initiator cannot open (the target's descriptor now names
// /dev/null: another inode): the initiator falls back to asking the target, which copies, and
// every byte arrives with its imm, batch after batch.
TEST(CudaIpcShared, AFileTheInitiatorCannotMapIsCopiedByTheTarget) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  TransferEngine engine(ipc("auto"));
  Peer other("shared-hidden");
  ASSERT_FALSE(other.metadata.empty()) << "ipc_peer did not start";
  const PeerId peer = engine.add_peer(other.metadata);
  DeviceSource src;
  const Region rs = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
  std::uint64_t copied_before = 0;
  for (const std::uint32_t seed : {1u, 2u}) {  // the second batch finds the file known unmappable
    ASSERT_EQ(ask(engine, peer, {'F', 0}), std::vector<std::uint8_t>{1});
    const auto chunks = scattered(500, 2000, seed);
    const Ticket t = engine.write(rs, other.region, chunks, seed, Deadline::in(20s));
    ASSERT_EQ(t.wait(), Status::ok) << t.message();
    EXPECT_TRUE(peer_got_imm(engine, peer, seed));
    const std::uint64_t copied = chunks_the_peer_copied(engine, peer);
    ASSERT_NE(copied, ~std::uint64_t{0}) << "the peer did not say what it copied";
    EXPECT_GE(copied - copied_before, chunks.size()) << "the target did not copy batch " << seed;
    copied_before = copied;
    std::vector<std::uint8_t> expected(kRegion, 0);
    for (const Chunk& c : chunks) {
      std::memcpy(expected.data() + c.dst_offset, src.host.data() + c.src_offset, c.length);
    }
    ASSERT_TRUE(ask(engine, peer, {'D'}) == expected) << "bytes differ in batch " << seed;
  }
  engine.send_control(peer, std::vector<std::uint8_t>{'Q'});
}

// Everywhere, GPU or not: a bad option, or no GPU, is an error that says so.
TEST(CudaIpcOptions, AnUnknownCopyMethodOrNoGpuIsAClearError) {
  try {
    TransferEngine engine(ipc("dma"));
    ADD_FAILURE() << "an unknown ipc_copy was taken";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown ipc_copy 'dma'"), std::string::npos) << e.what();
  }
  if (cuda::is_available()) return;
  try {
    TransferEngine engine(ipc("auto"));
    ADD_FAILURE() << "a cuda_ipc engine without a GPU";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("needs a GPU"), std::string::npos) << e.what();
  }
}

class CudaIpcFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  }
};

// An engine of cuda_ipc and libfabric's shm: device memory goes by cuda_ipc, host memory by
// shm, each batch on its own, to the same peer.
TEST_F(CudaIpcFaults, WithShmTooEachBatchTakesTheBackendThatCarriesIt) {
  if (!SPILLWAY_HAS_LIBFABRIC) GTEST_SKIP() << "built without libfabric";
  EngineOptions o = ipc("auto");
  o.backend = "cuda_ipc,libfabric/shm";
  TransferEngine engine(o);
  Peer other("pinned", o.backend);
  ASSERT_FALSE(other.metadata.empty()) << "ipc_peer did not start";
  const PeerId peer = engine.add_peer(other.metadata);
  DeviceSource src;
  const Region device = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
  std::vector<std::uint8_t> host(kRegion);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const Region pageable = engine.register_memory(host.data(), kRegion, MemoryType::HOST);
  EXPECT_EQ(engine.backend_for(device, other.region), "cuda_ipc");
  EXPECT_EQ(engine.backend_for(pageable, other.region), "libfabric/shm");
  const auto from_device = scattered(64, 4096, 3);
  const auto from_host = scattered(64, 4096, 4);
  std::vector<std::uint8_t> expected(kRegion, 0);
  for (const Chunk& c : from_device) {
    std::memcpy(expected.data() + c.dst_offset, src.host.data() + c.src_offset, c.length);
  }
  const Ticket t1 = engine.write(device, other.region, from_device, 21u, Deadline::in(20s));
  ASSERT_EQ(t1.wait(), Status::ok) << t1.message();
  EXPECT_TRUE(peer_got_imm(engine, peer, 21));
  for (const Chunk& c : from_host) {
    std::memcpy(expected.data() + c.dst_offset, host.data() + c.src_offset, c.length);
  }
  const Ticket t2 = engine.write(pageable, other.region, from_host, 22u, Deadline::in(20s));
  ASSERT_EQ(t2.wait(), Status::ok) << t2.message();
  EXPECT_TRUE(peer_got_imm(engine, peer, 22));
  EXPECT_TRUE(ask(engine, peer, {'D'}) == expected) << "bytes differ";
  engine.send_control(peer, std::vector<std::uint8_t>{'Q'});
}

// A remote range forged larger than the target's registration passes the engine's check (it
// only knows the range) and is refused, with nothing written: by the target where it copies
// (pinned memory), by the initiator's cuda_ipc backend where it would write one-sided (shared
// memory, whose export names the registration's extent).
TEST_F(CudaIpcFaults, AForgedRangeIsRefusedAndNothingIsWritten) {
  for (const std::string kind : {"pinned", "shared"}) {
    TransferEngine engine(ipc("auto"));
    Peer other(kind);
    const PeerId peer = engine.add_peer(other.metadata);
    DeviceSource src;
    const Region rs = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
    RemoteRegion forged = other.region;
    forged.length = 2 * kRegion;
    forged = RemoteRegion::from_bytes(forged.to_bytes());
    const std::vector<Chunk> chunks{{0, 0, 4096}, {0, kRegion + 4096, 4096}};
    const Ticket t = engine.write(rs, forged, chunks, 5u, Deadline::in(20s));
    EXPECT_EQ(t.wait(), Status::error) << kind;
    EXPECT_NE(t.message().find("outside"), std::string::npos) << kind << ": " << t.message();
    const auto dump = ask(engine, peer, {'D'});
    EXPECT_TRUE(dump == std::vector<std::uint8_t>(kRegion, 0))
        << kind << ": the refused batch wrote";
    std::vector<std::uint8_t> m{'E', 5, 0, 0, 0};
    EXPECT_EQ(ask(engine, peer, m), std::vector<std::uint8_t>{0})
        << kind << ": a refused batch's imm came";
  }
}

// The target dies: what is in flight to it, and what comes after, ends as peer_gone.
TEST_F(CudaIpcFaults, AKilledTargetEndsItsTicketsAsPeerGone) {
  TransferEngine engine(ipc("auto"));
  Peer other("pinned");
  const PeerId peer = engine.add_peer(other.metadata);
  DeviceSource src;
  const Region rs = engine.register_memory(src.ptr, kRegion, MemoryType::DEVICE, 0);
  const auto chunks = scattered(256, 4096, 3);
  ASSERT_EQ(engine.write(rs, other.region, chunks, 1u, Deadline::in(20s)).wait(), Status::ok);
  other.kill_now();
  const auto t0 = std::chrono::steady_clock::now();
  Status s = Status::ok;
  for (int i = 0; i < 1000 && s == Status::ok; ++i) {
    s = engine.write(rs, other.region, chunks, 1u, Deadline::in(20s)).wait();
  }
  EXPECT_EQ(s, Status::peer_gone);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_TRUE(engine.peers().empty());
  (void)peer;
}

}  // namespace
}  // namespace spillway::transfer
