// The local sort: SQL's order for each type (NaN after numbers, -0.0 equal to 0.0, strings by
// bytes, nulls first or last, descending), several keys, stability, and on random tables of
// every key type the output is a sorted permutation of the input with equal keys in input order;
// top-k gives the sort's first rows.
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/sort.hpp>

#include "common.hpp"
#include "table/join_sides.hpp"
#include "table_common.hpp"

#include <cmath>
#include <limits>

using namespace spillway;

namespace {

template <typename T>
Column column_of(const std::vector<T>& v, TypeId type, BufferResource& br,
                 const std::vector<bool>& valid = {}) {
  auto data = br.allocate(MemoryType::HOST, std::max<std::size_t>(v.size(), 1) * sizeof(T));
  std::memcpy(data->data(), v.data(), v.size() * sizeof(T));
  std::unique_ptr<Buffer> mask;
  if (!valid.empty()) {
    mask = br.allocate(MemoryType::HOST, mask_bytes(v.size()));
    std::memset(mask->data(), 0, mask_bytes(v.size()));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (valid[i]) mask->data()[i / 8] |= static_cast<std::byte>(1U << (i % 8));
    }
  }
  return Column(type, v.size(), std::move(data), nullptr, std::move(mask));
}

std::vector<std::int64_t> order_of(const Table& t, std::vector<SortKey> keys) {
  return sort_order(t.view(), keys, 2);
}

using Rows = std::vector<std::int64_t>;

/// Adjacent rows of `order` that `cmp` puts the other way round, or that are equal and out of
/// row order (a stable sort has none).
std::size_t out_of_order(const Rows& order, const RowOrder& cmp) {
  std::size_t bad = 0;
  for (std::size_t i = 1; i < order.size(); ++i) {
    const int c =
        cmp.compare(static_cast<std::size_t>(order[i - 1]), static_cast<std::size_t>(order[i]));
    bad += c > 0 || (c == 0 && order[i - 1] > order[i]);
  }
  return bad;
}

}  // namespace

TEST(Sort, FloatsOrderNanLastAndNegativeZeroEqualToZero) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Column> cols;
  cols.push_back(column_of<double>({1.5, nan, -0.0, -2.0, 0.0, nan, -1e300}, TypeId::FLOAT64, br));
  const Table t(std::move(cols));
  EXPECT_EQ(order_of(t, {{0}}), (Rows{6, 3, 2, 4, 0, 1, 5}));
  EXPECT_EQ(order_of(t, {{0, true}}), (Rows{1, 5, 0, 2, 4, 3, 6}));
}

TEST(Sort, NullsGoFirstOrLastAndSeveralKeysBreakTies) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  std::vector<Column> cols;
  cols.push_back(column_of<std::int32_t>({3, 1, 0, 3, 1, 0}, TypeId::INT32, br,
                                         {true, true, false, true, true, false}));
  cols.push_back(column_of<std::int64_t>({10, 20, 30, 5, 20, 1}, TypeId::INT64, br));
  const Table t(std::move(cols));
  EXPECT_EQ(order_of(t, {{0}}), (Rows{1, 4, 0, 3, 2, 5}));               // nulls last, stable
  EXPECT_EQ(order_of(t, {{0, false, true}}), (Rows{2, 5, 1, 4, 0, 3}));  // nulls first
  EXPECT_EQ(order_of(t, {{0, true}}), (Rows{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(order_of(t, {{0}, {1, true}}), (Rows{1, 4, 0, 3, 2, 5}));
  EXPECT_EQ(order_of(t, {{0}, {1}}), (Rows{1, 4, 3, 0, 5, 2}));
}

TEST(Sort, StringsOrderByTheirBytes) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  std::vector<Column> cols;
  cols.push_back(column_of<std::int32_t>({12, 3, 100, 3, -1}, TypeId::INT32, br));
  cols.push_back(test::strings_of(cols[0].view(), br));  // "k12" "k3" "k100" "k3" "k-1"
  const Table t(std::move(cols));
  EXPECT_EQ(order_of(t, {{1}}), (Rows{4, 2, 0, 1, 3}));
  EXPECT_EQ(order_of(t, {{1, true}}), (Rows{1, 3, 0, 2, 4}));
}

// Random tables of every type as the first key (nulls, few distinct values), a second INT32
// key: the output is a permutation, sorted, with equal keys in input order.
TEST(Sort, RandomTablesOfEveryTypeComeOutSortedStableAndWhole) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  for (const DataType& type : test::all_types) {
    for (const bool descending : {false, true}) {
      SCOPED_TRACE(to_string(type) + (descending ? " descending" : ""));
      RandomTableOptions o;
      o.rows = 200000;
      o.types = {type, TypeId::INT32, TypeId::INT64};
      o.key_cardinality = 50;
      o.null_fraction = 0.1;
      o.seed = 7;
      const Table t = random_table(o, br);
      const std::vector<SortKey> keys{{0, descending, descending}, {1}};
      const Rows order = sort_order(t.view(), keys);
      const Table s = gather(t.view(), order, br);
      EXPECT_EQ(checksum(s.view()), checksum(t.view()));
      EXPECT_EQ(out_of_order(order, RowOrder(t.view(), t.view(), keys)), 0u);
      // One key without nulls takes the (key, row) pairs' path: the same order as the
      // comparator's.
      if (type != TypeId::STRING) {
        RandomTableOptions p = o;
        p.null_fraction = 0;
        p.types = {type};
        const Table u = random_table(p, br);
        const std::vector<SortKey> one{{0, descending}};
        const Rows fast = sort_order(u.view(), one);
        EXPECT_EQ(out_of_order(fast, RowOrder(u.view(), u.view(), one)), 0u);
      }
    }
  }
}

TEST(Sort, TopKIsTheSortsFirstRows) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 100000;
  o.types = {TypeId::INT64, TypeId::FLOAT64};
  o.key_cardinality = 1000;
  const Table t = random_table(o, br);
  const std::vector<SortKey> keys{{0, true}, {1}};
  const Table whole = sort(t.view(), keys, br);
  for (const std::size_t k :
       {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{60000}}) {
    const Table top = sort(t.view(), keys, br, k);
    std::vector<std::int64_t> first(k);
    std::iota(first.begin(), first.end(), 0);
    test::expect_tables_equal(top.view(), gather(whole.view(), first, br).view());
  }
}

TEST(Sort, BadKeysAreRefused) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  std::vector<Column> cols;
  cols.push_back(column_of<std::int32_t>({1, 2}, TypeId::INT32, br));
  const Table t(std::move(cols));
  EXPECT_THROW(sort(t.view(), std::vector<SortKey>{}, br), logic_error);
  EXPECT_THROW(sort(t.view(), std::vector<SortKey>{{1}}, br), logic_error);
}

// Large float columns take the radix sort: NaN, infinities, -0.0 and 0.0 among random values
// come out in the comparator's order, equal values (every NaN, both zeros) in row order.
TEST(Sort, LargeFloatColumnsSortAsTheComparatorOrders) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const double special[] = {
      std::numeric_limits<double>::quiet_NaN(), -0.0, 0.0, std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(), 1.5,  -1.5};
  std::vector<double> d(100000);
  std::vector<float> f(d.size());
  std::uint64_t x = 12345;
  for (std::size_t i = 0; i < d.size(); ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    d[i] = (x >> 60) < 7 ? special[x >> 60]
                         : static_cast<double>(static_cast<std::int64_t>(x >> 11)) * 1e-9 - 4e6;
    f[i] = static_cast<float>(d[i]);
  }
  std::vector<Column> cols;
  cols.push_back(column_of<double>(d, TypeId::FLOAT64, br));
  cols.push_back(column_of<float>(f, TypeId::FLOAT32, br));
  const Table t(std::move(cols));
  for (std::size_t c = 0; c < 2; ++c) {
    for (const bool descending : {false, true}) {
      const std::vector<SortKey> keys{{c, descending}};
      const Rows order = sort_order(t.view(), keys);
      EXPECT_EQ(out_of_order(order, RowOrder(t.view(), t.view(), keys)), 0u)
          << "column " << c << (descending ? " descending" : "");
      EXPECT_EQ(order.size(), d.size());
    }
  }
}
