#include <spillway/table/hashing.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

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
