// spillway-bench-transfer: batched non-contiguous one-sided writes of the transfer engine
// between two processes (or two engines of one process for --backend loopback), after
// Perplexity's RDMA article and fabric-lib's fabric-debug. Per chunk size it prints the
// batch's rate, the rate of one contiguous write of the same bytes over the same path in the
// same run (the ceiling), and the rate of the chunk-by-chunk peer: a write per chunk, each
// waited, for libfabric; a cudaMemcpyAsync per chunk for cuda_ipc. With --verify, a checksum
// of every chunk as the target holds it.
//
// The processes meet through spillway-run's bootstrap (rank 0 writes, rank 1 is written
// into), through a rendezvous directory (--rendezvous DIR --role initiator|target, one
// process each), or, with neither, this program starts its own target process.

#include <spillway/comm/bootstrap.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>
#include <spillway/transfer/engine.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <thread>

#include "bench_transfer_memory.hpp"
#include "bench_transfer_options.hpp"
#include "cli.hpp"

using namespace spillway;
using namespace spillway::transfer;
using spillway::tools::device_of;
using spillway::tools::engine_options;
using spillway::tools::Memory;
using spillway::tools::MemoryKind;
using spillway::tools::Options;
using spillway::tools::parse;
using spillway::tools::usage;
using namespace std::chrono_literals;

namespace {

std::size_t chunks_of(const Options& o, std::size_t chunk) {
  return o.chunks != 0 ? o.chunks : std::max<std::size_t>(1, o.batch_bytes / chunk);
}
/// Regions hold twice the largest batch, so that the layouts have room to scatter.
std::size_t region_bytes(const Options& o) {
  std::size_t most = 0;
  for (auto c : o.chunk_sizes) most = std::max(most, 2 * c * chunks_of(o, c));
  return most;
}

/// The batch for `chunk`: sources and destinations at distinct slots of the regions.
std::vector<Chunk> layout(const Options& o, std::size_t chunk) {
  const std::size_t n = chunks_of(o, chunk);
  std::vector<std::size_t> src(2 * n);
  std::vector<std::size_t> dst(2 * n);
  std::iota(src.begin(), src.end(), 0);
  std::iota(dst.begin(), dst.end(), 0);
  if (o.layout == "random") {
    std::mt19937_64 rng(chunk * 7919 + n);
    std::shuffle(src.begin(), src.end(), rng);
    std::shuffle(dst.begin(), dst.end(), rng);
  } else {
    for (std::size_t i = 0; i < n; ++i) src[i] = dst[i] = 2 * i;
  }
  std::vector<Chunk> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = {src[i] * chunk, dst[i] * chunk, chunk};
  return out;
}

std::uint64_t checksum(const std::uint8_t* base, const std::vector<Chunk>& chunks, bool dst) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const Chunk& c : chunks)
    XXH3_64bits_update(st, base + (dst ? c.dst_offset : c.src_offset), c.length);
  const auto h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

/// Where the two processes leave what the other needs.
struct Meeting {
  std::optional<LaunchInfo> launch;
  std::filesystem::path dir;
  pid_t child{-1};  // the target this program started

  void publish(const std::string& key, const std::vector<std::uint8_t>& value) const {
    if (launch) return bootstrap::publish(*launch, key, to_hex(value));
    const auto tmp = dir / (key + ".tmp");
    std::ofstream(tmp) << to_hex(value);
    std::filesystem::rename(tmp, dir / key);
  }
  std::vector<std::uint8_t> lookup(const std::string& key, int from) const {
    if (launch) return from_hex(bootstrap::lookup(*launch, key, from, 60s));
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (!std::filesystem::exists(dir / key)) {
      if (child > 0 && ::waitpid(child, nullptr, WNOHANG) == child) {
        SPILLWAY_FAIL("the target process exited before publishing " + key, comm_error);
      }
      SPILLWAY_EXPECTS(std::chrono::steady_clock::now() < until,
                       "rendezvous: " + (dir / key).string() + " did not appear in 60 s",
                       comm_error);
      std::this_thread::sleep_for(10ms);
    }
    std::ifstream in(dir / key);
    std::string s;
    in >> s;
    return from_hex(s);
  }
};

enum : std::uint8_t { kVerify = 1, kImms = 2, kQuit = 3 };

std::vector<std::uint8_t> message(std::uint8_t kind, std::uint64_t a = 0) {
  std::vector<std::uint8_t> m(9);
  m[0] = kind;
  std::memcpy(m.data() + 1, &a, 8);
  return m;
}
std::uint64_t word(const std::vector<std::uint8_t>& m) {
  SPILLWAY_EXPECTS(m.size() == 9,
                   "bench: a control message of " + std::to_string(m.size()) + " bytes",
                   corrupt_data_error);
  std::uint64_t v = 0;
  std::memcpy(&v, m.data() + 1, 8);
  return v;
}

/// The written-into side: registers its region, says where it is, and answers the
/// initiator's questions until told to stop.
int run_target(const Options& o, TransferEngine& engine, const Meeting* meeting,
               std::atomic<bool>* ready = nullptr, RemoteRegion* out_region = nullptr) {
  const std::size_t bytes = region_bytes(o);
  Memory mem(bytes, o.dst);
  std::memset(mem.host, 0, bytes);
  mem.upload();
  const Region region = engine.register_memory(mem.ptr, bytes, o.dst.type, device_of(o.dst));
  const RemoteRegion remote = engine.export_region(region, 0, bytes);
  if (meeting != nullptr) {
    meeting->publish("transfer-target-meta", engine.metadata());
    meeting->publish("transfer-target-region", remote.to_bytes());
  } else {
    *out_region = remote;
    *ready = true;
  }
  // The callback outlives this function (the engine keeps it): it holds its flag.
  auto peer_failed = std::make_shared<std::atomic<bool>>(false);
  engine.on_peer_failure([peer_failed](PeerId, const std::string&) { *peer_failed = true; });
  for (;;) {
    auto m = engine.recv_control(1000ms);
    if (!m) {
      if (*peer_failed) {
        std::cerr << "spillway-bench-transfer (target): the initiator is gone\n";
        return 1;
      }
      continue;
    }
    const std::uint8_t kind = m->second.empty() ? 0 : m->second[0];
    if (kind == kQuit) break;
    std::uint64_t answer = 0;
    if (kind == kVerify) {
      mem.download();
      answer = checksum(mem.host, layout(o, word(m->second)), true);
    } else if (kind == kImms) {  // wait for the count the initiator sent, then add any extra
      const std::uint64_t w = word(m->second);
      const auto imm = static_cast<std::uint32_t>(w >> 32);
      const auto count = static_cast<std::uint32_t>(w);
      const bool all = engine.expect_imm(imm, count, Deadline::in(30s)).wait() == Status::ok;
      answer = (all ? count : 0) + engine.imm_count(imm);
    }
    engine.send_control(m->first, message(kind, answer));
  }
  engine.deregister_memory(region);
  return 0;
}

std::uint64_t ask(TransferEngine& engine, PeerId peer, std::uint8_t kind, std::uint64_t arg) {
  engine.send_control(peer, message(kind, arg));
  auto reply = engine.recv_control(60s);
  SPILLWAY_EXPECTS(reply.has_value(), "bench: the target did not answer in 60 s", comm_error);
  return word(reply->second);
}

struct Stats {
  double median{0}, min{0}, max{0};
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {cli::median(v), v.front(), v.back()};
}

/// Seconds of one write of `chunks`, waited (by spin_wait where `spin`); throws unless it
/// ends ok.
double timed_write(TransferEngine& engine, const Region& src, const RemoteRegion& dst,
                   std::span<const Chunk> chunks, std::optional<std::uint32_t> imm, bool spin) {
  const auto t0 = std::chrono::steady_clock::now();
  const Ticket t = engine.write(src, dst, chunks, imm, Deadline::in(120s));
  const Status s = spin ? t.spin_wait() : t.wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SPILLWAY_LOG(trace, "bench: a write of " << chunks.size() << " chunks took " << secs * 1e6
                                           << " us from write() to the end of wait()");
  SPILLWAY_EXPECTS(s == Status::ok,
                   std::string("bench: a write ended ") + to_string(s) + ": " + t.message(),
                   comm_error);
  return secs;
}

/// The chunk-by-chunk peer: for cuda_ipc an engine of its own that copies a batch with a
/// cudaMemcpyAsync per chunk; else the same engine, a write per chunk, each waited.
struct PeerPath {
  std::unique_ptr<TransferEngine> engine;
  Region src;
  const char* what{"a write per chunk, each waited"};
};

int run_initiator(const Options& o, TransferEngine& engine, PeerId peer, const RemoteRegion& dst,
                  const std::vector<std::uint8_t>& target_meta) {
  const std::size_t bytes = region_bytes(o);
  Memory mem(bytes, o.src);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(mem.host + i, &v, 8);
  }
  mem.upload();
  const Region src = engine.register_memory(mem.ptr, bytes, o.src.type, device_of(o.src));
  PeerPath by_chunk;
  if (o.backend == "cuda_ipc") {
    EngineOptions e = engine_options(o);
    e.ipc_copy = "per_chunk";
    by_chunk.engine = std::make_unique<TransferEngine>(e);
    by_chunk.engine->add_peer(target_meta);
    by_chunk.src = by_chunk.engine->register_memory(mem.ptr, bytes, o.src.type, device_of(o.src));
    by_chunk.what = "a cudaMemcpyAsync per chunk";
  }
  std::printf(
      "spillway-bench-transfer: %s%s, %s -> %s, %s layout, %d runs (median [min, max]), "
      "ceiling: one contiguous write of the same bytes (of contig: the median of each run's "
      "ratio to the contiguous write beside it), peer: %s (%zu chunks a run), each write "
      "waited by %s\n",
      engine.backend_name().c_str(),
      o.backend == "cuda_ipc" ? (" (" + o.ipc_copy + " copies)").c_str() : "", o.src.name(),
      o.dst.name(), o.layout.c_str(), o.runs, by_chunk.what, o.peer_chunks,
      o.spin ? "spinning (Ticket::spin_wait)" : "sleeping (Ticket::wait)");
  std::printf("%-8s %7s %9s %-20s %7s %11s %8s %9s %7s %9s %8s %s\n", "chunk", "chunks", "batch",
              "GB/s", "Gbit/s", "contig GB/s", "of contig", "Mchunk/s", "EAGAIN", "peer GB/s",
              "x peer", "verify");
  int failures = 0;
  std::uint32_t imm = 0;
  for (const std::size_t chunk : o.chunk_sizes) {
    ++imm;
    const auto chunks = layout(o, chunk);
    const std::size_t total = chunk * chunks.size();
    const std::vector<Chunk> contiguous{{0, 0, total}};
    const std::size_t peer_n = std::min(o.peer_chunks, chunks.size());
    std::vector<double> batched;
    std::vector<double> contig;
    std::vector<double> per_chunk;
    std::vector<double> of_contig;  // each run against the contiguous write just after it
    const auto eagain0 = engine.counters().eagain;
    for (int r = 0; r < o.warmups + o.runs; ++r) {
      const double b = timed_write(engine, src, dst, chunks, imm, o.spin);
      const double c = timed_write(engine, src, dst, contiguous, std::nullopt, o.spin);
      double p = 0;
      if (by_chunk.engine) {
        p = timed_write(*by_chunk.engine, by_chunk.src, dst, std::span(chunks).first(peer_n),
                        std::nullopt, o.spin);
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < peer_n; ++i) {
          timed_write(engine, src, dst, std::span(chunks).subspan(i, 1), std::nullopt, o.spin);
        }
        p = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      if (r < o.warmups) continue;
      batched.push_back(static_cast<double>(total) / b / 1e9);
      contig.push_back(static_cast<double>(total) / c / 1e9);
      of_contig.push_back(c / b);
      per_chunk.push_back(static_cast<double>(chunk * peer_n) / p / 1e9);
    }
    const auto eagain = engine.counters().eagain - eagain0;
    // The contiguous write overwrote the destination; write the batch once more to verify.
    timed_write(engine, src, dst, chunks, imm, o.spin);
    std::string verdict = "-";
    const auto batches = static_cast<std::uint64_t>(o.warmups + o.runs + 1);
    const std::uint64_t imms = ask(engine, peer, kImms, std::uint64_t{imm} << 32 | batches);
    if (imms != batches) {
      verdict = "IMM COUNT " + std::to_string(imms) + " != " + std::to_string(batches);
      ++failures;
    } else if (o.verify) {
      const bool same = ask(engine, peer, kVerify, chunk) == checksum(mem.host, chunks, false);
      verdict = same ? "ok" : "MISMATCH";
      failures += same ? 0 : 1;
    }
    const Stats b = stats(batched);
    const Stats c = stats(contig);
    const Stats p = stats(per_chunk);
    char spread[64];
    std::snprintf(spread, sizeof(spread), "%.3f [%.3f, %.3f]", b.median, b.min, b.max);
    std::printf("%-8s %7zu %9s %-20s %7.2f %11.3f %8.3f %9.3f %7llu %9.4f %8.1f %s\n",
                format_bytes(static_cast<double>(chunk)).c_str(), chunks.size(),
                format_bytes(static_cast<double>(total)).c_str(), spread, b.median * 8, c.median,
                cli::median(of_contig), b.median * 1e9 / static_cast<double>(chunk) / 1e6,
                static_cast<unsigned long long>(eagain), p.median, b.median / p.median,
                verdict.c_str());
    std::fflush(stdout);
  }
  engine.send_control(peer, message(kQuit));
  engine.deregister_memory(src);
  if (by_chunk.engine) by_chunk.engine->deregister_memory(by_chunk.src);
  return failures == 0 ? 0 : 1;
}

int main_(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (o.src.type != MemoryType::HOST || o.dst.type != MemoryType::HOST) {
    if (!cuda::is_available()) usage("--src/--dst pinned, shared or device needs a GPU");
  }
  if (o.backend == "loopback") {  // two engines of this process
    TransferEngine target(engine_options(o));
    TransferEngine initiator(engine_options(o));
    std::atomic<bool> ready{false};
    RemoteRegion region;
    int target_rc = 0;
    std::thread t([&] { target_rc = run_target(o, target, nullptr, &ready, &region); });
    while (!ready) std::this_thread::sleep_for(1ms);
    const PeerId peer = initiator.add_peer(target.metadata());
    const int rc = run_initiator(o, initiator, peer, region, target.metadata());
    t.join();
    return rc | target_rc;
  }
  Meeting meeting;
  meeting.launch = bootstrap::from_environment();
  bool target = o.role == "target";
  std::filesystem::path own_dir;
  struct RemoveDir {  // the rendezvous directory this program made goes, also on error
    std::filesystem::path& dir;
    ~RemoveDir() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{own_dir};
  if (meeting.launch) {
    if (meeting.launch->nranks != 2)
      usage("spillway-run with 2 ranks, not " + std::to_string(meeting.launch->nranks));
    target = meeting.launch->rank == 1;
  } else if (!o.rendezvous.empty()) {
    meeting.dir = o.rendezvous;
    std::filesystem::create_directories(meeting.dir);
  } else {  // start a target process of our own
    char tmpl[] = "/tmp/spillway-bench-transfer-XXXXXX";
    SPILLWAY_EXPECTS(::mkdtemp(tmpl) != nullptr, "mkdtemp failed", io_error);
    own_dir = meeting.dir = tmpl;
    meeting.child = ::fork();
    if (meeting.child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<std::string> args(argv, argv + argc);
      args.insert(args.end(), {"--rendezvous", own_dir.string(), "--role", "target"});
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv("/proc/self/exe", cargs.data());
      ::_exit(127);
    }
  }
  int rc = 0;
  {
    TransferEngine engine(engine_options(o));
    if (target) return run_target(o, engine, &meeting);
    const auto meta = meeting.lookup("transfer-target-meta", 1);
    const auto region = RemoteRegion::from_bytes(meeting.lookup("transfer-target-region", 1));
    const PeerId peer = engine.add_peer(meta);
    rc = run_initiator(o, engine, peer, region, meta);
  }
  if (meeting.child > 0) {
    int status = 0;
    ::waitpid(meeting.child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "spillway-bench-transfer: " << e.what() << "\n";
    return 1;
  }
}
