// The benchmark's input generator: deterministic, within its range, spread over it, and
// different per seed and column. (test_gpu checks that the GPU makes the same bytes.)
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>

#include "common.hpp"

#include <gtest/gtest.h>

#include <cstring>

using namespace spillway;

TEST(RandomInt32Table, IsDeterministicAndWithinItsRange) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Table a = random_int32_table(100000, 3, -50, 49, 7, br);
  const Table b = random_int32_table(100000, 3, -50, 49, 7, br);
  ASSERT_EQ(a.num_columns(), 3U);
  EXPECT_EQ(a.names(), (std::vector<std::string>{"c0", "c1", "c2"}));
  EXPECT_EQ(checksum(a.view()), checksum(b.view()));
  std::vector<std::size_t> hits(100, 0);
  for (std::size_t c = 0; c < 3; ++c) {
    const ColumnView col = a.view().columns[c];
    EXPECT_EQ(col.type, TypeId::INT32);
    EXPECT_FALSE(col.nullable());
    for (std::size_t i = 0; i < col.size; ++i) {
      const std::int32_t v = col.value<std::int32_t>(i);
      ASSERT_GE(v, -50);
      ASSERT_LE(v, 49);
      ++hits[static_cast<std::size_t>(v + 50)];
    }
  }
  // 300000 draws over 100 values: each about 3000 times.
  for (std::size_t v = 0; v < hits.size(); ++v) {
    EXPECT_GT(hits[v], 2500U) << "value " << int(v) - 50;
    EXPECT_LT(hits[v], 3500U) << "value " << int(v) - 50;
  }
  // Columns and seeds differ.
  const ColumnView c0 = a.view().columns[0];
  const ColumnView c1 = a.view().columns[1];
  EXPECT_NE(std::memcmp(c0.data, c1.data, c0.size * 4), 0);
  const Table other = random_int32_table(100000, 1, -50, 49, 8, br);
  EXPECT_NE(std::memcmp(c0.data, other.view().columns[0].data, c0.size * 4), 0);
}

TEST(RandomInt32Table, FullRangeAndBadBounds) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Table t = random_int32_table(10000, 1, INT32_MIN, INT32_MAX, 1, br);
  bool negative = false;
  bool positive = false;
  for (std::size_t i = 0; i < 10000; ++i) {
    const std::int32_t v = t.view().columns[0].value<std::int32_t>(i);
    negative = negative || v < -(1 << 30);
    positive = positive || v > (1 << 30);
  }
  EXPECT_TRUE(negative && positive);
  EXPECT_EQ(random_int32_table(0, 2, 0, 0, 1, br).num_rows(), 0U);
  EXPECT_THROW(random_int32_table(10, 1, 1, 0, 1, br), logic_error);
}

// Zipf keys: value v is drawn about in proportion to 1 / (v + 1)^s, within the cardinality.
TEST(RandomTable, ZipfKeysFollowTheirLaw) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 200000;
  o.types = {TypeId::INT64};
  o.zipf = 1.2;
  o.key_cardinality = 1000;
  const Table t = random_table(o, br);
  std::vector<std::size_t> hits(1000, 0);
  for (std::size_t i = 0; i < o.rows; ++i) {
    const auto v = t.view().columns[0].value<std::int64_t>(i);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 1000);
    ++hits[static_cast<std::size_t>(v)];
  }
  // P(0) / P(1) = 2^1.2 = 2.30 and P(0) / P(9) = 10^1.2 = 15.8, within sampling noise.
  EXPECT_NEAR(static_cast<double>(hits[0]) / static_cast<double>(hits[1]), 2.30, 0.15);
  EXPECT_NEAR(static_cast<double>(hits[0]) / static_cast<double>(hits[9]), 15.8, 2.0);
  o.zipf = -1;
  EXPECT_THROW((void)random_table(o, br), logic_error);
}

// Table::total_bytes counts the buffers, for any tier; on the host it equals the view's.
TEST(RandomTable, TotalBytesOfTheTableAndOfItsView) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 1000;
  o.types = {TypeId::INT32, TypeId::STRING, TypeId::INT64};
  o.null_fraction = 0.2;
  const Table t = random_table(o, br);
  EXPECT_EQ(t.total_bytes(), t.view().total_bytes());
  EXPECT_GT(t.total_bytes(), 1000U * 12);
  EXPECT_EQ(Table{}.total_bytes(), 0U);
}
