// pack / unpack / split_and_pack / concat round trips, and unpack of corrupt bytes.
#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>
#include <spillway/table/pack.hpp>

#include <spillway/table/pack_format.hpp>
#include "common.hpp"
#include "table_common.hpp"

#include <random>

#include <optional>
#include <tuple>

using namespace spillway;

namespace {

Table mixed_table(BufferResource& br, std::size_t rows, double nulls, std::uint64_t seed = 1) {
  RandomTableOptions o;
  o.rows = rows;
  o.types = test::all_types;
  o.null_fraction = nulls;
  o.min_string = 0;  // empty strings too
  o.max_string = 12;
  o.seed = seed;
  return random_table(o, br);
}
}  // namespace

class PackRoundTrip : public ::testing::TestWithParam<std::tuple<std::size_t, double>> {};

TEST_P(PackRoundTrip, EveryTypeWithAndWithoutNulls) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const auto [rows, nulls] = GetParam();
  Table t = mixed_table(br, rows, nulls);
  auto unpacked = unpack(pack(t.view(), br));
  test::expect_tables_equal(t.view(), unpacked.view());
  EXPECT_EQ(unpacked.view().names, t.names());
  EXPECT_EQ(checksum(t.view()), checksum(unpacked.view()));
}

INSTANTIATE_TEST_SUITE_P(Sizes, PackRoundTrip,
                         ::testing::Combine(::testing::Values(0, 1, 7, 8, 9, 1000),
                                            ::testing::Values(0.0, 0.3)));

TEST(PackFormat, EncodingFromTheSchemaIsEncodingTheLayout) {
  // partition_and_pack on the GPU encodes each partition's metadata straight from the schema
  // (encode(schema, rows, chars)); unpack reads what encode(make_layout(...)) writes.
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 10, 0.2);
  TableView v = t.view();
  v.names.clear();
  for (std::size_t c = 0; c < v.num_columns(); ++c) {
    v.names.push_back(c % 3 == 0 ? std::string() : "column " + std::to_string(c));
  }
  for (const std::size_t rows :
       {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{1000}}) {
    std::vector<std::size_t> chars(v.num_columns(), 0);
    for (std::size_t c = 0; c < chars.size(); ++c) chars[c] = rows * c % 17;
    const auto layout = detail::make_layout(v, rows, chars);
    EXPECT_EQ(detail::encode(v, rows, chars), detail::encode(layout)) << rows << " rows";
    const auto none = [](std::size_t, const detail::BufferSpan&, const detail::BufferSpan&,
                         const detail::BufferSpan&) {};
    EXPECT_EQ(detail::place_buffers(v, rows, chars, none), layout.payload_size);
  }
}

TEST(SplitAndPack, PartsAreTheRowRanges) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 1001, 0.2);
  const std::vector<std::size_t> splits{0, 3, 3, 500, 1001};
  auto parts = split_and_pack(t.view(), splits, br);
  ASSERT_EQ(parts.size(), splits.size() + 1);
  const std::vector<std::size_t> bounds{0, 0, 3, 3, 500, 1001, 1001};
  TableChecksum sum;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    auto u = unpack(std::move(parts[p]));
    ASSERT_EQ(u.view().num_rows(), bounds[p + 1] - bounds[p]) << "part " << p;
    for (std::size_t r = 0; r < u.view().num_rows(); ++r) {
      ASSERT_TRUE(test::rows_equal(t.view(), bounds[p] + r, u.view(), r)) << p << ":" << r;
    }
    sum += checksum(u.view());
  }
  EXPECT_EQ(sum, checksum(t.view()));
  const std::vector<std::size_t> bad{5, 2};
  EXPECT_THROW((void)split_and_pack(t.view(), bad, br), logic_error);
  const std::vector<std::size_t> past{2000};
  EXPECT_THROW((void)split_and_pack(t.view(), past, br), logic_error);
}

TEST(Concat, UnpackAndConcatRestoresTheTable) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 777, 0.1);
  const std::vector<std::size_t> splits{100, 101, 600};
  Table back = unpack_and_concat(split_and_pack(t.view(), splits, br), br);
  test::expect_tables_equal(t.view(), back.view());
  // Mixing a nullable and a non-nullable part gives a nullable column with valid rows.
  Table no_nulls = mixed_table(br, 10, 0.0, 2);
  Table with_nulls = mixed_table(br, 10, 0.5, 3);
  const std::vector<TableView> views{no_nulls.view(), with_nulls.view()};
  Table both = concat(views, br);
  EXPECT_TRUE(both.view().columns[0].nullable());
  for (std::size_t r = 0; r < 10; ++r) {
    EXPECT_TRUE(test::rows_equal(both.view(), r, no_nulls.view(), r));
    EXPECT_TRUE(test::rows_equal(both.view(), 10 + r, with_nulls.view(), r));
  }
}

TEST(Concat, UnpackAndConcatReadsSpilledChunksBack) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 300, 0.2);
  const std::vector<std::size_t> splits{120};
  auto parts = split_and_pack(t.view(), splits, br);
  parts[1].payload = br.move(std::move(parts[1].payload), MemoryType::DISK);
  Table back = unpack_and_concat(std::move(parts), br);
  test::expect_tables_equal(t.view(), back.view());
}

// A single chunk is not copied: the table's columns are views that hold the payload, whose
// memory stays counted until the last of them goes.
TEST(Concat, OneChunkIsViewedNotCopied) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 500, 0.3);
  auto parts = split_and_pack(t.view(), {}, br);
  const std::size_t used = br.used(MemoryType::HOST);
  const std::size_t payload = HostMemoryResource().footprint(parts[0].payload->size());
  std::optional<Table> back(unpack_and_concat(std::move(parts), br));
  EXPECT_EQ(br.used(MemoryType::HOST), used);
  for (std::size_t c = 0; c < back->num_columns(); ++c) {
    EXPECT_TRUE(back->column(c).data().is_view()) << "column " << c;
  }
  test::expect_tables_equal(t.view(), back->view());
  back.reset();
  EXPECT_EQ(br.used(MemoryType::HOST), used - payload);
}

TEST(Concat, SchemaMismatchIsAnError) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions a;
  a.rows = 3;
  a.types = {TypeId::INT32};
  RandomTableOptions b = a;
  b.types = {TypeId::INT64};
  Table ta = random_table(a, br);
  Table tb = random_table(b, br);
  const std::vector<TableView> views{ta.view(), tb.view()};
  EXPECT_THROW((void)concat(views, br), logic_error);
}

// ---- unpack is a trust boundary --------------------------------------------------------------

namespace {
PackedData copy_of(const PackedData& p, BufferResource& br) {
  PackedData c;
  c.metadata = p.metadata;
  c.payload = br.allocate(MemoryType::HOST, p.payload->size());
  if (p.payload->size() > 0) std::memcpy(c.payload->data(), p.payload->data(), p.payload->size());
  return c;
}

void expect_corrupt(PackedData p, const std::string& words) {
  try {
    (void)unpack(std::move(p));
    ADD_FAILURE() << "accepted corrupt data (" << words << ")";
  } catch (const corrupt_data_error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Unpack, RejectsTruncatedMetadataAtEveryLength) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 20, 0.2);
  const PackedData good = pack(t.view(), br);
  for (std::size_t n = 0; n < good.metadata.size(); ++n) {
    PackedData p = copy_of(good, br);
    p.metadata.resize(n);
    EXPECT_THROW((void)unpack(std::move(p)), corrupt_data_error) << "prefix of " << n;
  }
  PackedData longer = copy_of(good, br);
  longer.metadata.push_back(0);
  expect_corrupt(std::move(longer), "unexpected bytes");
}

TEST(Unpack, NamesWhatIsWrong) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 20, 0.2);
  const PackedData good = pack(t.view(), br);
  {
    PackedData p = copy_of(good, br);
    p.metadata[0] ^= 0xFF;
    expect_corrupt(std::move(p), "bad magic");
  }
  {
    PackedData p = copy_of(good, br);
    p.metadata[4] = 99;
    expect_corrupt(std::move(p), "unsupported format version 99");
  }
  {
    PackedData p = copy_of(good, br);
    p.payload = br.allocate(MemoryType::HOST, good.payload->size() - 64);
    expect_corrupt(std::move(p), "but the payload has");
  }
  {
    PackedData p = copy_of(good, br);
    p.metadata[28] = 200;  // the first column's type id
    expect_corrupt(std::move(p), "unknown type id 200");
  }
  {
    PackedData p = copy_of(good, br);
    p.metadata[30] = 5;  // the first column's precision: a non-decimal has none
    expect_corrupt(std::move(p), "precision 5 and scale 0");
  }
  {
    // The first column's mask offset (after type, flags, reserved, name length and name "c0").
    PackedData p = copy_of(good, br);
    const std::uint64_t far = 1ULL << 40;
    std::memcpy(p.metadata.data() + 28 + 8 + 2, &far, 8);
    expect_corrupt(std::move(p), "outside the");
  }
}

TEST(Unpack, ADecimalsPrecisionAndScaleTravelAndAreChecked) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 100;
  o.types = {decimal128(27, -3)};
  const Table t = random_table(o, br);
  const PackedData good = pack(t.view(), br);
  {
    PackedData p = copy_of(good, br);
    const Table back = unpack_and_concat(
        [&] {
          std::vector<PackedData> v;
          v.push_back(std::move(p));
          return v;
        }(),
        br);
    EXPECT_EQ(back.column(0).type(), decimal128(27, -3));
    EXPECT_EQ(checksum(back.view()), checksum(t.view()));
  }
  for (const auto& [at, value, words] :
       std::vector<std::tuple<std::size_t, std::uint8_t, std::string>>{
           {30, 0, "precision 0"}, {30, 39, "precision 39"}, {31, 60, "scale 60"}}) {
    PackedData p = copy_of(good, br);
    p.metadata[at] = value;
    expect_corrupt(std::move(p), words);
  }
}

// A nullable column of no rows has an empty null mask: its offset must still be 0, or
// unpack would form a pointer outside the payload (found by fuzz_unpack; undefined behaviour
// that UBSan reported while the old check let it through).
TEST(Unpack, AnEmptyBufferFarAwayIsCorrupt) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 0, 0.5);
  const PackedData good = pack(t.view(), br);
  PackedData p = copy_of(good, br);
  const std::uint64_t far = ~std::uint64_t{0} - (std::uint64_t{1} << 34);
  std::memcpy(p.metadata.data() + 28 + 8 + 2, &far, 8);  // column 0's mask offset
  expect_corrupt(std::move(p), "is empty but has offset");
}

TEST(Unpack, RejectsCorruptStringOffsets) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 10;
  o.types = {TypeId::STRING};
  o.min_string = 1;
  Table t = random_table(o, br);
  PackedData p = pack(t.view(), br);
  // Offsets start the payload (no mask): make row 5's offset jump backwards.
  auto* off = reinterpret_cast<std::int32_t*>(p.payload->data());
  off[5] = off[4] - 1;
  expect_corrupt(std::move(p), "string offsets decrease at row 4");
}

TEST(Unpack, RandomByteFlipsNeverCrash) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 50, 0.2);
  const PackedData good = pack(t.view(), br);
  std::mt19937 rng(7);
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    PackedData p = copy_of(good, br);
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      p.metadata[rng() % p.metadata.size()] ^= static_cast<std::uint8_t>(1U << (rng() % 8));
    }
    try {
      auto u = unpack(std::move(p));
      // Accepted: then every view must lie inside the payload (ASan checks the reads).
      (void)checksum(u.view(), 1);
    } catch (const corrupt_data_error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(Unpack, DevicePayloadNeedsTheGpuPath) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Table t = mixed_table(br, 5, 0);
  PackedData p = pack(t.view(), br);
  p.payload = br.move(std::move(p.payload), MemoryType::DISK);
  EXPECT_THROW((void)unpack(std::move(p)), logic_error);
}

// concat of views of host memory (as imported Arrow batches are) into each tier that takes
// them: the same table back on the host, with buffers large enough for the staged copy to the
// GPU (4 MiB and up), small ones, odd row counts (validity bits at every offset) and none.
TEST(Concat, HostTablesIntoEveryTierKeepEveryByte) {
  test::TempDir dir;
  BufferResource br(test::small_config(dir.path()));
  std::vector<Table> parts;
  for (const std::size_t rows : {13, 0, 700000, 1, 99999}) {
    parts.push_back(mixed_table(br, rows, rows == 13 ? 0.0 : 0.25, rows + 5));
  }
  std::vector<TableView> views;
  for (const Table& t : parts) views.push_back(t.view());
  const Table want = concat(views, br);
  for (const MemoryType to : {MemoryType::HOST, MemoryType::PINNED_HOST, MemoryType::DEVICE}) {
    if (!br.is_live(to)) continue;
    for (const std::size_t n : {std::size_t{1}, std::size_t{2}, views.size()}) {
      const auto some = std::span<const TableView>(views).first(n);
      const Table copied = concat(some, br, to, br.stream());
      ASSERT_EQ(copied.column(0).data().mem_type(), to);
      const Table back = copy_table(copied, MemoryType::HOST, br, br.stream());
      br.stream().synchronize();
      SCOPED_TRACE(std::string(to_string(to)) + ", " + std::to_string(n) + " tables");
      test::expect_tables_equal(n == views.size() ? want.view() : concat(some, br).view(),
                                back.view());
    }
  }
  EXPECT_THROW((void)concat(views, br, MemoryType::DISK), logic_error);
}
