// Google Benchmark for the table layer on the GPU: split_and_pack, partition_and_pack (with
// hashing) and hash_partition of 10 int32 columns (1.25 GiB) on one GPU, and partition_and_pack
// of other tables of 40 bytes a row (0.31 GiB): an int64 key, a string column, Zipf(1.2) keys.
// Each figure is printed beside the device copy ceiling measured in the same run
// (cudaMemcpyAsync device to device of the same bytes, counting bytes read + written), as
// `fraction`; `peak_extra` is the device memory the operation allocated at its peak (outputs
// and scratch) over the input size. BM_Checksum: the GPU checksum of the table whole and in
// slices (the shuffle benchmark's check per partition).
#include <spillway/spillway.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

using namespace spillway;

namespace {

using Clock = std::chrono::steady_clock;

/// The tables: 10 int32 columns, and the variants (each 2^23 rows of about 40 bytes).
enum class Input { int32x10, int64_key, with_string, zipf };

struct Fixture {
  BufferResource br{config()};
  OwningStream stream;
  Table table;
  std::size_t bytes;
  double ceiling_tbps;  // device copy, read + write

  explicit Fixture(Input in) : table(make(in, br, stream)), bytes{table.total_bytes()} {
    ceiling_tbps = copy_tbps();
  }
  static BufferResourceConfig config() {
    auto c = BufferResourceConfig::from_options();
    c.device_allocator = DeviceAllocator::pool;  // as the shuffle benchmark's -m pool
    return c;
  }
  static Table make(Input in, BufferResource& br, Stream stream) {
    RandomTableOptions o;
    o.rows = std::size_t{1} << 23;
    o.types = std::vector<DataType>(10, TypeId::INT32);
    switch (in) {
      case Input::int32x10:
        o.rows = std::size_t{1} << 25;  // 32 Mi rows x 10 int32 = 1.25 GiB
        break;
      case Input::int64_key:  // 8 + 8 x 4 bytes
        o.types = std::vector<DataType>(9, TypeId::INT32);
        o.types[0] = TypeId::INT64;
        break;
      case Input::with_string:  // 4 + (4 + 8 on average) + 7 x 4 bytes
        o.types = std::vector<DataType>(9, TypeId::INT32);
        o.types[1] = TypeId::STRING;
        break;
      case Input::zipf:
        o.zipf = 1.2;
        o.key_cardinality = std::size_t{1} << 20;
        break;
    }
    Table host = random_table(o, br);
    Table dev = copy_table(host, MemoryType::DEVICE, br, stream);
    stream.synchronize();
    return dev;
  }
  /// Median of 10 device-to-device copies of the table's bytes, in TB/s of bytes read + written.
  double copy_tbps() {
    auto a = br.allocate(MemoryType::DEVICE, bytes, stream);
    auto b = br.allocate(MemoryType::DEVICE, bytes, stream);
    stream.view().synchronize();
    cuda::memset_device(a->data(), 1, bytes);
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

/// One fixture at a time (made on first use, the previous one freed).
Fixture& fixture(Input in = Input::int32x10) {
  static std::unique_ptr<Fixture> f;
  static Input made{};
  if (!f || made != in) {
    f.reset();
    f = std::make_unique<Fixture>(in);
    made = in;
  }
  return *f;
}

/// `traffic`: the bytes the operation must move, in table sizes (2: read + write; 1: read).
template <typename F>
void run(benchmark::State& state, F&& op, Input in = Input::int32x10, double traffic = 2.0) {
  auto& f = fixture(in);
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
  const double tbps = traffic * static_cast<double>(f.bytes) *
                      static_cast<double>(state.iterations()) / total / 1e12;
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

/// partition_and_pack of the other tables: range(0) partitions, range(1) the Input.
void BM_PartitionAndPackOf(benchmark::State& state) {
  const auto in = static_cast<Input>(state.range(1));
  state.SetLabel(in == Input::int64_key     ? "int64 key"
                 : in == Input::with_string ? "a string column"
                                            : "zipf 1.2 keys");
  run(
      state,
      [&](Fixture& f) {
        auto parts = gpu::partition_and_pack(
            f.table.view(), key0, static_cast<std::size_t>(state.range(0)), f.br, f.stream);
        benchmark::DoNotOptimize(parts.data());
      },
      in);
}

void BM_HashPartition(benchmark::State& state) {
  run(state, [&](Fixture& f) {
    auto p = gpu::hash_partition(f.table.view(), key0, static_cast<std::size_t>(state.range(0)),
                                 f.br, f.stream);
    benchmark::DoNotOptimize(p.offsets.data());
  });
}

/// The GPU checksum of the table in range(0) row slices, added into one slot (as the shuffle
/// benchmark sums its partitions: 180 slices are ~7.5 MB each, the size of a partition at
/// `-o 512`). It only reads, so `fraction` is its bytes read against the copy's bytes moved.
void BM_Checksum(benchmark::State& state) {
  auto sums = std::shared_ptr<Buffer>{};
  run(
      state,
      [&](Fixture& f) {
        if (!sums) sums = f.br.allocate(MemoryType::DEVICE, sizeof(TableChecksum), f.stream);
        const auto n = static_cast<std::size_t>(state.range(0));
        const std::size_t rows = f.table.num_rows();
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t first = rows * i / n / 16 * 16;  // 16-byte aligned slices
          const std::size_t end = i + 1 == n ? rows : rows * (i + 1) / n / 16 * 16;
          TableView v = f.table.view();
          for (ColumnView& c : v.columns) {  // (the table has no nulls)
            c.data = static_cast<const std::byte*>(c.data) + first * size_of(c.type);
            c.size = end - first;
          }
          gpu::add_checksum(v, *sums, 0, f.br, f.stream);
        }
      },
      Input::int32x10, 1.0);
}

/// Many small chunks, as in the shuffle's `-p 64 -o 64`: 4 of the int32
/// columns, 781,250 rows (12.5 MB), split into range(0) parts and packed, then all parts unpacked
/// and concatenated back into one table (what a rank does with its partitions' chunks). Host
/// time per part of each step (`pack_us`, `concat_us`, each step synchronized), beside the
/// device copy of the same bytes (`copy_us`).
void BM_SmallParts(benchmark::State& state) {
  auto& f = fixture();
  if (!f.br.is_live(MemoryType::DEVICE)) {
    state.SkipWithError("no GPU");
    return;
  }
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t rows = 781250;
  TableView v;
  for (std::size_t c = 0; c < 4; ++c) {
    ColumnView col = f.table.view().columns[c];
    col.size = rows;
    v.columns.push_back(col);
    v.names.push_back(f.table.view().names[c]);
  }
  std::vector<std::size_t> splits;
  for (std::size_t i = 1; i < n; ++i) splits.push_back(rows * i / n);
  const auto seconds = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double pack = 0;
  double concat = 0;
  double copy = 0;
  const std::size_t bytes = rows * 4 * sizeof(std::int32_t);
  auto dst = f.br.allocate(MemoryType::DEVICE, bytes, f.stream);
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto parts = gpu::split_and_pack(v, splits, f.br, f.stream);
    f.stream.view().synchronize();
    const double p = seconds(t0);
    t0 = Clock::now();
    Table out = gpu::unpack_and_concat(std::move(parts), f.br, f.stream);
    f.stream.view().synchronize();
    const double c = seconds(t0);
    pack += p;
    concat += c;
    state.SetIterationTime(p + c);
    t0 = Clock::now();
    std::size_t at = 0;
    for (const ColumnView& c : v.columns) {
      cuda::memcpy_async(dst->data() + at, c.data, c.data_bytes(), f.stream);
      at += c.data_bytes();
    }
    f.stream.view().synchronize();
    copy += seconds(t0);
    benchmark::DoNotOptimize(out.num_rows());
  }
  const auto per = [&](double s) {
    return 1e6 * s / static_cast<double>(state.iterations()) / static_cast<double>(n);
  };
  state.counters["pack_us"] = per(pack);
  state.counters["concat_us"] = per(concat);
  state.counters["copy_us"] = 1e6 * copy / static_cast<double>(state.iterations());
}

void args(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
}

BENCHMARK(BM_DeviceCopy)->Apply(args);
BENCHMARK(BM_SplitAndPack)->Arg(2)->Arg(8)->Arg(64)->Apply(args);
BENCHMARK(BM_Checksum)->Arg(1)->Arg(180)->Arg(1440)->Apply(args);
BENCHMARK(BM_SmallParts)->Arg(128)->Arg(1024)->Apply(args);
BENCHMARK(BM_PartitionAndPack)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->Apply(args);
BENCHMARK(BM_HashPartition)->Arg(8)->Arg(64)->Arg(1024)->Arg(4096)->Apply(args);
BENCHMARK(BM_PartitionAndPackOf)
    ->ArgsProduct({{64, 1024, 2048, 4096},  // (google benchmark varies the first fastest)
                   {static_cast<int>(Input::int64_key), static_cast<int>(Input::with_string),
                    static_cast<int>(Input::zipf)}})
    ->Apply(args);

}  // namespace

BENCHMARK_MAIN();
