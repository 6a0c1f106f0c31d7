// The GPU partitioning functions against the CPU ones: the same hashes, the same partitions,
// the same packed metadata and payload bytes, on random tables of every type with nulls and
// strings, from 1 to 70000 partitions; PartitionPlan's column groups. Skips without a GPU.
#include "gpu_table_fixture.hpp"

using namespace spillway;
using test::expect_same_bytes;
using test::expect_same_packs;

namespace {

/// GpuTable with the checks of whole partitionings against the CPU.
class GpuTablePartition : public test::GpuTable {
 protected:
  /// PartitionPlan's placement of every column of `d` (`h` on the device; no nulls) equals the
  /// CPU's hash_partition, the columns placed in groups out of order.
  void expect_plan_equals_cpu(const Table& h, const Table& d, std::span<const std::size_t> keys,
                              std::size_t parts) {
    ASSERT_EQ(d.num_columns(), 5U);
    gpu::PartitionPlan plan(d.view(), keys, parts, br, stream, 31);
    const PartitionedTable cpu = hash_partition(h.view(), keys, parts, br, 31);
    EXPECT_EQ(plan.offsets(), cpu.offsets);
    std::vector<std::unique_ptr<Buffer>> outs;
    std::vector<std::byte*> ptrs;
    for (std::size_t c = 0; c < d.num_columns(); ++c) {
      outs.push_back(br.allocate(MemoryType::DEVICE, d.column(c).data().size(), stream));
      ptrs.push_back(outs.back()->data());
    }
    plan.place(3, 5, std::span(ptrs).subspan(3, 2), stream);  // the last two first
    plan.place(0, 1, std::span(ptrs).subspan(0, 1), stream);
    plan.place(1, 3, std::span(ptrs).subspan(1, 2), stream);
    plan.place(2, 2, {}, stream);  // no columns: nothing
    for (std::size_t c = 0; c < d.num_columns(); ++c) {
      auto back = br.move(std::move(outs[c]), MemoryType::HOST, stream);
      back->wait();
      const ColumnView want = cpu.table.view().columns[c];
      ASSERT_EQ(back->size(), want.data_bytes());
      EXPECT_EQ(std::memcmp(back->data(), want.data, back->size()), 0) << "column " << c;
    }
  }
  /// partition_and_pack and hash_partition of `d` (on the GPU) give what they give of `h` on
  /// the CPU, byte for byte.
  void expect_packs_and_table_equal_cpu(const Table& h, const Table& d,
                                        const std::vector<std::size_t>& keys, std::size_t parts,
                                        std::uint32_t seed) {
    auto cpu = partition_and_pack(h.view(), keys, parts, br, seed);
    auto gpu_parts = gpu::partition_and_pack(d.view(), keys, parts, br, stream, seed);
    for (auto& p : gpu_parts) p = to_host(std::move(p));
    expect_same_packs(cpu, gpu_parts);
    const PartitionedTable cpu_table = hash_partition(h.view(), keys, parts, br, seed);
    const PartitionedTable gpu_table = gpu::hash_partition(d.view(), keys, parts, br, stream, seed);
    EXPECT_EQ(cpu_table.offsets, gpu_table.offsets);
    const Table back = on_host(gpu_table.table);
    expect_same_bytes(cpu_table.table.view(), back.view());
  }
};

}  // namespace

TEST_F(GpuTablePartition, RowHashesEqualTheHost) {
  const Table h = host_table(10000, 0.2);
  const Table d = on_device(h);
  for (std::uint32_t seed : {0U, 12345U}) {
    auto hashes = gpu::hash_rows(d.view(), seed, br, stream);
    hashes = br.move(std::move(hashes), MemoryType::HOST, stream);
    hashes->wait();
    std::vector<std::uint32_t> expected(h.num_rows());
    hash_rows(h.view(), 0, h.num_rows(), seed, expected.data());
    ASSERT_EQ(std::memcmp(hashes->data(), expected.data(), expected.size() * 4), 0);
  }
}

struct Case {
  std::size_t rows;
  std::size_t partitions;
  double nulls;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.rows) + "rows_" + std::to_string(info.param.partitions) +
         "parts_" + std::to_string(static_cast<int>(info.param.nulls * 100)) + "pct_null";
}

class GpuPartition : public GpuTablePartition, public ::testing::WithParamInterface<Case> {};

TEST_P(GpuPartition, PartitionAndPackEqualsTheCpuByteForByte) {
  const Case c = GetParam();
  const Table h = host_table(c.rows, c.nulls);
  const Table d = on_device(h);
  const std::vector<std::size_t> keys{2, 11, 9};  // int32, string, float64
  auto cpu = partition_and_pack(h.view(), keys, c.partitions, br, 99);
  auto gpu_parts = gpu::partition_and_pack(d.view(), keys, c.partitions, br, stream, 99);
  for (auto& p : gpu_parts) {
    ASSERT_EQ(p.payload->mem_type(), MemoryType::DEVICE);
    p = to_host(std::move(p));
  }
  expect_same_packs(cpu, gpu_parts);
}

TEST_P(GpuPartition, HashPartitionEqualsTheCpuByteForByte) {
  const Case c = GetParam();
  const Table h = host_table(c.rows, c.nulls, 11);
  const Table d = on_device(h);
  const std::vector<std::size_t> keys{0};
  auto cpu = hash_partition(h.view(), keys, c.partitions, br);
  auto gpu_part = gpu::hash_partition(d.view(), keys, c.partitions, br, stream);
  EXPECT_EQ(cpu.offsets, gpu_part.offsets);
  const Table back = on_host(gpu_part.table);
  expect_same_bytes(cpu.table.view(), back.view());
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, GpuPartition,
    ::testing::Values(Case{0, 4, 0.0}, Case{1, 1, 0.5}, Case{1000, 7, 0.1}, Case{5000, 64, 0.0},
                      Case{20000, 1000, 0.3},   // columns scattered (wide_partitions)
                      Case{300000, 600, 0.1},   // the same, over several chunks of tiles
                      Case{300000, 2048, 0.1},  // 8-byte columns: tiles of 8 rows a partition
                      Case{300000, 4096, 0.0},  // cursors in shared memory, the most
                      Case{300000, 5000, 0.2},  // cursors in global memory
                      Case{3000, 70000, 0.2},   // 32-bit partition ids
                      Case{100000, 2, 0.05}),
    case_name);

// One key column of 4- or 8-byte values without nulls takes the vectorized counting kernel
// (16-byte loads of keys, 16-byte stores of partition ids); a sliced, unaligned one the generic.
TEST_F(GpuTablePartition, OneFixedWidthKeyEqualsTheCpuByteForByte) {
  RandomTableOptions o;
  o.rows = 100003;  // neither a multiple of a thread's 8 rows nor of a tile
  o.types = {TypeId::INT32,  TypeId::INT64,   TypeId::UINT32,
             TypeId::UINT64, TypeId::FLOAT32, TypeId::FLOAT64};
  o.key_cardinality = 1000;
  o.seed = 3;
  const Table h = random_table(o, br);
  const Table d = on_device(h);
  for (std::size_t key = 0; key < h.num_columns(); ++key) {
    for (std::size_t parts : {1, 2, 7, 64, 5000}) {
      const std::vector<std::size_t> keys{key};
      auto cpu = partition_and_pack(h.view(), keys, parts, br, 5);
      auto gpu_parts = gpu::partition_and_pack(d.view(), keys, parts, br, stream, 5);
      for (auto& p : gpu_parts) p = to_host(std::move(p));
      SCOPED_TRACE("key column " + std::to_string(key) + ", " + std::to_string(parts) + " parts");
      expect_same_packs(cpu, gpu_parts);
    }
  }
  auto from_row_1 = [](TableView t) {  // fixed-width columns without nulls
    for (ColumnView& c : t.columns) {
      c.data = static_cast<const std::byte*>(c.data) + size_of(c.type);
      c.size -= 1;
    }
    return t;
  };
  const std::vector<std::size_t> first{0};
  const TableView hs = from_row_1(h.view());
  const TableView ds = from_row_1(d.view());
  auto cpu = partition_and_pack(hs, first, 70000, br, 5);  // 32-bit partition ids, unaligned
  auto gpu_parts = gpu::partition_and_pack(ds, first, 70000, br, stream, 5);
  for (auto& p : gpu_parts) p = to_host(std::move(p));
  expect_same_packs(cpu, gpu_parts);
}

// Columns of at most 4 bytes at 512 to 4096 partitions: the wide pass stages a whole
// tile of a column with each value's partition beside it (32 rows a partition at 512 and 1024,
// 16 at 2048; at 4096, on GPUs with thread block clusters, 16 in tiles of 65536 rows split over
// two blocks, else 8), with nulls in every column. 100003 rows end in a tile of more than half a
// split tile, 200003 in one of less.
TEST_F(GpuTablePartition, NarrowColumnsAtManyPartitionsEqualTheCpu) {
  RandomTableOptions o;
  o.types = {TypeId::INT32, TypeId::INT8, TypeId::FLOAT32, TypeId::INT16, TypeId::UINT32};
  o.null_fraction = 0.1;
  o.key_cardinality = 100000;
  o.seed = 4;
  for (std::size_t rows : {200003, 100003}) {
    o.rows = rows;
    const Table h = random_table(o, br);
    const Table d = on_device(h);
    for (std::size_t parts : {512, 1024, 2048, 4096}) {
      if (rows == 100003 && parts < 2048) continue;
      SCOPED_TRACE(std::to_string(rows) + " rows, " + std::to_string(parts) + " parts");
      expect_packs_and_table_equal_cpu(h, d, {0}, parts, 8);
    }
  }
}

// Tables with 8-byte columns (no strings) at 1024 to 4096 partitions: one block stages a tile of
// 16 rows a partition at 1024; on GPUs with clusters a tile split over two blocks stages 16 at
// 2048 (one block: 8) and 8 at 4096 (where one block's shared memory holds no tile of 8-byte
// values, so without clusters each row goes straight to its place); PartitionPlan places them
// the same way.
TEST_F(GpuTablePartition, WideColumnsAtManyPartitionsEqualTheCpu) {
  RandomTableOptions o;
  o.rows = 100003;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::FLOAT64, TypeId::INT16, TypeId::UINT64};
  o.null_fraction = 0.1;
  o.key_cardinality = 100000;
  o.seed = 6;
  const Table h = random_table(o, br);
  const Table d = on_device(h);
  for (std::size_t parts : {1024, 2048, 4096}) {
    SCOPED_TRACE(std::to_string(parts) + " parts");
    expect_packs_and_table_equal_cpu(h, d, {0}, parts, 3);
  }
  o.null_fraction = 0.0;  // PartitionPlan takes no nulls
  const Table plain = random_table(o, br);
  const Table on_gpu = on_device(plain);
  for (std::size_t parts : {2048, 4096}) {
    SCOPED_TRACE("PartitionPlan, " + std::to_string(parts) + " parts");
    expect_plan_equals_cpu(plain, on_gpu, std::vector<std::size_t>{0, 1}, parts);
  }
}

// PartitionPlan places groups of columns, in any order, each into its own output: together
// the same bytes as hash_partition, at 1, 2 (the warp-split place pass), 5, 600, 5000 and 70000
// (32-bit partition ids) partitions, and narrow columns at 1024 (tiles of 32 rows a partition).
TEST_F(GpuTablePartition, PartitionPlanPlacesColumnsAsHashPartitionDoes) {
  RandomTableOptions o;
  o.rows = 100003;
  o.types = {TypeId::INT32, TypeId::INT64, TypeId::INT16, TypeId::FLOAT64, TypeId::BOOL8};
  o.key_cardinality = 1000;
  o.seed = 9;
  const Table h = random_table(o, br);
  const Table d = on_device(h);
  const std::vector<std::size_t> keys{1, 0};
  for (std::size_t parts : {1, 2, 5, 100, 600, 5000, 70000}) {
    SCOPED_TRACE(std::to_string(parts) + " partitions");
    expect_plan_equals_cpu(h, d, keys, parts);
  }
  // Columns of at most 4 bytes at 1024 partitions: tiles of 32 rows a partition.
  o.types = {TypeId::INT32, TypeId::UINT8, TypeId::INT16, TypeId::FLOAT32, TypeId::INT32};
  const Table narrow = random_table(o, br);
  SCOPED_TRACE("narrow columns, 1024 partitions");
  expect_plan_equals_cpu(narrow, on_device(narrow), keys, 1024);
}

TEST_F(GpuTablePartition, PartitionPlanMisuseIsAClearError) {
  const Table with_nulls = on_device(host_table(1000, 0.2));  // strings and masks
  const std::vector<std::size_t> keys{0};
  EXPECT_THROW(gpu::PartitionPlan(with_nulls.view(), keys, 4, br, stream), logic_error);
  RandomTableOptions o;
  o.rows = 1000;
  o.types = {TypeId::INT32, TypeId::INT64};
  const Table d = on_device(random_table(o, br));
  EXPECT_THROW(gpu::PartitionPlan(d.view(), keys, 0, br, stream), logic_error);
  gpu::PartitionPlan plan(d.view(), keys, 4, br, stream);
  auto out = br.allocate(MemoryType::DEVICE, 8000, stream);
  std::byte* p = out->data();
  EXPECT_THROW(plan.place(1, 3, std::span(&p, 1), stream), logic_error);  // column 2 of 2
  EXPECT_THROW(plan.place(0, 2, std::span(&p, 1), stream), logic_error);  // one output for two
  stream.view().synchronize();
}
