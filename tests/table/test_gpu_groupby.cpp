// The GPU group-by against the CPU one (which test_groupby.cpp checks against a std::map): the
// same groups as a multiset of output rows, with the same names and types, for every op on
// every fixed-width type, keys of several types with nulls and strings, float keys compared as
// SQL does; empty tables and bad arguments. Float sums and means are taken of integral values,
// which add up exactly in any order. Skips without a GPU.
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu_groupby.hpp>
#include <spillway/table/groupby.hpp>

#include "common.hpp"
#include "join_sides.hpp"

#include <cstring>
#include <limits>
#include <vector>

using namespace spillway;

namespace {

class GpuGroupBy : public ::testing::Test {
 protected:
  void SetUp() override { SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE); }

  Table on(const Table& t, MemoryType to) {
    Table d = copy_table(t, to, br, stream);
    stream.view().synchronize();
    return d;
  }
  void expect_same(const Table& t, const std::vector<std::size_t>& keys,
                   const std::vector<Aggregation>& aggs) {
    const Table want = groupby(t.view(), keys, aggs, br);
    const Table d = on(t, MemoryType::DEVICE);
    const Table got = on(gpu::groupby(d.view(), keys, aggs, br, stream), MemoryType::HOST);
    EXPECT_EQ(got.names(), want.names());
    ASSERT_EQ(got.num_columns(), want.num_columns());
    for (std::size_t c = 0; c < got.num_columns(); ++c) {
      EXPECT_EQ(got.column(c).type(), want.column(c).type()) << "column " << c;
    }
    EXPECT_EQ(got.num_rows(), want.num_rows());
    EXPECT_EQ(checksum(got.view()), checksum(want.view()));
    for (std::size_t c = 0; c < got.num_columns(); ++c) {  // which column differs
      const TableView g{{got.view().columns[c]}, {""}};
      const TableView w{{want.view().columns[c]}, {""}};
      EXPECT_EQ(checksum(g), checksum(w)) << "column " << want.names()[c];
    }
  }

  test::TempDir dir;
  BufferResource br{test::small_config(dir.path())};
  OwningStream stream;
};

/// Every type but STRING as values (the FLOAT columns integral), an INT64 and an INT32 key
/// with nulls, and a STRING key made from the INT32 one.
Table values_table(std::size_t rows, std::uint64_t seed, BufferResource& br) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = {TypeId::INT64,  TypeId::INT32,  TypeId::INT8,   TypeId::INT16, TypeId::UINT8,
             TypeId::UINT16, TypeId::UINT32, TypeId::UINT64, TypeId::BOOL8, TypeId::INT32};
  o.key_cardinality = 40;
  o.null_fraction = 0.08;
  o.seed = seed;
  Table t = random_table(o, br);
  std::vector<Column> cols = std::move(t).release();
  // FLOAT64 and FLOAT32 columns of the last INT32 column's values (integral, nulls kept).
  const ColumnView ints = cols.back().view();
  for (TypeId ft : {TypeId::FLOAT64, TypeId::FLOAT32}) {
    auto data = br.allocate(MemoryType::HOST, rows * size_of(ft));
    for (std::size_t i = 0; i < rows; ++i) {
      const std::int32_t x = ints.value<std::int32_t>(i) % 100000;
      if (ft == TypeId::FLOAT64) {
        reinterpret_cast<double*>(data->data())[i] = x;
      } else {
        reinterpret_cast<float*>(data->data())[i] = static_cast<float>(x);
      }
    }
    std::unique_ptr<Buffer> mask;
    if (ints.nullable()) {
      mask = br.allocate(MemoryType::HOST, mask_bytes(rows));
      std::memcpy(mask->data(), ints.null_mask, mask_bytes(rows));
    }
    cols.emplace_back(ft, rows, std::move(data), nullptr, std::move(mask));
  }
  cols.push_back(test::strings_of(cols[1].view(), br));
  // Decimal, timestamp and date columns of the value column's values, then a decimal key made
  // from the INT32 key.
  const ColumnView v = cols[9].view();
  cols.push_back(test::derived_of(v, decimal128(25, 3), br));
  cols.push_back(test::derived_of(v, TypeId::TIMESTAMP_MICROSECONDS, br));
  cols.push_back(test::derived_of(v, TypeId::DATE32, br));
  cols.push_back(test::derived_of(cols[1].view(), decimal128(12, 0), br));
  return Table(std::move(cols), {"k", "j", "i8", "i16", "u8", "u16", "u32", "u64", "b", "v", "f64",
                                 "f32", "s", "dec", "ts", "day", "kdec"});
}

std::vector<Aggregation> every_op(std::size_t first, std::size_t last) {
  std::vector<Aggregation> out;
  for (std::size_t c = first; c < last; ++c) {
    for (AggOp op : {AggOp::count, AggOp::sum, AggOp::min, AggOp::max, AggOp::mean}) {
      // BOOL8, the timestamp and the date have no sum or mean.
      const bool no_sum = c == 8 || c == 14 || c == 15;
      if (no_sum && (op == AggOp::sum || op == AggOp::mean)) continue;
      out.push_back({c, op});
    }
  }
  return out;
}

}  // namespace

TEST_F(GpuGroupBy, EveryOpAndTypeEqualsTheCpuGroupBy) {
  const Table t = values_table(30000, 1, br);
  const std::vector<std::vector<std::size_t>> key_sets{{0},     {1},  {12},    {0, 1},
                                                       {1, 12}, {16}, {15, 0}, {14}};
  for (const auto& keys : key_sets) {
    SCOPED_TRACE(std::to_string(keys.size()) + " keys, first " + std::to_string(keys[0]));
    expect_same(t, keys, every_op(2, 12));
    expect_same(t, keys, every_op(13, 16));
  }
  expect_same(t, {0}, {{12, AggOp::count}, {1, AggOp::count}});  // counts of keys and strings
}

TEST_F(GpuGroupBy, ManyGroupsAndFloatKeysAsSqlComparesThem) {
  RandomTableOptions o;
  o.rows = 200000;
  o.types = {TypeId::INT64, TypeId::INT64};
  o.key_cardinality = 150000;
  o.null_fraction = 0.01;
  o.seed = 2;
  const Table many = random_table(o, br);
  expect_same(many, {0}, {{1, AggOp::sum}, {1, AggOp::min}, {1, AggOp::count}});
  // -0.0 and 0.0 one group, every NaN one group, null one group.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> keys{0.0, -0.0, nan, -nan, 1.5, 1.5, 2.0};
  auto kb = br.allocate(MemoryType::HOST, keys.size() * 8);
  std::memcpy(kb->data(), keys.data(), keys.size() * 8);
  auto mask = br.allocate(MemoryType::HOST, 1);
  *reinterpret_cast<std::uint8_t*>(mask->data()) = 0x3F;  // the last row null
  std::vector<Column> cols;
  cols.emplace_back(TypeId::FLOAT64, keys.size(), std::move(kb), nullptr, std::move(mask));
  const Table f(std::move(cols), {"x"});
  const Table got = on(gpu::groupby(on(f, MemoryType::DEVICE).view(), std::vector<std::size_t>{0},
                                    std::vector<Aggregation>{{0, AggOp::count}}, br, stream),
                       MemoryType::HOST);
  EXPECT_EQ(got.num_rows(), 4u);
  expect_same(f, {0}, {{0, AggOp::count}});
}

TEST_F(GpuGroupBy, EmptyTablesAndBadArgumentsAreHandled) {
  const Table empty = values_table(0, 3, br);
  expect_same(empty, {0}, every_op(2, 4));
  const Table t = on(values_table(100, 4, br), MemoryType::DEVICE);
  const std::vector<std::size_t> none{}, far{40}, k{0};
  const std::vector<Aggregation> sum_of_string{{12, AggOp::sum}}, far_value{{40, AggOp::min}};
  EXPECT_THROW(gpu::groupby(t.view(), none, {}, br, stream), logic_error);
  EXPECT_THROW(gpu::groupby(t.view(), far, {}, br, stream), logic_error);
  EXPECT_THROW(gpu::groupby(t.view(), k, sum_of_string, br, stream), logic_error);
  EXPECT_THROW(gpu::groupby(t.view(), k, far_value, br, stream), logic_error);
}
