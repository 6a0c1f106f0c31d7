// SpillableTables: tables kept beyond the host limit go to disk and come back, in order, equal
// (checksums), with the spill files gone after; a pop into a tier that cannot hold the table
// keeps it; the same with device memory (skipped without a GPU).
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/spillable_tables.hpp>

#include "common.hpp"

#include <filesystem>
#include <vector>

using namespace spillway;

namespace {

/// About 20 bytes a row: an INT64, an INT32 with nulls and a short string.
Table table_of(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::STRING};
  o.null_fraction = 0.1;
  o.max_string = 8;
  o.seed = seed;
  return random_table(o, br);
}

}  // namespace

// 16 tables of about 200 KiB under a 1 MiB host limit: most of them wait on disk.
TEST(SpillableTables, TablesBeyondTheLimitWaitOnDiskAndComeBackInOrder) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(1 * MiB);
  BufferResource br(cfg);
  std::vector<TableChecksum> want;
  {
    SpillableTables kept(br);
    for (std::uint64_t i = 0; i < 16; ++i) {
      Table t = table_of(10000 + i, i, br);
      want.push_back(checksum(t.view()));
      kept.push(std::move(t));
    }
    EXPECT_EQ(kept.size(), 16u);
    EXPECT_GT(kept.front_bytes().value_or(0), 150 * KiB);
    EXPECT_GT(kept.bytes_in(MemoryType::DISK), 2 * MiB);
    EXPECT_LE(br.peak(MemoryType::HOST), 1 * MiB);
    for (const TableChecksum& w : want) {
      std::optional<Table> t = kept.pop(MemoryType::HOST);
      ASSERT_TRUE(t.has_value());
      EXPECT_EQ(t->column(0).data().mem_type(), MemoryType::HOST);
      EXPECT_EQ(checksum(t->view()), w);
    }
    EXPECT_FALSE(kept.pop(MemoryType::HOST).has_value());
    EXPECT_EQ(kept.size(), 0u);
    EXPECT_FALSE(kept.front_bytes().has_value());
    EXPECT_EQ(kept.bytes_in(MemoryType::DISK), 0u);
    // Tables still kept when the queue goes: their spill files go with it.
    for (std::uint64_t i = 0; i < 5; ++i) kept.push(table_of(12000, 90 + i, br));
    EXPECT_GT(kept.bytes_in(MemoryType::DISK), 0u);
  }
  EXPECT_EQ(br.used(MemoryType::HOST), 0u);
  EXPECT_EQ(test::files_in(dir.path()), 0u);
  EXPECT_LE(br.peak(MemoryType::HOST), 1 * MiB);
}

// A table is kept as its own buffers: pushing it takes no memory beside it, and it is
// spillable at once (a table of about 600 KiB under a 1 MiB limit, then 700 KiB asked for: its
// buffers go to disk, oldest first, until the 700 KiB fit). pop_packed packs a table where it
// was pushed from.
TEST(SpillableTables, ATableIsKeptWithoutACopyAndSpillsAtOnce) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(1 * MiB);
  BufferResource br(cfg);
  SpillableTables kept(br);
  Table t = table_of(30000, 3, br);
  const TableChecksum want = checksum(t.view());
  const std::size_t used = br.used(MemoryType::HOST);
  const std::size_t bytes = t.total_bytes();
  ASSERT_GT(bytes, 550 * KiB);
  kept.push(std::move(t));
  EXPECT_EQ(br.used(MemoryType::HOST), used);
  EXPECT_EQ(kept.front_bytes(), bytes);
  EXPECT_EQ(kept.bytes_in(MemoryType::HOST), bytes);
  auto busy = br.allocate(MemoryType::HOST, 700 * KiB);
  EXPECT_GE(kept.bytes_in(MemoryType::DISK), used + 700 * KiB - 1 * MiB);
  EXPECT_EQ(kept.bytes_in(MemoryType::HOST) + kept.bytes_in(MemoryType::DISK), bytes);
  EXPECT_LE(br.peak(MemoryType::HOST), 1 * MiB);
  busy.reset();
  std::optional<Table> back = kept.pop(MemoryType::HOST);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(checksum(back->view()), want);
  back.reset();
  EXPECT_EQ(br.used(MemoryType::HOST), 0u);

  Table small = table_of(1000, 4, br);
  const TableChecksum small_sum = checksum(small.view());
  kept.push(std::move(small));
  std::optional<PackedData> packed = kept.pop_packed();
  ASSERT_TRUE(packed.has_value());
  EXPECT_EQ(packed->payload->mem_type(), MemoryType::HOST);
  EXPECT_EQ(checksum(unpack(std::move(*packed)).view()), small_sum);
  EXPECT_EQ(kept.size(), 0u);
}

TEST(SpillableTables, APopThatFindsNoRoomKeepsTheTable) {
  test::TempDir dir;
  auto cfg = test::host_config(dir.path());
  cfg.limits[index(MemoryType::HOST)] = Limit::bytes(1 * MiB);
  BufferResource br(cfg);
  SpillableTables kept(br);
  Table t = table_of(16000, 7, br);  // about 320 KiB
  const TableChecksum want = checksum(t.view());
  kept.push(std::move(t));
  kept.push(table_of(100, 8, br));
  auto busy = br.allocate(MemoryType::HOST, 800 * KiB);  // the first table's payload to disk
  EXPECT_GT(kept.bytes_in(MemoryType::DISK), 0u);
  EXPECT_THROW((void)kept.pop(MemoryType::HOST), out_of_memory);
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_THROW((void)kept.pop(MemoryType::DISK), logic_error);
  busy.reset();
  std::optional<Table> back = kept.pop(MemoryType::HOST);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(checksum(back->view()), want);  // still the oldest
  EXPECT_EQ(kept.size(), 1u);
}

TEST(SpillableTables, OnTheGpuTablesComeBackInTheTierAskedFor) {
  test::TempDir dir;
  auto cfg = test::small_config(dir.path());
  cfg.limits[index(MemoryType::DEVICE)] = Limit::bytes(1 * MiB);
  BufferResource br(cfg);
  SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  std::vector<TableChecksum> want;
  SpillableTables kept(br);
  for (std::uint64_t i = 0; i < 8; ++i) {
    const Table host = table_of(10000 + i, i, br);
    want.push_back(checksum(host.view()));
    kept.push(copy_table(host, MemoryType::DEVICE, br, br.stream()));
  }
  EXPECT_LE(br.peak(MemoryType::DEVICE), 1 * MiB);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const MemoryType to = i % 2 == 0 ? MemoryType::DEVICE : MemoryType::HOST;
    std::optional<Table> t = kept.pop(to);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->column(0).data().mem_type(), to);
    const TableChecksum got =
        to == MemoryType::DEVICE ? gpu::checksum(t->view(), br, br.stream()) : checksum(t->view());
    EXPECT_EQ(got, want[i]) << "table " << i;
  }
  EXPECT_LE(br.peak(MemoryType::DEVICE), 1 * MiB);
}
