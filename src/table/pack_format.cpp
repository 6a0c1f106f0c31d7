#include <spillway/table/pack_format.hpp>

#include "core/detail/byte_codec.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <cstring>
#include <string_view>

namespace spillway::detail {

namespace {

[[noreturn]] void corrupt(const std::string& what) {
  SPILLWAY_FAIL("corrupt packed metadata: " + what, corrupt_data_error);
}

constexpr std::size_t column_fixed_bytes = 1 + 1 + 2 + 4 + 6 * 8;

void check_span(const BufferSpan& s, std::uint64_t expected, std::size_t align,
                std::uint64_t payload, std::size_t col, const char* which) {
  const std::string where = "column " + std::to_string(col) + " " + which;
  if (s.size != expected) {
    corrupt(where + " has " + std::to_string(s.size) + " bytes, expected " +
            std::to_string(expected));
  }
  if (s.size == 0) {
    // An empty buffer is written as (0, 0); any other offset would make unpack form a pointer
    // outside the payload.
    if (s.offset != 0) {
      corrupt(where + " is empty but has offset " + std::to_string(s.offset) + " (must be 0)");
    }
    return;
  }
  if (s.offset > payload || s.size > payload - s.offset) {
    corrupt(where + " [" + std::to_string(s.offset) + ", +" + std::to_string(s.size) +
            ") lies outside the " + std::to_string(payload) + "-byte payload");
  }
  if (s.offset % align != 0) {
    corrupt(where + " offset " + std::to_string(s.offset) + " is not aligned to " +
            std::to_string(align));
  }
}

}  // namespace

PackLayout make_layout(const TableView& schema, std::size_t rows,
                       std::span<const std::size_t> chars) {
  PackLayout l;
  l.num_rows = rows;
  l.columns.reserve(schema.num_columns());
  l.payload_size = place_buffers(
      schema, rows, chars,
      [&](std::size_t c, const BufferSpan& mask, const BufferSpan& offsets,
          const BufferSpan& data) {
        const ColumnView& col = schema.columns[c];
        l.columns.push_back(ColumnLayout{col.type, col.nullable(),
                                         c < schema.names.size() ? schema.names[c] : std::string(),
                                         mask, offsets, data});
      });
  return l;
}

namespace {

/// The metadata's bytes before its columns' (the column count, rows and payload size), and
/// reserved room for all of it (one allocation).
ByteWriter start_encoding(std::size_t ncols, std::size_t name_bytes, std::uint64_t rows,
                          std::uint64_t payload) {
  ByteWriter w;
  w.reserve(28 + ncols * column_fixed_bytes + name_bytes);
  w.put(pack_magic);
  w.put(pack_version);
  w.put(std::uint16_t{0});
  w.put(static_cast<std::uint32_t>(ncols));
  w.put(rows);
  w.put(payload);
  return w;
}

void put_column(ByteWriter& w, const DataType& type, bool nullable, std::string_view name,
                const BufferSpan& mask, const BufferSpan& offsets, const BufferSpan& data) {
  w.put(static_cast<std::uint8_t>(type.id));
  w.put(static_cast<std::uint8_t>(nullable ? 1 : 0));
  w.put(type.precision);  // 0 but for DECIMAL128
  w.put(static_cast<std::uint8_t>(type.scale));
  w.put(static_cast<std::uint32_t>(name.size()));
  w.put_bytes(name);
  for (const BufferSpan* s : {&mask, &offsets, &data}) {
    w.put(s->offset);
    w.put(s->size);
  }
}

}  // namespace

std::vector<std::uint8_t> encode(const PackLayout& l) {
  std::size_t names = 0;
  for (const auto& c : l.columns) names += c.name.size();
  ByteWriter w = start_encoding(l.columns.size(), names, l.num_rows, l.payload_size);
  for (const auto& c : l.columns)
    put_column(w, c.type, c.nullable, c.name, c.mask, c.offsets, c.data);
  return w.take();
}

std::vector<std::uint8_t> encode(const TableView& schema, std::size_t rows,
                                 std::span<const std::size_t> chars) {
  std::size_t names = 0;
  for (std::size_t c = 0; c < schema.num_columns() && c < schema.names.size(); ++c) {
    names += schema.names[c].size();
  }
  ByteWriter w =
      start_encoding(schema.num_columns(), names, rows, payload_size(schema, rows, chars));
  place_buffers(
      schema, rows, chars,
      [&](std::size_t c, const BufferSpan& mask, const BufferSpan& offsets,
          const BufferSpan& data) {
        const ColumnView& col = schema.columns[c];
        put_column(w, col.type, col.nullable(),
                   c < schema.names.size() ? std::string_view(schema.names[c]) : std::string_view(),
                   mask, offsets, data);
      });
  return w.take();
}

PackLayout decode(std::span<const std::uint8_t> metadata, std::size_t payload_size) {
  ByteReader r(metadata, "corrupt packed metadata: ");
  if (r.get<std::uint32_t>("magic") != pack_magic) corrupt("bad magic (not spillway data)");
  const auto version = r.get<std::uint16_t>("version");
  if (version != pack_version) {
    corrupt("unsupported format version " + std::to_string(version) + " (this build reads " +
            std::to_string(pack_version) + ")");
  }
  if (r.get<std::uint16_t>("reserved") != 0) corrupt("reserved header bits are set");
  const auto ncols = r.get<std::uint32_t>("num_columns");
  PackLayout l;
  l.num_rows = r.get<std::uint64_t>("num_rows");
  l.payload_size = r.get<std::uint64_t>("payload_size");
  if (l.payload_size != payload_size) {
    corrupt("metadata describes a " + std::to_string(l.payload_size) +
            "-byte payload, but the payload has " + std::to_string(payload_size) + " bytes");
  }
  if (static_cast<std::uint64_t>(ncols) * column_fixed_bytes > r.remaining()) {
    corrupt(std::to_string(ncols) + " columns cannot fit in " + std::to_string(r.remaining()) +
            " bytes of metadata");
  }
  // Any column with rows needs at least one byte per 8 rows; bound rows so products cannot
  // overflow.
  if (ncols > 0 && l.num_rows > payload_size * 8 + 8) {
    corrupt(std::to_string(l.num_rows) + " rows cannot fit in a " + std::to_string(payload_size) +
            "-byte payload");
  }
  l.columns.reserve(ncols);
  for (std::uint32_t c = 0; c < ncols; ++c) {
    ColumnLayout cl;
    const auto type = r.get<std::uint8_t>("column type");
    if (!is_valid_type_id(type))
      corrupt("column " + std::to_string(c) + " has unknown type id " + std::to_string(type));
    cl.type = static_cast<TypeId>(type);
    const auto flags = r.get<std::uint8_t>("column flags");
    if ((flags & ~1U) != 0) corrupt("column " + std::to_string(c) + " has unknown flags");
    cl.nullable = (flags & 1U) != 0;
    cl.type.precision = r.get<std::uint8_t>("column precision");
    cl.type.scale = static_cast<std::int8_t>(r.get<std::uint8_t>("column scale"));
    if (!is_valid_type(cl.type)) {
      corrupt("column " + std::to_string(c) + " has precision " +
              std::to_string(int{cl.type.precision}) + " and scale " +
              std::to_string(int{cl.type.scale}) + ", which a " +
              std::string(to_string(cl.type.id)) + " column cannot have");
    }
    const auto name_len = r.get<std::uint32_t>("name length");
    cl.name = r.get_string(name_len, "column name");
    for (BufferSpan* s : {&cl.mask, &cl.offsets, &cl.data}) {
      s->offset = r.get<std::uint64_t>("buffer offset");
      s->size = r.get<std::uint64_t>("buffer size");
    }
    const std::uint64_t rows = l.num_rows;
    check_span(cl.mask, cl.nullable ? mask_bytes(rows) : 0, 1, payload_size, c, "null mask");
    if (cl.type == TypeId::STRING) {
      check_span(cl.offsets, (rows + 1) * 4, 4, payload_size, c, "string offsets");
      check_span(cl.data, cl.data.size, 1, payload_size, c, "characters");
      if (cl.data.size > static_cast<std::uint64_t>(INT32_MAX)) {
        corrupt("column " + std::to_string(c) + " has more characters than int32 offsets allow");
      }
    } else {
      check_span(cl.offsets, 0, 1, payload_size, c, "offsets");
      check_span(cl.data, rows * size_of(cl.type), size_of(cl.type), payload_size, c, "data");
    }
    l.columns.push_back(std::move(cl));
  }
  if (r.remaining() != 0) {
    corrupt(std::to_string(r.remaining()) + " unexpected bytes after the last column");
  }
  return l;
}

}  // namespace spillway::detail
