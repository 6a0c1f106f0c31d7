#pragma once
// The packed-table metadata format (internal). Little-endian:
//   u32 magic "SPWY" | u16 version | u16 reserved (0) | u32 num_columns | u64 num_rows |
//   u64 payload_size | per column: u8 type | u8 flags (bit 0: nullable) | u8 precision |
//   i8 scale (both 0 but for DECIMAL128) |
//   u32 name_len | name bytes | 3 x (u64 offset, u64 size): mask, offsets, data.
// Absent buffers are (0, 0). Each buffer starts at a multiple of 64 bytes in the payload.

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

/// The layout of a table with the schema of `schema` (types, nullability, names), `rows` rows
/// and `chars[c]` character bytes for each STRING column c (ignored for others).
PackLayout make_layout(const TableView& schema, std::size_t rows,
                       std::span<const std::size_t> chars);

std::vector<std::uint8_t> encode(const PackLayout& layout);

/// Parses and checks metadata against a payload of `payload_size` bytes.
/// @throws spillway::corrupt_data_error naming what is wrong.
PackLayout decode(std::span<const std::uint8_t> metadata, std::size_t payload_size);

}  // namespace spillway::detail
