#include <spillway/table/hashing.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

using namespace spillway;

TEST(Murmur3, ReferenceVectors) {
  EXPECT_EQ(murmur3_32("", 0, 0), 0u);
  EXPECT_EQ(murmur3_32("", 0, 1), 0x514E28B7u);
  EXPECT_EQ(murmur3_32("", 0, 0xffffffffu), 0x81F16F39u);
  const char zeros[4] = {0, 0, 0, 0};
  EXPECT_EQ(murmur3_32(zeros, 4, 0), 0x2362F9DEu);
  EXPECT_EQ(murmur3_32("abc", 3, 0), 0xB3DD93FAu);
  const char* fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(murmur3_32(fox, std::strlen(fox), 0x9747b28cu), 0x2FA826CDu);
}

TEST(Murmur3, FloatsAreNormalized) {
  EXPECT_EQ(hash_value(0.0, 0), hash_value(-0.0, 0));
  EXPECT_EQ(hash_value(0.0F, 7), hash_value(-0.0F, 7));
  double nan1 = std::numeric_limits<double>::quiet_NaN();
  double nan2 = -std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(hash_value(nan1, 0), hash_value(nan2, 0));
  EXPECT_NE(hash_value(1.0, 0), hash_value(2.0, 0));
}

TEST(RowHash, CombinesColumnsInOrderAndHashesNulls) {
  const std::int32_t a[2] = {1, 2};
  const std::int64_t b[2] = {3, 3};
  const std::uint8_t mask[1] = {0b01};  // row 1 null
  TableView t;
  t.columns.push_back(ColumnView{TypeId::INT32, 2, a, nullptr, nullptr});
  t.columns.push_back(ColumnView{TypeId::INT64, 2, b, nullptr, mask});
  const std::uint32_t h0 = hash_combine(hash_combine(0, hash_value(a[0], 0)), hash_value(b[0], 0));
  EXPECT_EQ(hash_row(t, 0, 0), h0);
  const std::uint32_t h1 = hash_combine(hash_combine(0, hash_value(a[1], 0)), null_hash);
  EXPECT_EQ(hash_row(t, 1, 0), h1);
  EXPECT_NE(hash_row(t, 0, 0), hash_row(t, 0, 1));  // the seed matters
  // As cuDF: only the first column is hashed with the seed, the rest with seed 0.
  const std::uint32_t seeded =
      hash_combine(hash_combine(0, hash_value(a[0], 99)), hash_value(b[0], 0));
  EXPECT_EQ(hash_row(t, 0, 99), seeded);
  std::uint32_t block[2];
  hash_rows(t, 0, 2, 99, block);
  EXPECT_EQ(block[0], hash_row(t, 0, 99));
  EXPECT_EQ(block[1], hash_row(t, 1, 99));
}

// hash_rows takes a vectorized loop for integer columns of 4 and 8 bytes without nulls; each
// row must still hash as hash_row does, at any start and length (the loop's tails included).
TEST(RowHash, VectorizedIntegerColumnsHashAsEachRowDoes) {
  constexpr std::size_t rows = 1037;
  std::vector<std::int32_t> i32(rows);
  std::vector<std::uint32_t> u32(rows);
  std::vector<std::int64_t> i64(rows);
  std::vector<std::uint64_t> u64(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    i32[r] = static_cast<std::int32_t>(r * 2654435761U);
    u32[r] = static_cast<std::uint32_t>(r * 40503U + 7);
    i64[r] = static_cast<std::int64_t>(r * 0x9E3779B97F4A7C15ULL);
    u64[r] = r << 40 | r;
  }
  const std::pair<TypeId, const void*> columns[] = {
      {TypeId::INT32, i32.data()},  {TypeId::DATE32, i32.data()},
      {TypeId::UINT32, u32.data()}, {TypeId::INT64, i64.data()},
      {TypeId::UINT64, u64.data()}, {TypeId::TIMESTAMP_NANOSECONDS, i64.data()}};
  TableView all;
  for (const auto& [type, data] : columns) {
    TableView one;
    one.columns.push_back(ColumnView{type, rows, data, nullptr, nullptr});
    all.columns.push_back(one.columns.back());
    for (const std::size_t begin : {std::size_t{0}, std::size_t{3}, std::size_t{513}}) {
      std::vector<std::uint32_t> block(rows - begin);
      hash_rows(one, begin, rows, 17, block.data());
      for (std::size_t r = begin; r < rows; ++r) {
        ASSERT_EQ(block[r - begin], hash_row(one, r, 17)) << to_string(type) << " row " << r;
      }
    }
  }
  std::vector<std::uint32_t> block(rows);
  hash_rows(all, 0, rows, 5, block.data());
  for (std::size_t r = 0; r < rows; ++r) ASSERT_EQ(block[r], hash_row(all, r, 5)) << "row " << r;
}
