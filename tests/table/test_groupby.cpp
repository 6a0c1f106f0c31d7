// The local group-by against a std::map of the same rows: the groups (null keys one group),
// counts, sums, minima, maxima and means with null values skipped; the output's types and
// names; clear errors.
#include <spillway/core/error.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/groupby.hpp>

#include "common.hpp"

#include <cmath>
#include <map>
#include <optional>
#include <tuple>

using namespace spillway;

namespace {

struct Want {
  std::int64_t count{0};
  std::int64_t sum{0};
  std::optional<std::int32_t> min, max;
  double fsum{0};
  std::int64_t fcount{0};
};

}  // namespace

TEST(GroupBy, EqualsAMapOfTheSameRows) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 20000;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::FLOAT64, TypeId::INT32};
  o.key_cardinality = 50;
  o.null_fraction = 0.1;
  o.seed = 3;
  Table t0 = random_table(o, br);
  Table t(std::move(t0).release(), {"k1", "k2", "f", "v"});
  const TableView v = t.view();
  // Keys (k1, k2), a null key as its own value (nullopt).
  using Key = std::tuple<std::optional<std::int64_t>, std::optional<std::int32_t>>;
  std::map<Key, Want> want;
  for (std::size_t r = 0; r < v.num_rows(); ++r) {
    const Key k{v.columns[0].is_valid(r) ? std::optional(v.columns[0].value<std::int64_t>(r))
                                         : std::nullopt,
                v.columns[1].is_valid(r) ? std::optional(v.columns[1].value<std::int32_t>(r))
                                         : std::nullopt};
    Want& w = want[k];
    if (v.columns[3].is_valid(r)) {
      const std::int32_t x = v.columns[3].value<std::int32_t>(r);
      ++w.count;
      w.sum += x;
      w.min = w.min ? std::min(*w.min, x) : x;
      w.max = w.max ? std::max(*w.max, x) : x;
    }
    if (v.columns[2].is_valid(r)) {
      w.fsum += v.columns[2].value<double>(r);
      ++w.fcount;
    }
  }
  const std::vector<std::size_t> keys{0, 1};
  const std::vector<Aggregation> aggs{{3, AggOp::count}, {3, AggOp::sum},  {3, AggOp::min},
                                      {3, AggOp::max},   {2, AggOp::mean}, {2, AggOp::sum}};
  const Table g = groupby(v, keys, aggs, br);
  EXPECT_EQ(g.names(), (std::vector<std::string>{"k1", "k2", "v_count", "v_sum", "v_min", "v_max",
                                                 "f_mean", "f_sum"}));
  const TableView gv = g.view();
  EXPECT_EQ(gv.columns[2].type, TypeId::INT64);
  EXPECT_EQ(gv.columns[3].type, TypeId::INT64);
  EXPECT_EQ(gv.columns[4].type, TypeId::INT32);
  EXPECT_EQ(gv.columns[6].type, TypeId::FLOAT64);
  ASSERT_EQ(g.num_rows(), want.size());
  for (std::size_t i = 0; i < g.num_rows(); ++i) {
    const Key k{gv.columns[0].is_valid(i) ? std::optional(gv.columns[0].value<std::int64_t>(i))
                                          : std::nullopt,
                gv.columns[1].is_valid(i) ? std::optional(gv.columns[1].value<std::int32_t>(i))
                                          : std::nullopt};
    ASSERT_EQ(want.count(k), 1u) << "group " << i << " is not in the input";
    const Want& w = want.at(k);
    EXPECT_EQ(gv.columns[2].value<std::int64_t>(i), w.count);
    EXPECT_EQ(gv.columns[3].is_valid(i), w.count > 0);
    if (w.count > 0) {
      EXPECT_EQ(gv.columns[3].value<std::int64_t>(i), w.sum);
      EXPECT_EQ(gv.columns[4].value<std::int32_t>(i), *w.min);
      EXPECT_EQ(gv.columns[5].value<std::int32_t>(i), *w.max);
    }
    EXPECT_EQ(gv.columns[6].is_valid(i), w.fcount > 0);
    if (w.fcount > 0) {
      EXPECT_NEAR(gv.columns[6].value<double>(i), w.fsum / double(w.fcount), 1e-9);
      EXPECT_NEAR(gv.columns[7].value<double>(i), w.fsum, 1e-6);
    }
  }
}

TEST(GroupBy, StringKeysNaNAndEmptyTables) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 0;
  o.types = {TypeId::STRING, TypeId::INT32};
  const Table empty = random_table(o, br);
  const std::vector<std::size_t> k{0};
  const std::vector<Aggregation> count{{1, AggOp::count}};
  EXPECT_EQ(groupby(empty.view(), k, count, br).num_rows(), 0u);
  o.rows = 5000;
  o.max_string = 2;  // few distinct strings: groups of many rows
  o.null_fraction = 0.2;
  const Table t = random_table(o, br);
  const Table g = groupby(t.view(), k, count, br);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < g.num_rows(); ++i)
    total += g.view().columns[1].value<std::int64_t>(i);
  std::int64_t valid = 0;
  for (std::size_t r = 0; r < t.num_rows(); ++r) valid += t.view().columns[1].is_valid(r) ? 1 : 0;
  EXPECT_EQ(total, valid);  // every non-null value counted once, in some group
  EXPECT_LT(g.num_rows(), t.num_rows());
  const std::vector<Aggregation> bad_sum{{0, AggOp::sum}}, bad_min{{0, AggOp::min}},
      far{{7, AggOp::count}};
  EXPECT_THROW(groupby(t.view(), k, bad_sum, br), logic_error);
  EXPECT_THROW(groupby(t.view(), k, bad_min, br), logic_error);
  EXPECT_THROW(groupby(t.view(), k, far, br), logic_error);
  const std::vector<std::size_t> none{}, k9{9};
  EXPECT_THROW(groupby(t.view(), none, count, br), logic_error);
  EXPECT_THROW(groupby(t.view(), k9, count, br), logic_error);
}

// Decimals sum exactly in 128 bits (carries from the low half, negative values) into
// decimal128(38, scale), and have min, max and mean (their scale applied); dates and
// timestamps have count, min and max, and no sum or mean.
// The mean of decimals whose sum is a small negative number (its low half near 2^64): every
// digit kept. hi * 2^64 + lo made -1053783 hundredths 937 units off.
TEST(GroupBy, TheMeanOfSmallNegativeDecimalsKeepsItsDigits) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const std::vector<std::int64_t> hundredths{-1053783, -7, 3, -2};
  auto data = br.allocate(MemoryType::HOST, hundredths.size() * sizeof(Int128));
  auto keys = br.allocate(MemoryType::HOST, hundredths.size() * sizeof(std::int32_t));
  for (std::size_t r = 0; r < hundredths.size(); ++r) {
    const Int128 v = Int128::from(hundredths[r]);
    std::memcpy(data->data() + r * sizeof(Int128), &v, sizeof v);
    const std::int32_t k = r == 0 ? 0 : 1;  // group 0: -1053783; group 1: -7, 3, -2
    std::memcpy(keys->data() + r * sizeof k, &k, sizeof k);
  }
  std::vector<Column> cols;
  cols.emplace_back(TypeId::INT32, hundredths.size(), std::move(keys));
  cols.emplace_back(decimal128(18, 2), hundredths.size(), std::move(data));
  const Table t(std::move(cols), {"k", "d"});
  const std::vector<std::size_t> by{0};
  const std::vector<Aggregation> mean{{1, AggOp::mean}};
  const Table g = groupby(t.view(), by, mean, br);
  ASSERT_EQ(g.num_rows(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const bool first = g.view().columns[0].value<std::int32_t>(i) == 0;
    EXPECT_DOUBLE_EQ(g.view().columns[1].value<double>(i), first ? -10537.83 : -0.02) << i;
  }
}

TEST(GroupBy, DecimalsDatesAndTimestamps) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 30000;
  o.types = {TypeId::INT32, decimal128(20, 2), TypeId::DATE32, TypeId::TIMESTAMP_MILLISECONDS};
  o.key_cardinality = 60;
  o.null_fraction = 0.1;
  o.seed = 11;
  const Table t = random_table(o, br);
  const TableView v = t.view();
  struct Acc {
    std::int64_t n{0};
    Int128 sum, lo = Int128::max(), hi = Int128::lowest();
    std::int32_t first_day{INT32_MAX}, last_day{INT32_MIN};
    std::int64_t ts_n{0};
  };
  std::map<std::optional<std::int32_t>, Acc> want;
  for (std::size_t r = 0; r < v.num_rows(); ++r) {
    Acc& a = want[v.columns[0].is_valid(r) ? std::optional(v.columns[0].value<std::int32_t>(r))
                                           : std::nullopt];
    if (v.columns[1].is_valid(r)) {
      const Int128 x = v.columns[1].value<Int128>(r);
      ++a.n;
      a.sum += x;
      if (x < a.lo) a.lo = x;
      if (a.hi < x) a.hi = x;
    }
    if (v.columns[2].is_valid(r)) {
      a.first_day = std::min(a.first_day, v.columns[2].value<std::int32_t>(r));
      a.last_day = std::max(a.last_day, v.columns[2].value<std::int32_t>(r));
    }
    a.ts_n += v.columns[3].is_valid(r) ? 1 : 0;
  }
  const std::vector<std::size_t> keys{0};
  const std::vector<Aggregation> aggs{{1, AggOp::sum},   {1, AggOp::min}, {1, AggOp::max},
                                      {1, AggOp::mean},  {2, AggOp::min}, {2, AggOp::max},
                                      {3, AggOp::count}, {3, AggOp::max}};
  const Table g = groupby(v, keys, aggs, br);
  EXPECT_EQ(g.column(1).type(), decimal128(38, 2));
  EXPECT_EQ(g.column(2).type(), decimal128(20, 2));
  EXPECT_EQ(g.column(4).type(), TypeId::FLOAT64);
  EXPECT_EQ(g.column(5).type(), TypeId::DATE32);
  EXPECT_EQ(g.column(8).type(), TypeId::TIMESTAMP_MILLISECONDS);
  const TableView gv = g.view();
  ASSERT_EQ(g.num_rows(), want.size());
  bool carried = false;  // some sum's high half is beyond the sign of its low half
  for (std::size_t i = 0; i < g.num_rows(); ++i) {
    const Acc& a =
        want.at(gv.columns[0].is_valid(i) ? std::optional(gv.columns[0].value<std::int32_t>(i))
                                          : std::nullopt);
    ASSERT_EQ(gv.columns[1].is_valid(i), a.n > 0);
    if (a.n == 0) continue;
    EXPECT_EQ(gv.columns[1].value<Int128>(i), a.sum);
    EXPECT_EQ(gv.columns[2].value<Int128>(i), a.lo);
    EXPECT_EQ(gv.columns[3].value<Int128>(i), a.hi);
    EXPECT_NEAR(gv.columns[4].value<double>(i), a.sum.to_double() / 100 / double(a.n),
                1e-9 * std::abs(a.sum.to_double() / 100));
    EXPECT_EQ(gv.columns[5].value<std::int32_t>(i), a.first_day);
    EXPECT_EQ(gv.columns[6].value<std::int32_t>(i), a.last_day);
    EXPECT_EQ(gv.columns[7].value<std::int64_t>(i), a.ts_n);
    carried = carried || (a.sum.hi != 0 && a.sum.hi != -1);
  }
  EXPECT_TRUE(carried) << "the test's sums never left 64 bits";
  for (const Aggregation bad : {Aggregation{2, AggOp::sum}, Aggregation{3, AggOp::mean}}) {
    const std::vector<Aggregation> one{bad};
    EXPECT_THROW(groupby(v, keys, one, br), logic_error);
  }
}
