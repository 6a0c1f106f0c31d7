#pragma once
// The packed-table metadata format, shared by the table module (pack, partition) and the
// shuffle (its wire carries it); not a stable API for users. Little-endian:
//   u32 magic "SPWY" | u16 version | u16 reserved (0) | u32 num_columns | u64 num_rows |
//   u64 payload_size | per column: u8 type | u8 flags (bit 0: nullable) | u8 precision |
//   i8 scale (both 0 but for DECIMAL128) |
//   u32 name_len | name bytes | 3 x (u64 offset, u64 size): mask, offsets, data.
// Absent buffers are (0, 0). Each buffer starts at a multiple of 64 bytes in the payload.

#include <spillway/core/units.hpp>
#include <spillway/table/column_view.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace spillway::detail {

inline constexpr std::uint32_t pack_magic = 0x59575053;  // "SPWY"
inline constexpr std::uint16_t pack_version = 1;
inline constexpr std::size_t payload_alignment = 64;

struct BufferSpan {
  std::uint64_t offset{0};
  std::uint64_t size{0};
};

struct ColumnLayout {
  DataType type{TypeId::INT32};
  bool nullable{false};
  std::string name;
  BufferSpan mask, offsets, data;
};

struct PackLayout {
  std::uint64_t num_rows{0};
  std::uint64_t payload_size{0};
  std::vector<ColumnLayout> columns;
};

/// Where the buffers of a table with the schema of `schema` (types, nullability), `rows` rows
/// and `chars[c]` character bytes for each STRING column c (ignored for others) lie in its
/// payload: calls fn(c, mask, offsets, data) for each column c in order, and returns the
/// payload's size. (No allocation: partition_and_pack places thousands of partitions a call.)
template <typename Fn>
std::uint64_t place_buffers(const TableView& schema, std::size_t rows,
                            std::span<const std::size_t> chars, Fn&& fn) {
  std::uint64_t at = 0;
  const auto place = [&](std::uint64_t size) {
    const BufferSpan s{size == 0 ? 0 : at, size};
    if (size > 0) at = round_up(at + size, payload_alignment);
    return s;
  };
  for (std::size_t c = 0; c < schema.num_columns(); ++c) {
    const ColumnView& col = schema.columns[c];
    const BufferSpan mask = place(col.nullable() ? mask_bytes(rows) : 0);
    const bool str = col.type == TypeId::STRING;
    const BufferSpan offsets = place(str ? (rows + 1) * sizeof(std::int32_t) : 0);
    const BufferSpan data = place(str ? chars[c] : rows * size_of(col.type));
    fn(c, mask, offsets, data);
  }
  return at;
}
/// The payload's size alone (place_buffers without a callback).
inline std::uint64_t payload_size(const TableView& schema, std::size_t rows,
                                  std::span<const std::size_t> chars) {
  return place_buffers(schema, rows, chars,
                       [](std::size_t, const BufferSpan&, const BufferSpan&, const BufferSpan&) {});
}

/// The layout of a table with the schema of `schema` (types, nullability, names), `rows` rows
/// and `chars[c]` character bytes for each STRING column c (ignored for others).
PackLayout make_layout(const TableView& schema, std::size_t rows,
                       std::span<const std::size_t> chars);

std::vector<std::uint8_t> encode(const PackLayout& layout);
/// encode(make_layout(schema, rows, chars)), without the layout in between.
std::vector<std::uint8_t> encode(const TableView& schema, std::size_t rows,
                                 std::span<const std::size_t> chars);

/// Parses and checks metadata against a payload of `payload_size` bytes.
/// @throws spillway::corrupt_data_error naming what is wrong.
PackLayout decode(std::span<const std::uint8_t> metadata, std::size_t payload_size);

}  // namespace spillway::detail
