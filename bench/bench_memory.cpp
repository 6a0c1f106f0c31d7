// Google Benchmark for the memory layer: allocation per allocator and copies between tiers.
// Every figure is printed beside a ceiling measured in the same run:
//  - allocations: the raw allocator call without spillway's accounting (ratio = raw / ours);
//  - copies involving the GPU: a raw cudaMemcpyAsync between the same kinds of memory, and
//    the ~55.3 GB/s PCIe 5 x16 ceiling of a pinned copy;
//  - host to host: std::memcpy between two warm buffers;
//  - spill to disk and back: `dd` writing / reading the same number of bytes on the same file
//    system (page cache, no fsync, as spilling), run by the benchmark itself.
// Run with --benchmark_repetitions=N to get medians; scripts/bench-table.py prints the table.
#include <spillway/spillway.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace spillway;

namespace {

using Clock = std::chrono::steady_clock;
constexpr double pcie_ceiling_gbps = 55.3;  // PCIe 5 x16, pinned <-> device, as measured

std::string spill_dir() {
  const char* d = std::getenv("SPILLWAY_BENCH_SPILL_DIR");
  return d != nullptr ? d : options::get().spill_dir;
}

BufferResourceConfig config(DeviceAllocator a = DeviceAllocator::async) {
  auto c = BufferResourceConfig::from_options();
  c.device_allocator = a;
  c.device_pool_size = Limit::bytes(4 * GiB);
  c.spill_dir = spill_dir();
  return c;
}

void fill(Buffer& host) {
  auto* p = reinterpret_cast<std::uint64_t*>(host.data());
  std::uint64_t x = 88172645463325252ULL;
  for (std::size_t i = 0; i < host.size() / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = x;
  }
}

/// A buffer of tier `t` holding random bytes (never time on zeros).
std::unique_ptr<Buffer> random_buffer(BufferResource& br, MemoryType t, std::size_t n) {
  auto host = br.allocate(MemoryType::HOST, n);
  fill(*host);
  return br.move(std::move(host), t, br.stream());
}

/// GB/s of `iters` raw cudaMemcpyAsync between the same kinds of memory, event-timed.
double raw_copy_gbps(BufferResource& br, MemoryType from, MemoryType to, std::size_t n) {
  auto src = random_buffer(br, from, n);
  auto dst = br.allocate(to, n, br.stream());
  Stream s = br.stream();
  void* start = cuda::event_create();
  void* end = cuda::event_create();
  std::vector<double> runs;
  for (int i = 0; i < 12; ++i) {
    cuda::event_record(start, s);
    cuda::memcpy_async(dst->data(), src->data(), n, s);
    cuda::event_record(end, s);
    cuda::event_synchronize(end);
    if (i >= 2) runs.push_back(static_cast<double>(n) / (cuda::event_elapsed_ms(start, end) * 1e6));
  }
  cuda::event_destroy(start);
  cuda::event_destroy(end);
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

/// GB/s of std::memcpy between two warm host buffers of `n` bytes (median of 7).
double raw_memcpy_gbps(std::size_t n) {
  std::vector<std::byte> a(n, std::byte{1});
  std::vector<std::byte> b(n, std::byte{2});
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
    runs.push_back(static_cast<double>(n) /
                   std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

/// Runs dd and returns its GB/s (bytes over the seconds dd reports).
double dd_gbps(const std::string& args) {
  const std::string cmd = "dd " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char line[512];
  double bytes = 0;
  double secs = 0;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    // "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.5 s, 2.1 GB/s"
    const char* copied = std::strstr(line, "copied, ");
    if (copied != nullptr) {
      bytes = std::strtod(line, nullptr);
      secs = std::strtod(copied + 8, nullptr);
    }
  }
  ::pclose(p);
  return secs > 0 ? bytes / secs / 1e9 : 0;
}

/// dd write and read of `n` bytes in the spill directory's file system (median of 3 each).
std::pair<double, double> dd_ceilings(std::size_t n) {
  static std::optional<std::pair<double, double>> cached;
  if (cached) return *cached;
  const std::string file = spill_dir() + "/spillway-bench-dd.tmp";
  const std::size_t mib = n / MiB;
  std::vector<double> w;
  std::vector<double> r;
  for (int i = 0; i < 3; ++i) {
    w.push_back(dd_gbps("if=/dev/zero of=" + file + " bs=1M count=" + std::to_string(mib)));
    r.push_back(dd_gbps("if=" + file + " of=/dev/null bs=1M"));
    std::remove(file.c_str());
  }
  std::sort(w.begin(), w.end());
  std::sort(r.begin(), r.end());
  cached = std::make_pair(w[1], r[1]);
  return *cached;
}

void report(benchmark::State& state, std::size_t n, double seconds, double ceiling,
            const char* ceiling_name) {
  const double gbps =
      static_cast<double>(n) * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters[ceiling_name] = ceiling;
  state.counters["ratio"] = ceiling > 0 ? gbps / ceiling : 0;
  state.SetBytesProcessed(static_cast<std::int64_t>(n) * state.iterations());
}

// ---- copies between tiers -----------------------------------------------------------------

void BM_Copy(benchmark::State& state, MemoryType from, MemoryType to) {
  const auto n = static_cast<std::size_t>(state.range(0));
  BufferResource br(config());
  if (!br.is_live(from) || !br.is_live(to)) {
    state.SkipWithError("tier not available (no GPU)");
    return;
  }
  auto src = random_buffer(br, from, n);
  const bool gpu = (from == MemoryType::DEVICE || to == MemoryType::DEVICE) &&
                   from != MemoryType::DISK && to != MemoryType::DISK;
  double ceiling = 0;
  const char* ceiling_name = "ceil_GB/s";
  if (gpu) {
    ceiling = raw_copy_gbps(br, from, to, n);
    state.counters["vs_55.3"] = 0;  // filled below
  } else if (to == MemoryType::DISK) {
    ceiling = dd_ceilings(n).first;
    ceiling_name = "dd_GB/s";
  } else if (from == MemoryType::DISK) {
    ceiling = dd_ceilings(n).second;
    ceiling_name = "dd_GB/s";
  } else {
    ceiling = raw_memcpy_gbps(n);
    ceiling_name = "memcpy_GB/s";
  }
  // Warm up once (pools, page cache, spill file).
  {
    auto res = br.reserve(to, n);
    auto w = br.copy(*src, res, br.stream());
    w->wait();
  }
  double total = 0;
  for (auto _ : state) {
    auto res = br.reserve(to, n);
    const auto t0 = Clock::now();
    auto dst = br.copy(*src, res, br.stream());
    dst->wait();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  report(state, n, total, ceiling, ceiling_name);
  if (gpu) state.counters["vs_55.3"] = state.counters["GB/s"] / pcie_ceiling_gbps;
}

constexpr std::int64_t copy_bytes = 256 << 20;
constexpr std::int64_t disk_bytes = 1 << 30;

#define SPILLWAY_COPY_BENCH(FROM, TO, BYTES)                                   \
  BENCHMARK_CAPTURE(BM_Copy, FROM##_to_##TO, MemoryType::FROM, MemoryType::TO) \
      ->Arg(BYTES)                                                             \
      ->UseManualTime()                                                        \
      ->Unit(benchmark::kMillisecond)                                          \
      ->MinTime(0.5)

SPILLWAY_COPY_BENCH(PINNED_HOST, DEVICE, copy_bytes);
SPILLWAY_COPY_BENCH(DEVICE, PINNED_HOST, copy_bytes);
SPILLWAY_COPY_BENCH(HOST, DEVICE, copy_bytes);
SPILLWAY_COPY_BENCH(DEVICE, HOST, copy_bytes);
SPILLWAY_COPY_BENCH(DEVICE, DEVICE, copy_bytes);
SPILLWAY_COPY_BENCH(HOST, HOST, copy_bytes);
SPILLWAY_COPY_BENCH(HOST, DISK, disk_bytes);
SPILLWAY_COPY_BENCH(DISK, HOST, disk_bytes);
SPILLWAY_COPY_BENCH(PINNED_HOST, DISK, disk_bytes);
SPILLWAY_COPY_BENCH(DISK, PINNED_HOST, disk_bytes);
SPILLWAY_COPY_BENCH(DEVICE, DISK, disk_bytes);
SPILLWAY_COPY_BENCH(DISK, DEVICE, disk_bytes);

// ---- allocation -----------------------------------------------------------------------------

/// Allocate + free through the BufferResource (reserve, allocate, statistics, free) against the
/// raw allocator call alone.
void BM_Allocate(benchmark::State& state, MemoryType t, DeviceAllocator a) {
  const auto n = static_cast<std::size_t>(state.range(0));
  BufferResource br(config(a));
  if (!br.is_live(t)) {
    state.SkipWithError("tier not available (no GPU)");
    return;
  }
  Stream s = br.stream();
  // The raw allocator alone, same sizes, same stream.
  std::unique_ptr<MemoryResource> raw;
  if (t == MemoryType::DEVICE) {
    raw = std::make_unique<DeviceMemoryResource>(a, 4 * GiB);
  } else if (t == MemoryType::PINNED_HOST) {
    raw = std::make_unique<PinnedMemoryResource>();
  } else {
    raw = std::make_unique<HostMemoryResource>();
  }
  constexpr int raw_iters = 200;
  for (int i = 0; i < 10; ++i) raw->deallocate(raw->allocate(n, s), n, s);
  const auto r0 = Clock::now();
  for (int i = 0; i < raw_iters; ++i) raw->deallocate(raw->allocate(n, s), n, s);
  s.synchronize();
  const double raw_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - r0).count() / raw_iters;
  for (int i = 0; i < 10; ++i) (void)br.allocate(t, n, s);
  for (auto _ : state) {
    auto buf = br.allocate(t, n, s);
    benchmark::DoNotOptimize(buf->data());
  }
  s.synchronize();
  state.counters["raw_ns"] = raw_ns;
  state.counters["ns"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

#define SPILLWAY_ALLOC_BENCH(NAME, TIER, ALLOC)                                  \
  BENCHMARK_CAPTURE(BM_Allocate, NAME, MemoryType::TIER, DeviceAllocator::ALLOC) \
      ->Arg(1 << 20)                                                             \
      ->Arg(64 << 20)                                                            \
      ->Unit(benchmark::kMicrosecond)

SPILLWAY_ALLOC_BENCH(device_cuda, DEVICE, cuda);
SPILLWAY_ALLOC_BENCH(device_async, DEVICE, async);
SPILLWAY_ALLOC_BENCH(device_pool, DEVICE, pool);
SPILLWAY_ALLOC_BENCH(pinned_pool, PINNED_HOST, async);
SPILLWAY_ALLOC_BENCH(host, HOST, async);

}  // namespace

BENCHMARK_MAIN();
