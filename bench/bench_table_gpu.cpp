// Google Benchmark for the table layer on the GPU: split_and_pack, partition_and_pack (with
// hashing) and hash_partition of 10 int32 columns (1.25 GiB) on one GPU. Each figure is printed
// beside the device copy ceiling measured in the same run (cudaMemcpyAsync device to device of
// the same bytes, counting bytes read + written), as `fraction`; `peak_extra` is the device
// memory the operation allocated at its peak (outputs and scratch) over the input size.
#include <spillway/spillway.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

using namespace spillway;

namespace {

using Clock = std::chrono::steady_clock;

struct Fixture {
  BufferResource br{config()};
  OwningStream stream;
  Table table;
  std::size_t bytes;
  double ceiling_tbps;  // device copy, read + write

  Fixture() : table(make(br, stream)), bytes{table.view().total_bytes()} {
    ceiling_tbps = copy_tbps();
  }
  static BufferResourceConfig config() {
    auto c = BufferResourceConfig::from_options();
    c.device_allocator = DeviceAllocator::pool;  // as the shuffle benchmark's -m pool
    return c;
  }
  static Table make(BufferResource& br, Stream stream) {
    RandomTableOptions o;
    o.rows = std::size_t{1} << 25;  // 32 Mi rows x 10 int32 = 1.25 GiB
    o.types = std::vector<TypeId>(10, TypeId::INT32);
    Table host = random_table(o, br);
    Table dev = copy_table(host, MemoryType::DEVICE, br, stream);
    stream.synchronize();
    return dev;
  }
  /// Median of 10 device-to-device copies of the table's bytes, in TB/s of bytes read + written.
  double copy_tbps() {
    auto a = br.allocate(MemoryType::DEVICE, bytes, stream);
    auto b = br.allocate(MemoryType::DEVICE, bytes, stream);
    cuda::memcpy_async(a->data(), table.view().columns[0].data, bytes / 10, stream);
    std::vector<double> runs;
    for (int i = 0; i < 11; ++i) {
      stream.view().synchronize();
      const auto t0 = Clock::now();
      cuda::memcpy_async(b->data(), a->data(), bytes, stream);
      stream.view().synchronize();
      if (i > 0) runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    return 2.0 * static_cast<double>(bytes) / runs[runs.size() / 2] / 1e12;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

template <typename F>
void run(benchmark::State& state, F&& op) {
  auto& f = fixture();
  if (!f.br.is_live(MemoryType::DEVICE)) {
    state.SkipWithError("no GPU");
    return;
  }
  op(f);  // warm up: the pool, the kernels
  f.stream.view().synchronize();
  const std::size_t before = f.br.used(MemoryType::DEVICE);
  f.br.reset_peak(MemoryType::DEVICE);
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    op(f);
    f.stream.view().synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  const double tbps =
      2.0 * static_cast<double>(f.bytes) * static_cast<double>(state.iterations()) / total / 1e12;
  state.counters["TB/s"] = tbps;
  state.counters["copy_TB/s"] = f.ceiling_tbps;
  state.counters["fraction"] = tbps / f.ceiling_tbps;
  state.counters["peak_extra"] =
      static_cast<double>(f.br.peak(MemoryType::DEVICE) - before) / static_cast<double>(f.bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(f.bytes) * state.iterations());
}

const std::vector<std::size_t> key0{0};

void BM_DeviceCopy(benchmark::State& state) {
  run(state, [](Fixture& f) {
    auto out = f.br.allocate(MemoryType::DEVICE, f.bytes, f.stream);
    std::size_t at = 0;
    for (const ColumnView& c : f.table.view().columns) {
      cuda::memcpy_async(out->data() + at, c.data, c.data_bytes(), f.stream);
      at += c.data_bytes();
    }
  });
}

void BM_SplitAndPack(benchmark::State& state) {
  run(state, [&](Fixture& f) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::vector<std::size_t> splits;
    for (std::size_t i = 1; i < n; ++i) splits.push_back(f.table.num_rows() * i / n);
    auto parts = gpu::split_and_pack(f.table.view(), splits, f.br, f.stream);
    benchmark::DoNotOptimize(parts.data());
  });
}

void BM_PartitionAndPack(benchmark::State& state) {
  run(state, [&](Fixture& f) {
    auto parts = gpu::partition_and_pack(f.table.view(), key0,
                                         static_cast<std::size_t>(state.range(0)), f.br, f.stream);
    benchmark::DoNotOptimize(parts.data());
  });
}

void BM_HashPartition(benchmark::State& state) {
  run(state, [&](Fixture& f) {
    auto p = gpu::hash_partition(f.table.view(), key0, static_cast<std::size_t>(state.range(0)),
                                 f.br, f.stream);
    benchmark::DoNotOptimize(p.offsets.data());
  });
}

void args(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
}

BENCHMARK(BM_DeviceCopy)->Apply(args);
BENCHMARK(BM_SplitAndPack)->Arg(2)->Arg(8)->Arg(64)->Apply(args);
BENCHMARK(BM_PartitionAndPack)->Arg(2)->Arg(4)->Arg(8)->Arg(64)->Arg(1024)->Arg(4096)->Apply(args);
BENCHMARK(BM_HashPartition)->Arg(8)->Arg(64)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
