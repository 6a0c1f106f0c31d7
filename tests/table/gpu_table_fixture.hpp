#pragma once
// The GPU table tests' fixture (test_gpu_partition.cpp, test_gpu_pack.cpp): random host tables
// of every type, copies to and from the device, and byte-for-byte comparisons of tables and
// packs. Skips without a GPU.
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include "common.hpp"
#include "table_common.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace spillway::test {

/// Every meaningful byte equal: values, string offsets and characters, validity bytes.
inline void expect_same_bytes(const TableView& a, const TableView& b) {
  ASSERT_EQ(a.num_columns(), b.num_columns());
  ASSERT_EQ(a.num_rows(), b.num_rows());
  ASSERT_EQ(a.names, b.names);
  for (std::size_t c = 0; c < a.num_columns(); ++c) {
    const ColumnView& x = a.columns[c];
    const ColumnView& y = b.columns[c];
    ASSERT_EQ(x.type, y.type) << "column " << c;
    ASSERT_EQ(x.nullable(), y.nullable()) << "column " << c;
    ASSERT_EQ(x.data_bytes(), y.data_bytes()) << "column " << c;
    if (x.data_bytes() > 0) {
      EXPECT_EQ(std::memcmp(x.data, y.data, x.data_bytes()), 0) << "data of column " << c;
    }
    if (x.type == TypeId::STRING) {
      EXPECT_EQ(std::memcmp(x.offsets, y.offsets, (x.size + 1) * 4), 0) << "offsets of " << c;
    }
    if (x.nullable() && x.size > 0) {
      EXPECT_EQ(std::memcmp(x.null_mask, y.null_mask, mask_bytes(x.size)), 0) << "mask of " << c;
    }
  }
}

inline void expect_same_packs(std::vector<PackedData>& cpu, std::vector<PackedData>& gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  for (std::size_t p = 0; p < cpu.size(); ++p) {
    ASSERT_EQ(gpu[p].payload->mem_type(), MemoryType::HOST);
    ASSERT_EQ(cpu[p].metadata, gpu[p].metadata) << "metadata of part " << p;
    ASSERT_EQ(cpu[p].payload->size(), gpu[p].payload->size()) << "payload of part " << p;
    const UnpackedTable x = unpack(std::move(cpu[p]));
    const UnpackedTable y = unpack(std::move(gpu[p]));
    SCOPED_TRACE("part " + std::to_string(p));
    expect_same_bytes(x.view(), y.view());
  }
}

class GpuTable : public ::testing::Test {
 protected:
  void SetUp() override { SPILLWAY_SKIP_UNLESS_LIVE(br, MemoryType::DEVICE); }

  Table host_table(std::size_t rows, double nulls, std::uint64_t seed = 7) {
    RandomTableOptions o;
    o.rows = rows;
    o.types = test::all_types;
    o.null_fraction = nulls;
    o.key_cardinality = 500;
    o.max_string = 24;
    o.seed = seed;
    return random_table(o, br);
  }
  Table on_device(const Table& t) {
    Table d = copy_table(t, MemoryType::DEVICE, br, stream);
    stream.view().synchronize();
    return d;
  }
  Table on_host(const Table& t) {
    Table h = copy_table(t, MemoryType::HOST, br, stream);
    stream.view().synchronize();
    return h;
  }
  /// The packed data with its payload moved to HOST.
  PackedData to_host(PackedData p) {
    p.payload = br.move(std::move(p.payload), MemoryType::HOST, stream);
    p.payload->wait();
    return p;
  }

  test::TempDir dir;
  BufferResource br{test::small_config(dir.path())};
  OwningStream stream;  // the default stream without a GPU
};
}  // namespace spillway::test
