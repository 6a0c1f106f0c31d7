// The GPU join and gather against the CPU ones (which test_join.cpp checks against a
// nested-loop join): the same pairs for every join type and key set, with duplicates, nulls,
// strings and float keys; the same output rows as a multiset; gather byte for byte; keys that
// share their low hash bits (one shuffle partition's); empty sides and bad keys. Skips without
// a GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/gpu_join.hpp>
#include <spillway/table/join.hpp>
#include <spillway/table/partition.hpp>

#include "common.hpp"
#include "join_sides.hpp"
#include "table_common.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

using namespace spillway;

namespace {

using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

constexpr JoinType all_types[] = {JoinType::inner, JoinType::left, JoinType::left_semi,
                                  JoinType::left_anti, JoinType::full};

class GpuJoin : public ::testing::Test {
 protected:
  void SetUp() override { SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE); }

  Table on(const Table& t, MemoryType to) {
    Table d = copy_table(t, to, br, stream);
    stream.view().synchronize();
    return d;
  }
  std::vector<std::int32_t> to_host(const Buffer* b, std::size_t n) {
    std::vector<std::int32_t> v(n);
    if (n > 0) cuda::memcpy_async(v.data(), b->data(), n * 4, stream);
    stream.view().synchronize();
    return v;
  }
  /// The GPU's pairs (right -2 for semi and anti), sorted; checks that left rows ascend.
  Pairs gpu_pairs(const gpu::JoinMaps& m, JoinType type) {
    const auto l = to_host(m.left.get(), m.size);
    const auto r = m.right ? to_host(m.right.get(), m.size) : std::vector<std::int32_t>{};
    Pairs out;
    std::int64_t last = -1;
    for (std::size_t i = 0; i < m.size; ++i) {
      if (l[i] >= 0) {
        EXPECT_GE(l[i], last) << "left rows out of order at " << i;
        last = l[i];
      } else {
        EXPECT_EQ(type, JoinType::full);
        last = std::numeric_limits<std::int64_t>::max();  // only unmatched right rows follow
      }
      out.emplace_back(l[i], r.empty() ? -2 : r[i]);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static Pairs cpu_pairs(const JoinMaps& m) {
    Pairs out;
    for (std::size_t i = 0; i < m.left.size(); ++i) {
      out.emplace_back(m.left[i], m.right.empty() ? -2 : m.right[i]);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The GPU join of device copies of l and r against the CPU join, pairs and output rows.
  void expect_same_join(const Table& l, const Table& r, const std::vector<std::size_t>& keys,
                        JoinType type) {
    const Table dl = on(l, MemoryType::DEVICE);
    const Table dr = on(r, MemoryType::DEVICE);
    const JoinMaps want = join_maps(l.view(), keys, r.view(), keys, type);
    EXPECT_EQ(gpu_pairs(gpu::join_maps(dl.view(), keys, dr.view(), keys, type, br, stream), type),
              cpu_pairs(want));
    const Table cpu = hash_join(l.view(), keys, r.view(), keys, type, br);
    const Table got =
        on(gpu::hash_join(dl.view(), keys, dr.view(), keys, type, br, stream), MemoryType::HOST);
    EXPECT_EQ(got.names(), cpu.names());
    ASSERT_EQ(got.num_columns(), cpu.num_columns());
    for (std::size_t c = 0; c < got.num_columns(); ++c) {
      EXPECT_EQ(got.column(c).type(), cpu.column(c).type());
    }
    EXPECT_EQ(checksum(got.view()), checksum(cpu.view()));
  }

  test::TempDir dir;
  BufferResource br{test::small_config(dir.path())};
  OwningStream stream;
};

Column float_column(std::vector<double> v, BufferResource& br) {
  auto b = br.allocate(MemoryType::HOST, v.size() * 8);
  std::memcpy(b->data(), v.data(), v.size() * 8);
  return Column(TypeId::FLOAT64, v.size(), std::move(b));
}

}  // namespace

TEST_F(GpuJoin, EveryTypeAndKeySetEqualsTheCpuJoin) {
  const Table l = test::side(1500, 1, br);
  const Table r = test::side(900, 2, br);
  const std::vector<std::vector<std::size_t>> key_sets{{0}, {1}, {3},    {0, 1}, {1, 3}, {4},
                                                       {5}, {6}, {4, 0}, {5, 6}, {6, 3}};
  for (const auto& keys : key_sets) {
    for (JoinType type : all_types) {
      SCOPED_TRACE(std::string(to_string(type)) + " on " + std::to_string(keys.size()) +
                   " keys, first " + std::to_string(keys[0]));
      expect_same_join(l, r, keys, type);
    }
  }
}

// The chunked GPU join: every chunk within its bound, on the GPU, and together the same
// multiset of rows as the CPU join, for bounds that split one left row's matches (the INT32
// key: hundreds of matches a row) and a full join's unmatched right rows.
TEST_F(GpuJoin, InChunksOfBoundedSizeTheChunksAreTheWholeJoin) {
  const Table l = test::side(3000, 5, br);
  const Table r = test::side(700, 6, br);
  const Table dl = on(l, MemoryType::DEVICE);
  const Table dr = on(r, MemoryType::DEVICE);
  for (const std::vector<std::size_t>& keys : std::vector<std::vector<std::size_t>>{{1}, {0, 4}}) {
    for (JoinType type : all_types) {
      const Table cpu = hash_join(l.view(), keys, r.view(), keys, type, br);
      for (std::size_t chunk : {std::size_t{97}, std::size_t{5000}, std::size_t{1} << 30}) {
        SCOPED_TRACE(std::string(to_string(type)) + ", chunks of " + std::to_string(chunk));
        TableChecksum got;
        std::size_t chunks = 0;
        gpu::hash_join(dl.view(), keys, dr.view(), keys, type, br, stream, chunk, [&](Table&& t) {
          EXPECT_LE(t.num_rows(), chunk);
          EXPECT_EQ(t.names(), cpu.names());
          if (t.num_columns() > 0) {
            EXPECT_EQ(t.column(0).data().mem_type(), MemoryType::DEVICE);
          }
          got += gpu::checksum(t.view(), br, stream);
          ++chunks;
        });
        EXPECT_EQ(got, checksum(cpu.view()));
        const std::size_t fewest = std::max<std::size_t>(1, (cpu.num_rows() + chunk - 1) / chunk);
        EXPECT_GE(chunks, fewest);
        EXPECT_LE(chunks, fewest + (type == JoinType::full ? 1 : 0));
      }
    }
  }
}

TEST_F(GpuJoin, ManyRowsManyDuplicatesAndOnePartitionsKeys) {
  // 20k x 5k on the low-cardinality INT32 key (37 values: hundreds of matches per row), then
  // on a side whose rows all come from one partition of 64 (their row hashes share the low 6
  // bits), which would crowd a table indexed by the hash's low bits.
  const Table l = test::side(20000, 3, br);
  const Table r = test::side(5000, 4, br);
  expect_same_join(l, r, {1}, JoinType::inner);
  expect_same_join(l, r, {0, 3}, JoinType::full);
  // 200k x 50k rows of 100k distinct INT64 keys, the right side cut to its largest partition
  // of 64.
  const auto wide = [&](std::size_t rows, std::uint64_t seed) {
    RandomTableOptions o;
    o.rows = rows;
    o.types = {TypeId::INT64, TypeId::FLOAT64};
    o.key_cardinality = 100000;
    o.null_fraction = 0.01;
    o.seed = seed;
    return random_table(o, br);
  };
  const Table big_l = wide(200000, 5);
  const Table big_r = wide(50000, 6);
  const std::vector<std::size_t> k0{0};
  const PartitionedTable parts = hash_partition(big_r.view(), k0, 64, br);
  std::size_t p = 0;
  for (std::size_t q = 1; q < 64; ++q) {
    if (parts.offsets[q + 1] - parts.offsets[q] > parts.offsets[p + 1] - parts.offsets[p]) p = q;
  }
  ASSERT_GT(parts.offsets[p + 1] - parts.offsets[p], 500u);
  std::vector<std::int64_t> rows;
  for (std::size_t i = parts.offsets[p]; i < parts.offsets[p + 1]; ++i) {
    rows.push_back(static_cast<std::int64_t>(i));
  }
  const Table part = gather(parts.table.view(), rows, br);
  for (JoinType type : all_types) {
    SCOPED_TRACE(to_string(type));
    expect_same_join(big_l, part, k0, type);
  }
}

TEST_F(GpuJoin, FloatKeysCompareAsSqlDoes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Column> lc, rc;
  lc.push_back(float_column({0.0, nan, 1.5, 2.0}, br));
  rc.push_back(float_column({-0.0, nan, 1.5, 3.0}, br));
  const Table l(std::move(lc), {"x"});
  const Table r(std::move(rc), {"x"});
  const Table dl = on(l, MemoryType::DEVICE);
  const Table dr = on(r, MemoryType::DEVICE);
  const std::vector<std::size_t> k{0};
  EXPECT_EQ(gpu_pairs(gpu::join_maps(dl.view(), k, dr.view(), k, JoinType::inner, br, stream),
                      JoinType::inner),
            (Pairs{{0, 0}, {1, 1}, {2, 2}}));
}

TEST_F(GpuJoin, GatherEqualsTheCpuGatherByteForByte) {
  const Table t = test::side(3000, 7, br);
  const Table dt = on(t, MemoryType::DEVICE);
  std::vector<std::int64_t> rows;
  for (std::size_t i = 0; i < 5000; ++i) {
    rows.push_back(i % 11 == 0 ? -1 : static_cast<std::int64_t>(test::mix(i) % 3000));
  }
  std::vector<std::int32_t> rows32(rows.begin(), rows.end());
  auto d_rows = br.allocate(MemoryType::DEVICE, rows32.size() * 4, stream);
  cuda::memcpy_async(d_rows->data(), rows32.data(), rows32.size() * 4, stream);
  const Table got = on(gpu::gather(dt.view(), reinterpret_cast<const std::int32_t*>(d_rows->data()),
                                   rows32.size(), true, br, stream),
                       MemoryType::HOST);
  const Table want = gather(t.view(), rows, br);
  EXPECT_EQ(got.names(), want.names());
  test::expect_tables_equal(got.view(), want.view());
  const Table none = on(gpu::gather(dt.view(), nullptr, 0, false, br, stream), MemoryType::HOST);
  EXPECT_EQ(none.num_rows(), 0u);
  EXPECT_EQ(none.num_columns(), t.num_columns());
}

TEST_F(GpuJoin, EmptySidesAndBadKeysAreHandled) {
  const Table l = test::side(100, 5, br);
  const Table empty = test::side(0, 6, br);
  for (JoinType type : all_types) {
    SCOPED_TRACE(to_string(type));
    expect_same_join(l, empty, {0}, type);
    expect_same_join(empty, l, {0}, type);
    expect_same_join(empty, empty, {0}, type);
  }
  const Table dl = on(l, MemoryType::DEVICE);
  const std::vector<std::size_t> a{0}, b{1}, none{}, far{9};
  EXPECT_THROW(gpu::join_maps(dl.view(), a, dl.view(), b, JoinType::inner, br, stream),
               logic_error);
  EXPECT_THROW(gpu::join_maps(dl.view(), none, dl.view(), none, JoinType::inner, br, stream),
               logic_error);
  EXPECT_THROW(gpu::hash_join(dl.view(), far, dl.view(), a, JoinType::inner, br, stream),
               logic_error);
}
