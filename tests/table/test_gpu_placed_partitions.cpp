// gpu::place_partitions: a device table placed in partition order in column groups, each
// partition's rows of each column a view, the same bytes as hash_partition, and the input's
// memory given back as the groups are placed. Skips without a GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/partition.hpp>

#include "common.hpp"

#include <cstring>

using namespace spillway;

namespace {

class PlacedPartitionsTest : public ::testing::Test {
 protected:
  void SetUp() override { SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE); }

  Table host_table(std::size_t rows, std::vector<DataType> types) {
    RandomTableOptions o;
    o.rows = rows;
    o.types = std::move(types);
    o.key_cardinality = 1000;
    o.seed = 12;
    return random_table(o, br);
  }
  Table on_device(const Table& t) {
    Table d = copy_table(t, MemoryType::DEVICE, br, stream);
    stream.view().synchronize();
    return d;
  }

  test::TempDir dir;
  BufferResource br{test::small_config(dir.path())};
  OwningStream stream;
};

}  // namespace

TEST_F(PlacedPartitionsTest, EachPartsBytesAreHashPartitions) {
  const std::vector<DataType> types{TypeId::INT32,  TypeId::INT64,
                                    TypeId::INT16,  TypeId::FLOAT64,
                                    TypeId::BOOL8,  decimal128(30, 4),
                                    TypeId::INT32,  TypeId::INT64,
                                    TypeId::DATE32, TypeId::TIMESTAMP_NANOSECONDS};
  const Table h = host_table(50021, types);
  const std::vector<std::size_t> keys{1, 0};
  for (const auto& [parts, groups] : std::vector<std::pair<std::size_t, std::uint32_t>>{
           {1, 1}, {7, 3}, {600, 5}, {70000, 2}, {16, 20}}) {
    SCOPED_TRACE(std::to_string(parts) + " partitions, " + std::to_string(groups) + " groups");
    const PartitionedTable cpu = hash_partition(h.view(), keys, parts, br, 31);
    Table d = on_device(h);
    auto placed = gpu::place_partitions(std::move(d), keys, parts, br, stream, 31, groups);
    EXPECT_EQ(d.num_columns(), 0u);  // consumed
    EXPECT_EQ(placed.offsets, cpu.offsets);
    EXPECT_EQ(placed.groups, std::min<std::uint32_t>(groups, std::uint32_t(types.size())));
    ASSERT_EQ(placed.parts.size(), parts);
    for (std::size_t c = 0; c < types.size(); ++c) {
      const ColumnView want = cpu.table.view().columns[c];
      const std::size_t width = size_of(want.type);
      for (std::size_t p = 0; p < parts; ++p) {
        ASSERT_EQ(placed.parts[p].size(), types.size());
        const Buffer& view = *placed.parts[p][c];
        EXPECT_EQ(view.mem_type(), MemoryType::DEVICE);
        ASSERT_EQ(view.size(), (cpu.offsets[p + 1] - cpu.offsets[p]) * width);
        if (view.size() == 0) continue;
        view.wait();  // (its group's placement)
        std::vector<std::byte> got(view.size());
        cuda::memcpy_async(got.data(), view.data(), view.size(), stream);
        stream.view().synchronize();
        ASSERT_EQ(std::memcmp(got.data(),
                              static_cast<const std::byte*>(want.data) + cpu.offsets[p] * width,
                              got.size()),
                  0)
            << "column " << c << ", partition " << p;
      }
    }
    placed.parts.clear();
    stream.view().synchronize();
    EXPECT_EQ(br.used(MemoryType::DEVICE), 0u);
  }
}

// The input's columns are freed as their group's copy is made: at no point do the input and
// a whole second copy both hold device memory.
TEST_F(PlacedPartitionsTest, TheCopyTakesTheInputsPlace) {
  const std::vector<DataType> types(10, TypeId::INT64);
  const Table h = host_table(200000, types);
  Table d = on_device(h);
  const std::size_t table_bytes = d.total_bytes();
  br.reset_peak(MemoryType::DEVICE);
  auto placed = gpu::place_partitions(std::move(d), std::vector<std::size_t>{0}, 64, br, stream,
                                      default_hash_seed, 5);
  stream.view().synchronize();
  // The table, one group's copy (2 columns) and the plan's per-row bytes and histogram.
  EXPECT_LE(br.peak(MemoryType::DEVICE), table_bytes + table_bytes / 5 + 200000 * 8);
  EXPECT_GE(br.used(MemoryType::DEVICE), table_bytes);  // the copy, alive in its views
}

TEST_F(PlacedPartitionsTest, MisuseIsAClearError) {
  const std::vector<std::size_t> keys{0};
  Table d = on_device(host_table(1000, {TypeId::INT32, TypeId::INT64}));
  EXPECT_THROW(gpu::place_partitions(std::move(d), keys, 4, br, stream, 1, 0), logic_error);
  Table on_host = host_table(1000, {TypeId::INT32});
  try {
    (void)gpu::place_partitions(std::move(on_host), keys, 4, br, stream);
    FAIL() << "a host table was placed";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("not in device memory"), std::string::npos) << e.what();
  }
  Table strings = on_device(host_table(1000, {TypeId::INT32, TypeId::STRING}));
  EXPECT_THROW(gpu::place_partitions(std::move(strings), keys, 4, br, stream), logic_error);
}
