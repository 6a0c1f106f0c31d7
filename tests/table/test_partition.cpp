// hash_partition and partition_and_pack: every row lands in hash % n, order kept, nothing lost,
// the same output for every thread count, and little extra memory.
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <spillway/table/partition_order.hpp>

#include "common.hpp"
#include "table_common.hpp"

using namespace spillway;

namespace {

/// Checks a partitioned result against the definition, row by row.
void expect_valid_partitioning(const TableView& in, const std::vector<std::size_t>& keys,
                               std::size_t n, const TableView& out,
                               const std::vector<std::size_t>& offsets, std::uint32_t seed) {
  ASSERT_EQ(offsets.size(), n + 1);
  ASSERT_EQ(offsets.back(), in.num_rows());
  TableView key_view;
  for (std::size_t k : keys) key_view.columns.push_back(in.columns[k]);
  // Expected: for each partition, the input rows of that partition in input order.
  std::vector<std::vector<std::size_t>> expected(n);
  for (std::size_t r = 0; r < in.num_rows(); ++r) {
    expected[hash_row(key_view, r, seed) % n].push_back(r);
  }
  for (std::size_t p = 0; p < n; ++p) {
    ASSERT_EQ(offsets[p + 1] - offsets[p], expected[p].size()) << "partition " << p;
    for (std::size_t i = 0; i < expected[p].size(); ++i) {
      ASSERT_TRUE(test::rows_equal(in, expected[p][i], out, offsets[p] + i))
          << "partition " << p << " row " << i;
    }
  }
}
}  // namespace

struct Case {
  std::size_t rows;
  std::size_t partitions;
  double nulls;
  double skew;
};

class HashPartition : public ::testing::TestWithParam<Case> {};

TEST_P(HashPartition, MatchesTheDefinitionForEveryThreadCount) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Case c = GetParam();
  RandomTableOptions o;
  o.rows = c.rows;
  o.types = test::all_types;
  o.null_fraction = c.nulls;
  o.skew = c.skew;
  o.key_cardinality = 1000;
  Table t = random_table(o, br);
  const std::vector<std::size_t> keys{2, 11};  // int32 and string
  const auto whole = checksum(t.view());
  for (std::size_t threads : {1, 2, 3, 8}) {
    auto part = hash_partition(t.view(), keys, c.partitions, br, 42, threads);
    expect_valid_partitioning(t.view(), keys, c.partitions, part.table.view(), part.offsets, 42);
    EXPECT_EQ(checksum(part.table.view()), whole);
    // partition_and_pack gives the same partitions, each packed.
    auto packed = partition_and_pack(t.view(), keys, c.partitions, br, 42, threads);
    ASSERT_EQ(packed.size(), c.partitions);
    for (std::size_t p = 0; p < c.partitions; ++p) {
      auto u = unpack(std::move(packed[p]));
      ASSERT_EQ(u.view().num_rows(), part.offsets[p + 1] - part.offsets[p]);
      for (std::size_t r = 0; r < u.view().num_rows(); ++r) {
        ASSERT_TRUE(test::rows_equal(u.view(), r, part.table.view(), part.offsets[p] + r))
            << "threads " << threads << " partition " << p << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, HashPartition,
                         ::testing::Values(Case{0, 4, 0, 0},       // empty table
                                           Case{1, 4, 0, 0},       // one row
                                           Case{1000, 1, 0.1, 0},  // one partition
                                           Case{5, 16, 0.2, 0},    // more partitions than rows
                                           Case{3000, 7, 0.3, 0},  // not a power of two
                                           Case{3000, 8, 0, 0},    // a power of two
                                           Case{2000, 5, 0, 1.0},  // every row to one partition
                                           Case{2000, 300, 0.05, 0.5}, Case{3000, 2000, 0.1, 0},
                                           // beyond the write-combining limit (4096)
                                           Case{3000, 5000, 0.1, 0}));

// Columns of one width go through the write-combining scatter in groups (as many as keep the
// lines in cache): every group size, and a width change between groups, give the definition.
TEST(HashPartition, ColumnsOfOneWidthInGroupsMatchTheDefinition) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 20000;
  o.types = std::vector<DataType>(12, TypeId::INT32);
  for (int i = 0; i < 3; ++i) o.types.push_back(TypeId::INT64);
  o.types.push_back(TypeId::INT16);
  o.types.push_back(TypeId::INT32);
  Table t = random_table(o, br);
  const std::vector<std::size_t> keys{0};
  // (with 48 KiB of L1: 128 partitions in groups of 5 and 300 of 2 (L1); 512 of 5, 1024 of 4,
  // 2048 of 2 and 4096 of 1 (L2))
  for (const std::size_t n : {1, 3, 64, 100, 128, 300, 512, 1024, 2048, 4096}) {
    for (std::size_t threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(n) + " partitions, " + std::to_string(threads) + " threads");
      auto part = hash_partition(t.view(), keys, n, br, 7, threads);
      expect_valid_partitioning(t.view(), keys, n, part.table.view(), part.offsets, 7);
      auto packed = partition_and_pack(t.view(), keys, n, br, 7, threads);
      for (std::size_t p = 0; p < n; ++p) {
        auto u = unpack(std::move(packed[p]));
        ASSERT_EQ(u.view().num_rows(), part.offsets[p + 1] - part.offsets[p]);
        for (std::size_t r = 0; r < u.view().num_rows(); ++r) {
          ASSERT_TRUE(test::rows_equal(u.view(), r, part.table.view(), part.offsets[p] + r))
              << "partition " << p << " row " << r;
        }
      }
    }
  }
}

TEST(HashPartition, BadArgumentsAreErrors) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 10;
  Table t = random_table(o, br);
  const std::vector<std::size_t> keys{0};
  const std::vector<std::size_t> bad_keys{3};
  const std::vector<std::size_t> no_keys;
  EXPECT_THROW((void)hash_partition(t.view(), keys, 0, br), logic_error);
  EXPECT_THROW((void)hash_partition(t.view(), bad_keys, 2, br), logic_error);
  EXPECT_THROW((void)partition_and_pack(t.view(), no_keys, 2, br), logic_error);
}

TEST(PartitionAndPack, ExtraMemoryIsAtMostATenthAboveTheOutputs) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 1 << 18;
  o.types = std::vector<DataType>(10, TypeId::INT32);
  Table t = random_table(o, br);
  const std::size_t input = t.view().total_bytes();
  br.reset_peak(MemoryType::HOST);
  const std::size_t before = br.used(MemoryType::HOST);
  const std::vector<std::size_t> keys{0};
  auto packed = partition_and_pack(t.view(), keys, 64, br, 0, 2);
  const std::size_t extra = br.peak(MemoryType::HOST) - before;
  EXPECT_LE(static_cast<double>(extra), 1.1 * static_cast<double>(input))
      << "extra " << extra << " for an input of " << input;
  const auto rec = br.statistics().memory_profiler().records(index(MemoryType::HOST));
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_NE(rec.begin()->first.find("(partition_and_pack)"), std::string::npos);
  EXPECT_EQ(rec.begin()->second.peak, static_cast<std::int64_t>(extra));
}

// The Shuffler's form: payloads placed in a given order, small ones sharing a block one after
// another (so that a run of them travels joined), with the same partitions as
// partition_and_pack; an order that is not a permutation of the partitions is an error.
TEST(PartitionAndPack, PayloadsInAGivenOrderLieOneAfterAnother) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 20000;
  o.types = {TypeId::INT32, TypeId::INT64, TypeId::STRING, TypeId::FLOAT64};
  o.null_fraction = 0.1;
  Table t = random_table(o, br);
  const std::vector<std::size_t> keys{0};
  constexpr std::size_t n = 64;
  std::vector<std::uint32_t> order;  // odd partitions first, as two ranks' owners place them
  for (std::uint32_t p = 1; p < n; p += 2) order.push_back(p);
  for (std::uint32_t p = 0; p < n; p += 2) order.push_back(p);
  auto ordered = detail::partition_and_pack_ordered(t.view(), keys, n, br, 9, 2, order);
  auto plain = partition_and_pack(t.view(), keys, n, br, 9, 2);
  ASSERT_EQ(ordered.size(), n);
  for (std::size_t i = 1; i < n; ++i) {  // (the whole table is less than one 16 MiB block)
    EXPECT_TRUE(ordered[order[i]].payload->follows(*ordered[order[i - 1]].payload, 256))
        << "partition " << order[i] << " after " << order[i - 1];
  }
  for (std::size_t p = 0; p < n; ++p) {
    EXPECT_EQ(ordered[p].metadata, plain[p].metadata) << "partition " << p;
    auto a = unpack(std::move(ordered[p]));
    auto b = unpack(std::move(plain[p]));
    EXPECT_EQ(checksum(a.view()), checksum(b.view())) << "partition " << p;
  }
  std::vector<std::uint32_t> twice(order);
  twice[5] = twice[4];
  std::vector<std::uint32_t> beyond(order);
  beyond[0] = n;
  std::vector<std::uint32_t> short_order(order.begin(), order.end() - 1);
  for (const auto& bad : {twice, beyond, short_order}) {
    EXPECT_THROW((void)detail::partition_and_pack_ordered(t.view(), keys, n, br, 9, 2, bad),
                 logic_error);
  }
}
