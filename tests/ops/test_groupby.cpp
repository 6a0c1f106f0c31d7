// The distributed group-by on 1-3 local ranks: the union of every rank's output partitions is
// the same multiset of groups (checksum) as the local group-by of the whole input, for every
// op, with null keys and values, string keys, inputs in pieces, a small host limit that makes
// the shuffle spill, and a rank without rows; the same on the GPU with the input in device
// memory (skipped without a GPU); clear errors before anything is sent.
#include <spillway/comm/launch.hpp>
#include <spillway/comm/single.hpp>
#include <spillway/core/error.hpp>
#include <spillway/ops/groupby.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>

#include "common.hpp"
#include "ops/table_pieces.hpp"
#include "table/join_sides.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <set>

using namespace spillway;

namespace {

/// Rank r's rows (none for `empty_rank`): an INT64 key (300 values, nulls), an INT32 value
/// (nulls), a STRING key from the INT32 one, and an INT64 value.
Table part(Rank r, std::size_t rows, Rank empty_rank, BufferResource& br) {
  RandomTableOptions o;
  o.rows = r == empty_rank ? 0 : rows;
  o.types = {TypeId::INT64, TypeId::INT32, TypeId::INT64};
  o.key_cardinality = 300;
  o.null_fraction = 0.05;
  o.seed = 40 + static_cast<std::uint64_t>(r);
  Table t = random_table(o, br);
  std::vector<Column> cols = std::move(t).release();
  Column s = test::strings_of(cols[1].view(), br);
  cols.push_back(std::move(s));
  return Table(std::move(cols), {"k", "v", "w", "s"});
}

const std::vector<Aggregation> every_op{{1, AggOp::count}, {1, AggOp::sum},   {1, AggOp::min},
                                        {1, AggOp::max},   {1, AggOp::mean},  {2, AggOp::sum},
                                        {2, AggOp::mean},  {3, AggOp::count}, {2, AggOp::max}};

/// How a partition's partials are merged: the partitions and merge_bytes of the group-by.
struct Merge {
  std::uint32_t partitions{5};
  std::size_t bytes{0};
};

void check(int nranks, const std::vector<std::size_t>& keys, bool on_gpu, std::size_t limit_mib,
           Rank empty_rank, std::size_t npieces, std::size_t rows = 4000, Merge merge = {}) {
  SCOPED_TRACE(std::to_string(nranks) + " ranks, " + std::to_string(keys.size()) + " keys" +
               (on_gpu ? ", on the GPU" : "") + ", " + std::to_string(npieces) + " pieces of " +
               std::to_string(rows) + " rows, merged " + std::to_string(merge.bytes) + " bytes");
  test::TempDir dir;
  TableChecksum want;
  {
    BufferResource br(test::host_config(dir.path()));
    std::vector<Table> parts;
    std::vector<TableView> views;
    for (Rank r = 0; r < nranks; ++r) parts.push_back(part(r, rows, empty_rank, br));
    for (const Table& t : parts) views.push_back(t.view());
    want = checksum(groupby(concat(views, br).view(), keys, every_op, br).view());
  }
  auto cfg = on_gpu ? test::small_config(dir.path()) : test::host_config(dir.path());
  if (limit_mib > 0) {
    cfg.limits[index(on_gpu ? MemoryType::DEVICE : MemoryType::HOST)] =
        Limit::bytes(limit_mib * MiB);
  }
  std::mutex m;
  TableChecksum got;
  std::set<std::uint32_t> seen;
  ops::GroupByOptions o;
  o.partitions = merge.partitions;
  o.merge_bytes = merge.bytes;
  const int rc =
      run_ranks(RankKind::local, nranks, cfg, [&](Communicator& comm, BufferResource& br) {
        const Table t = part(comm.rank(), rows, empty_rank, br);
        const MemoryType to = on_gpu ? MemoryType::DEVICE : MemoryType::HOST;
        ops::groupby(comm, br, test::pieces(t, npieces, to, br), keys, every_op, o,
                     [&](std::uint32_t pid, Table&& g) {
                       EXPECT_EQ(g.column(0).data().mem_type(), to);
                       const TableChecksum c =
                           on_gpu ? gpu::checksum(g.view(), br, br.stream()) : checksum(g.view());
                       std::lock_guard lock(m);
                       EXPECT_TRUE(seen.insert(pid).second) << "partition " << pid << " twice";
                       got += c;
                     });
        return 0;
      });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(seen.size(), merge.partitions);
  EXPECT_GT(want.rows, 100u);
  EXPECT_EQ(got, want) << "groups " << got.rows << ", want " << want.rows;
}

}  // namespace

TEST(GroupByOp, EqualsTheLocalGroupByOfTheWholeInput) {
  for (int n : {1, 2, 3}) check(n, {0}, false, 0, -1, 1);
  check(2, {0, 3}, false, 0, -1, 3);
  check(3, {3}, false, 2, 1, 4);  // a 2 MiB host limit, a rank without rows
}

// 3 ranks x 200 pieces of 200 rows into 2 partitions: about 4.8 MiB of partials a partition,
// more than the 3 MiB limit; its groups (300) fit, and the partials are merged in batches of an
// eighth of the limit. Then one chunk at a time without a limit.
TEST(GroupByOp, APartitionWhosePartialsOutgrowTheLimitIsMergedInBatches) {
  check(3, {0}, false, 3, -1, 200, 40000, Merge{2, 0});
  check(2, {0, 3}, false, 0, -1, 6, 4000, Merge{3, 1});
}

TEST(GroupByOp, OnTheGpuEqualsTheLocalGroupByOfTheWholeInput) {
  {
    test::TempDir dir;
    BufferResource br(test::small_config(dir.path()));
    SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE);
  }
  for (int n : {1, 3}) check(n, {0}, true, 0, -1, 1);
  check(2, {0, 3}, true, 1, 0, 3);                      // a 1 MiB device limit, a rank without rows
  check(3, {0}, true, 1, -1, 100, 20000, Merge{2, 0});  // partials outgrow the device limit
  check(2, {0, 3}, true, 0, -1, 6, 4000, Merge{3, 1});  // one chunk at a time
}

TEST(GroupByOp, BadArgumentsAreAnErrorBeforeAnythingIsSent) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  auto comm = make_single_communicator();
  const Table t = part(0, 10, -1, br);
  const auto ignore = [](std::uint32_t, Table&&) {};
  const std::vector<std::size_t> k{0}, far{9};
  const std::vector<Aggregation> sum_of_strings{{3, AggOp::sum}};
  EXPECT_THROW(
      ops::groupby(*comm, br, test::pieces(t, 1, MemoryType::HOST, br), far, every_op, {}, ignore),
      logic_error);
  EXPECT_THROW(ops::groupby(*comm, br, test::pieces(t, 1, MemoryType::HOST, br), k, sum_of_strings,
                            {}, ignore),
               logic_error);
  EXPECT_THROW(
      ops::groupby(*comm, br, test::pieces(t, 0, MemoryType::HOST, br), k, every_op, {}, ignore),
      logic_error);
}
