// The local hash join against a nested-loop join of the same rows, for every join type, on
// random tables with duplicate keys, nulls, several key columns and strings; the output
// table's columns against gather; SQL's float equality; clear errors.
#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/join.hpp>

#include "common.hpp"
#include "join_sides.hpp"
#include "table_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace spillway;
using spillway::test::side;

namespace {

using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// Whether the key values of two rows are SQL-equal (no nulls; NaN = NaN; -0 = 0).
bool equal_keys(const TableView& a, std::span<const std::size_t> ak, std::size_t i,
                const TableView& b, std::span<const std::size_t> bk, std::size_t j) {
  for (std::size_t c = 0; c < ak.size(); ++c) {
    const ColumnView& x = a.columns[ak[c]];
    const ColumnView& y = b.columns[bk[c]];
    if (!x.is_valid(i) || !y.is_valid(j)) return false;
    switch (x.type) {
      case TypeId::STRING:
        if (x.string(i) != y.string(j)) return false;
        break;
      case TypeId::FLOAT64: {
        const double u = x.value<double>(i), v = y.value<double>(j);
        if (!(u == v || (std::isnan(u) && std::isnan(v)))) return false;
        break;
      }
      case TypeId::INT64:
      case TypeId::TIMESTAMP_MICROSECONDS:
        if (x.value<std::int64_t>(i) != y.value<std::int64_t>(j)) return false;
        break;
      case TypeId::INT32:
      case TypeId::DATE32:
        if (x.value<std::int32_t>(i) != y.value<std::int32_t>(j)) return false;
        break;
      case TypeId::DECIMAL128:
        if (x.value<Int128>(i) != y.value<Int128>(j)) return false;
        break;
      default:
        ADD_FAILURE() << "the oracle does not know " << to_string(x.type);
        return false;
    }
  }
  return true;
}

/// The nested-loop join: the same pairs, as a sorted list.
Pairs oracle(const TableView& l, std::span<const std::size_t> lk, const TableView& r,
             std::span<const std::size_t> rk, JoinType type) {
  Pairs out;
  std::vector<bool> right_matched(r.num_rows(), false);
  for (std::size_t i = 0; i < l.num_rows(); ++i) {
    bool found = false;
    for (std::size_t j = 0; j < r.num_rows(); ++j) {
      if (!equal_keys(l, lk, i, r, rk, j)) continue;
      found = true;
      right_matched[j] = true;
      if (type == JoinType::inner || type == JoinType::left || type == JoinType::full) {
        out.emplace_back(i, j);
      }
    }
    if ((type == JoinType::left_semi && found) || (type == JoinType::left_anti && !found)) {
      out.emplace_back(i, -2);
    }
    if ((type == JoinType::left || type == JoinType::full) && !found) out.emplace_back(i, -1);
  }
  if (type == JoinType::full) {
    for (std::size_t j = 0; j < r.num_rows(); ++j) {
      if (!right_matched[j]) out.emplace_back(-1, j);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Pairs pairs_of(const JoinMaps& m) {
  Pairs out;
  for (std::size_t i = 0; i < m.left.size(); ++i) {
    out.emplace_back(m.left[i], m.right.empty() ? -2 : m.right[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

constexpr JoinType all_types[] = {JoinType::inner, JoinType::left, JoinType::left_semi,
                                  JoinType::left_anti, JoinType::full};

}  // namespace

TEST(Join, EveryTypeEqualsTheNestedLoopJoin) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Table l = side(1500, 1, br);
  const Table r = side(900, 2, br);
  const std::vector<std::vector<std::size_t>> key_sets{{0}, {1}, {3},    {0, 1}, {1, 3}, {4},
                                                       {5}, {6}, {4, 0}, {5, 6}, {6, 3}};
  for (const auto& keys : key_sets) {
    for (JoinType type : all_types) {
      SCOPED_TRACE(std::string(to_string(type)) + " on " + std::to_string(keys.size()) +
                   " keys, first " + std::to_string(keys[0]));
      const Pairs want = oracle(l.view(), keys, r.view(), keys, type);
      for (std::size_t threads : {1, 3}) {
        const JoinMaps m = join_maps(l.view(), keys, r.view(), keys, type, threads);
        EXPECT_EQ(pairs_of(m), want) << threads << " threads";
      }
      EXPECT_FALSE(want.empty());
    }
  }
}

TEST(Join, TheOutputIsTheGatheredColumnsAndDoesNotDependOnThreads) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Table l = side(20000, 3, br);
  const Table r = side(5000, 4, br);
  const std::vector<std::size_t> keys{1};
  const JoinMaps one = join_maps(l.view(), keys, r.view(), keys, JoinType::full, 1);
  const JoinMaps four = join_maps(l.view(), keys, r.view(), keys, JoinType::full, 4);
  EXPECT_EQ(one.left, four.left);
  EXPECT_EQ(one.right, four.right);
  const Table out = hash_join(l.view(), keys, r.view(), keys, JoinType::full, br, 4);
  constexpr std::size_t n = 7;  // columns a side
  ASSERT_EQ(out.num_columns(), 2 * n);
  EXPECT_EQ(out.names(),
            (std::vector<std::string>{"a", "b", "v", "s", "d", "t", "day", "a_right", "b_right",
                                      "v_right", "s_right", "d_right", "t_right", "day_right"}));
  for (std::size_t c = 0; c < n; ++c) {
    EXPECT_EQ(out.column(c).type(), l.column(c).type());
    EXPECT_EQ(out.column(n + c).type(), r.column(c).type());
  }
  const Table gl = gather(l.view(), one.left, br);
  const Table gr = gather(r.view(), one.right, br);
  ASSERT_EQ(out.num_rows(), one.left.size());
  const TableView ov = out.view();
  const TableView glv = gl.view();
  const TableView grv = gr.view();
  for (std::size_t c = 0; c < n; ++c) {
    const ColumnView& want_l = glv.columns[c];
    const ColumnView& want_r = grv.columns[c];
    for (std::size_t i = 0; i < out.num_rows(); ++i) {
      ASSERT_EQ(ov.columns[c].is_valid(i), want_l.is_valid(i));
      ASSERT_EQ(ov.columns[n + c].is_valid(i), want_r.is_valid(i));
      if (one.left[i] < 0) {
        ASSERT_FALSE(ov.columns[c].is_valid(i));
      }
      if (one.right[i] < 0) {
        ASSERT_FALSE(ov.columns[n + c].is_valid(i));
      }
    }
  }
  // Spot values: the string and the decimal of each matched pair are the same on both sides.
  for (std::size_t i = 0; i < out.num_rows(); ++i) {
    if (one.left[i] >= 0 && one.right[i] >= 0) {
      ASSERT_EQ(ov.columns[3].string(i), ov.columns[n + 3].string(i));
      ASSERT_EQ(ov.columns[4].value<Int128>(i), ov.columns[n + 4].value<Int128>(i));
    }
  }
}

TEST(Join, FloatKeysCompareAsSqlDoes) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto col = [&](std::vector<double> v) {
    auto b = br.allocate(MemoryType::HOST, v.size() * 8);
    std::memcpy(b->data(), v.data(), v.size() * 8);
    return Column(TypeId::FLOAT64, v.size(), std::move(b));
  };
  std::vector<Column> lc, rc;
  lc.push_back(col({0.0, nan, 1.5, 2.0}));
  rc.push_back(col({-0.0, nan, 1.5, 3.0}));
  const Table l(std::move(lc), {"x"});
  const Table r(std::move(rc), {"x"});
  const std::vector<std::size_t> k{0};
  EXPECT_EQ(pairs_of(join_maps(l.view(), k, r.view(), k, JoinType::inner)),
            (Pairs{{0, 0}, {1, 1}, {2, 2}}));
}

TEST(Join, EmptySidesAndBadKeysAreHandled) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const Table l = side(100, 5, br);
  const Table empty = side(0, 6, br);
  const std::vector<std::size_t> k{0};
  EXPECT_TRUE(join_maps(l.view(), k, empty.view(), k, JoinType::inner).left.empty());
  EXPECT_EQ(join_maps(l.view(), k, empty.view(), k, JoinType::left).left.size(), 100u);
  EXPECT_EQ(join_maps(l.view(), k, empty.view(), k, JoinType::left_anti).left.size(), 100u);
  EXPECT_EQ(join_maps(empty.view(), k, l.view(), k, JoinType::full).right.size(), 100u);
  EXPECT_EQ(hash_join(empty.view(), k, empty.view(), k, JoinType::inner, br).num_rows(), 0u);
  const std::vector<std::size_t> a{0}, b{1}, s{3}, none{}, two{0, 1}, far{9};
  EXPECT_THROW(join_maps(l.view(), a, l.view(), b, JoinType::inner), logic_error);  // int64/32
  EXPECT_THROW(join_maps(l.view(), s, l.view(), b, JoinType::inner), logic_error);
  EXPECT_THROW(join_maps(l.view(), none, l.view(), none, JoinType::inner), logic_error);
  EXPECT_THROW(join_maps(l.view(), two, l.view(), a, JoinType::inner), logic_error);
  EXPECT_THROW(join_maps(l.view(), far, l.view(), a, JoinType::inner), logic_error);
  const std::vector<std::int64_t> bad{0, 100};
  EXPECT_THROW(gather(l.view(), bad, br), logic_error);
}

// The join in chunks: every chunk within its bound, and the chunks in order are hash_join's
// table row for row, for every type, for bounds that split one left row's matches (the INT32
// key has 37 values: hundreds of matches a row), and for a full join's unmatched right rows.
TEST(Join, InChunksOfBoundedSizeTheChunksAreTheWholeJoin) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  // (1000 left rows: chunks of one row are ~19000 tables a join; with 3000 this test alone
  // took 92 s of the CI's AddressSanitizer run.)
  const Table l = side(1000, 5, br);
  const Table r = side(700, 6, br);
  for (const std::vector<std::size_t>& keys : std::vector<std::vector<std::size_t>>{{1}, {0, 4}}) {
    for (JoinType type : all_types) {
      const Table whole = hash_join(l.view(), keys, r.view(), keys, type, br, 2);
      for (std::size_t chunk :
           {std::size_t{1}, std::size_t{7}, std::size_t{250}, std::size_t{100000}}) {
        SCOPED_TRACE(std::string(to_string(type)) + ", chunks of " + std::to_string(chunk) +
                     ", key " + std::to_string(keys[0]));
        std::vector<Table> chunks;
        hash_join(
            l.view(), keys, r.view(), keys, type, br, chunk,
            [&](Table&& t) {
              EXPECT_LE(t.num_rows(), chunk);
              EXPECT_EQ(t.names(), whole.names());
              chunks.push_back(std::move(t));
            },
            2);
        ASSERT_FALSE(chunks.empty());
        if (whole.num_rows() == 0) {
          EXPECT_EQ(chunks.size(), 1u);
          continue;
        }
        // Full chunks, but for the last of the pairs and of a full join's unmatched rows.
        const std::size_t fewest = (whole.num_rows() + chunk - 1) / chunk;
        EXPECT_GE(chunks.size(), fewest);
        EXPECT_LE(chunks.size(), fewest + (type == JoinType::full ? 1 : 0));
        std::size_t row = 0;
        for (const Table& c : chunks) {
          for (std::size_t i = 0; i < c.num_rows(); ++i, ++row) {
            ASSERT_TRUE(test::rows_equal(c.view(), i, whole.view(), row)) << "row " << row;
          }
        }
        EXPECT_EQ(row, whole.num_rows());
      }
    }
  }
  // No output rows: one chunk without rows.
  const Table none = side(0, 7, br);
  std::size_t calls = 0;
  hash_join(none.view(), std::vector<std::size_t>{0}, r.view(), std::vector<std::size_t>{0},
            JoinType::inner, br, 10, [&](Table&& t) {
              EXPECT_EQ(t.num_rows(), 0u);
              EXPECT_EQ(t.num_columns(), 2 * l.num_columns());
              ++calls;
            });
  EXPECT_EQ(calls, 1u);
  EXPECT_THROW(hash_join(l.view(), std::vector<std::size_t>{0}, r.view(),
                         std::vector<std::size_t>{0}, JoinType::inner, br, 0, [](Table&&) {}),
               logic_error);
}
