// Google Benchmark for the table layer on the CPU: hash partitioning, partition_and_pack,
// split_and_pack and unpack_and_concat over 10 int32 columns, at 1..N threads. Each figure is
// printed beside a peer measured in the same run: a multi-threaded memcpy of the same bytes
// with the same thread count (read + write, like the operations), and the speed-up over the
// single-thread run of the same operation (also measured in alternating pairs: speedup_paired).
#include <spillway/spillway.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

using namespace spillway;

namespace {

using Clock = std::chrono::steady_clock;

struct Fixture {
  BufferResource br;
  Table table;
  explicit Fixture(std::size_t rows) : br(config()), table(make(rows)) {}
  static BufferResourceConfig config() {
    auto c = BufferResourceConfig::from_options();
    c.use_gpu = false;
    return c;
  }
  Table make(std::size_t rows) {
    RandomTableOptions o;
    o.rows = rows;
    o.types = std::vector<DataType>(10, TypeId::INT32);
    return random_table(o, br);
  }
};

Fixture& fixture() {
  static Fixture f(std::size_t{1} << 23);  // 8 Mi rows x 10 int32 = 320 MiB
  return f;
}

/// GB/s of a memcpy of `bytes` split over `threads` threads (median of 5), into warm memory.
double memcpy_gbps(std::size_t bytes, std::size_t threads) {
  static std::map<std::size_t, double> cache;
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  std::vector<std::byte> src(bytes, std::byte{1});
  std::vector<std::byte> dst(bytes, std::byte{2});
  std::vector<double> runs;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const std::size_t a = bytes * t / threads;
        const std::size_t b = bytes * (t + 1) / threads;
        std::memcpy(dst.data() + a, src.data() + a, b - a);
      });
    }
    for (auto& th : ts) th.join();
    runs.push_back(static_cast<double>(bytes) /
                   std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return cache[threads] = runs[2];
}

std::map<std::string, double>& single_thread_gbps() {
  static std::map<std::string, double> m;
  return m;
}

/// The speed-up over one thread measured in pairs: one thread, then `threads`, five times, the
/// median of the five ratios. `speedup` divides by the one-thread benchmark's figure, taken
/// seconds earlier; on a shared machine the load between the two moved it by +-20%.
template <typename F>
double paired_speedup(Fixture& f, std::size_t threads, F& op) {
  const auto seconds = [&](std::size_t n) {
    const auto t0 = Clock::now();
    op(f, n);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<double> ratios;
  for (int i = 0; i < 5; ++i) {
    const double one = seconds(1);
    ratios.push_back(one / seconds(threads));
  }
  std::sort(ratios.begin(), ratios.end());
  return ratios[2];
}

template <typename F>
void run(benchmark::State& state, const std::string& name, F&& op) {
  auto& f = fixture();
  const auto threads = static_cast<std::size_t>(state.range(0));
  const std::size_t bytes = f.table.view().total_bytes();
  op(f, threads);  // warm up: pools, page faults
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    op(f, threads);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  const double gbps =
      static_cast<double>(bytes) * static_cast<double>(state.iterations()) / total / 1e9;
  if (threads == 1) single_thread_gbps()[name] = gbps;
  const double peer = memcpy_gbps(bytes, threads);
  state.counters["GB/s"] = gbps;
  state.counters["memcpy_GB/s"] = peer;
  state.counters["ratio"] = gbps / peer;
  if (auto it = single_thread_gbps().find(name); it != single_thread_gbps().end()) {
    state.counters["speedup"] = gbps / it->second;
    if (threads > 1) state.counters["speedup_paired"] = paired_speedup(f, threads, op);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

const std::vector<std::size_t> key0{0};

void BM_HashPartition(benchmark::State& state) {
  run(state, "hash_partition", [](Fixture& f, std::size_t threads) {
    auto p = hash_partition(f.table.view(), key0, 64, f.br, 0, threads);
    benchmark::DoNotOptimize(p.offsets.data());
  });
}

/// hash_partition into 1024 partitions (the CPU's many-partition figure).
void BM_HashPartition1024(benchmark::State& state) {
  run(state, "hash_partition_1024", [](Fixture& f, std::size_t threads) {
    auto p = hash_partition(f.table.view(), key0, 1024, f.br, 0, threads);
    benchmark::DoNotOptimize(p.offsets.data());
  });
}

/// hash_partition into 4096 partitions (the CPU path scales up to 4096).
void BM_HashPartition4096(benchmark::State& state) {
  run(state, "hash_partition_4096", [](Fixture& f, std::size_t threads) {
    auto p = hash_partition(f.table.view(), key0, 4096, f.br, 0, threads);
    benchmark::DoNotOptimize(p.offsets.data());
  });
}

void BM_PartitionAndPack(benchmark::State& state) {
  run(state, "partition_and_pack", [](Fixture& f, std::size_t threads) {
    auto p = partition_and_pack(f.table.view(), key0, 64, f.br, 0, threads);
    benchmark::DoNotOptimize(p.data());
  });
}

void BM_SplitAndPack(benchmark::State& state) {
  run(state, "split_and_pack", [](Fixture& f, std::size_t /*threads*/) {
    std::vector<std::size_t> splits;
    const std::size_t rows = f.table.num_rows();
    for (std::size_t i = 1; i < 64; ++i) splits.push_back(rows * i / 64);
    auto p = split_and_pack(f.table.view(), splits, f.br);
    benchmark::DoNotOptimize(p.data());
  });
}

void BM_Checksum(benchmark::State& state) {
  run(state, "checksum", [](Fixture& f, std::size_t threads) {
    benchmark::DoNotOptimize(checksum(f.table.view(), threads));
  });
}

void thread_args(benchmark::internal::Benchmark* b) {
  const auto hw = std::max(1U, std::thread::hardware_concurrency());
  for (unsigned t = 1; t <= hw; t *= 2) b->Arg(t);
  if ((hw & (hw - 1)) != 0) b->Arg(hw);
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

BENCHMARK(BM_HashPartition)->Apply(thread_args);
BENCHMARK(BM_HashPartition1024)->Apply(thread_args);
BENCHMARK(BM_HashPartition4096)->Apply(thread_args);
BENCHMARK(BM_PartitionAndPack)->Apply(thread_args);
// split_and_pack runs its parts on the whole pool: compare with a memcpy on every core.
BENCHMARK(BM_SplitAndPack)
    ->Apply([](benchmark::internal::Benchmark* b) {
      b->Arg(std::max(1U, std::thread::hardware_concurrency()));
    })
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK(BM_Checksum)->Apply(thread_args);

}  // namespace

BENCHMARK_MAIN();
