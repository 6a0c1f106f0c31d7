// import_arrow is a trust boundary: ArrowSchema/ArrowArray structs from a caller. Malformed
// ones (null pointers where the specification allows none, wrong counts, offsets that
// overflow) are named errors, never a crash; each struct is released exactly once either way.
// (Round trips against pyarrow: tests/python/test_arrow.py.)
#include <spillway/core/error.hpp>
#include <spillway/table/arrow.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/generator.hpp>

#include "common.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace spillway;

namespace {

int released = 0;
void release_schema(ArrowSchema* s) {
  ++released;
  s->release = nullptr;
}
void release_array(ArrowArray* a) {
  ++released;
  a->release = nullptr;
}
void release_child_schema(ArrowSchema* s) {
  s->release = nullptr;
}
void release_child_array(ArrowArray* a) {
  a->release = nullptr;
}

/// A record batch of one int32 column "x" of `rows` rows, by hand; tests break one part.
struct Batch {
  std::vector<std::int32_t> values;
  const void* child_buffers[2]{nullptr, nullptr};
  const void* top_buffers[1]{nullptr};
  ArrowSchema child_schema{};
  ArrowArray child_array{};
  ArrowSchema* schema_children[1]{&child_schema};
  ArrowArray* array_children[1]{&child_array};
  ArrowSchema schema{};
  ArrowArray array{};

  explicit Batch(std::int64_t rows) : values(static_cast<std::size_t>(rows), 7) {
    child_buffers[1] = values.data();
    child_schema =
        ArrowSchema{"i", "x", nullptr, 0, 0, nullptr, nullptr, release_child_schema, nullptr};
    child_array =
        ArrowArray{rows, 0, 0, 2, 0, child_buffers, nullptr, nullptr, release_child_array, nullptr};
    schema =
        ArrowSchema{"+s", "", nullptr, 0, 1, schema_children, nullptr, release_schema, nullptr};
    array =
        ArrowArray{rows, 0, 0, 1, 1, top_buffers, array_children, nullptr, release_array, nullptr};
  }
};

std::string import_error(Batch& b, BufferResource& br) {
  released = 0;
  std::string what;
  try {
    auto imported = import_arrow(&b.schema, &b.array, br);
    (void)checksum(imported.view(), 1);
  } catch (const logic_error& e) {
    what = e.what();
  }
  EXPECT_EQ(released, 2) << "each struct released exactly once";
  return what;
}

}  // namespace

TEST(ImportArrow, AWellFormedBatchImports) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Batch b(5);
  EXPECT_EQ(import_error(b, br), "");
}

TEST(ImportArrow, NullPointersAreNamedErrors) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  {
    Batch b(5);
    b.schema.children = nullptr;  // found by fuzz_arrow: a crash before
    EXPECT_NE(import_error(b, br).find("without its list of children"), std::string::npos);
  }
  {
    Batch b(5);
    b.array_children[0] = nullptr;
    EXPECT_NE(import_error(b, br).find("column 0 is a null pointer"), std::string::npos);
  }
  {
    Batch b(5);
    b.child_buffers[1] = nullptr;
    EXPECT_NE(import_error(b, br).find("buffer 1 is a null pointer"), std::string::npos);
  }
  {
    Batch b(5);
    b.child_array.buffers = nullptr;
    EXPECT_NE(import_error(b, br).find("expected 2 buffers"), std::string::npos);
  }
}

TEST(ImportArrow, CountsThatOverflowAreNamedErrors) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  {
    Batch b(5);
    b.array.offset = INT64_MAX;
    EXPECT_NE(import_error(b, br).find("malformed struct array"), std::string::npos);
  }
  {
    Batch b(5);
    b.child_array.offset = INT64_MAX - 2;
    EXPECT_NE(import_error(b, br).find("bad offset"), std::string::npos);
  }
}

TEST(ImportArrow, NoRowsNeedNoBuffers) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  Batch b(0);
  b.child_buffers[1] = nullptr;
  b.child_schema.format = "u";
  const void* three[3]{nullptr, nullptr, nullptr};
  b.child_array.buffers = three;
  b.child_array.n_buffers = 3;
  EXPECT_EQ(import_error(b, br), "");
}

// Decimals, dates and timestamps go out with their Arrow formats and come back as the same
// types (precision and scale included) and values.
TEST(ImportArrow, DecimalsDatesAndTimestampsRoundTrip) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  RandomTableOptions o;
  o.rows = 1000;
  o.types = {decimal128(38, 10),
             decimal128(5, -2),
             TypeId::DATE32,
             TypeId::TIMESTAMP_SECONDS,
             TypeId::TIMESTAMP_MILLISECONDS,
             TypeId::TIMESTAMP_MICROSECONDS,
             TypeId::TIMESTAMP_NANOSECONDS};
  o.null_fraction = 0.1;
  const Table t = random_table(o, br);
  ArrowSchema schema{};
  ArrowArray array{};
  export_arrow(t.view(), &schema, &array);
  std::vector<std::string> formats;
  for (std::int64_t i = 0; i < schema.n_children; ++i)
    formats.emplace_back(schema.children[i]->format);
  EXPECT_EQ(formats,
            (std::vector<std::string>{"d:38,10", "d:5,-2", "tdD", "tss:", "tsm:", "tsu:", "tsn:"}));
  const ArrowImport back = import_arrow(&schema, &array, br);
  ASSERT_EQ(back.view().num_columns(), t.num_columns());
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    EXPECT_EQ(back.view().columns[c].type, t.column(c).type()) << to_string(t.column(c).type());
  }
  EXPECT_EQ(checksum(back.view()), checksum(t.view()));
}

TEST(ImportArrow, UnsupportedTemporalAndDecimalFormatsAreNamed) {
  test::TempDir dir;
  BufferResource br(test::host_config(dir.path()));
  const std::vector<std::pair<const char*, const char*>> cases{
      {"tsu:UTC", "time zone"},
      {"d:40,2", "precision 40"},
      {"d:10,2,256", "decimal256"},
      {"d:10", "malformed decimal"},
      {"d:10,x", "malformed decimal"},
      {"tdm", "not supported"},
      {"d:10,2,128,1", "malformed decimal"}};
  for (const auto& [format, why] : cases) {
    Batch b(5);
    b.child_schema.format = format;
    const std::string e = import_error(b, br);
    EXPECT_NE(e.find(why), std::string::npos) << format << ": " << e;
    EXPECT_NE(e.find("'x'"), std::string::npos) << "names the column: " << e;
  }
}
