#pragma once
/// @file data_type.hpp
/// The column types spillway moves.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spillway {

/// A column's type. Fixed-width types hold `size_of(t)` bytes per row; BOOL8 is one byte per row
/// (0 or 1, as cuDF); STRING is int32 offsets (rows + 1) plus UTF-8 characters.
enum class TypeId : std::uint8_t {
  INT8 = 0,
  INT16,
  INT32,
  INT64,
  UINT8,
  UINT16,
  UINT32,
  UINT64,
  FLOAT32,
  FLOAT64,
  BOOL8,
  STRING,
};

inline constexpr std::size_t num_type_ids = 12;

/// Bytes per row of a fixed-width type; 0 for STRING.
constexpr std::size_t size_of(TypeId t) noexcept {
  switch (t) {
    case TypeId::INT8:
    case TypeId::UINT8:
    case TypeId::BOOL8:
      return 1;
    case TypeId::INT16:
    case TypeId::UINT16:
      return 2;
    case TypeId::INT32:
    case TypeId::UINT32:
    case TypeId::FLOAT32:
      return 4;
    case TypeId::INT64:
    case TypeId::UINT64:
    case TypeId::FLOAT64:
      return 8;
    case TypeId::STRING:
      break;
  }
  return 0;
}

constexpr bool is_fixed_width(TypeId t) noexcept {
  return t != TypeId::STRING;
}
/// True for a value that is a valid TypeId (used when decoding bytes from another process).
constexpr bool is_valid_type_id(std::uint8_t v) noexcept {
  return v < num_type_ids;
}

/// "int32", "string", ...
std::string_view to_string(TypeId t) noexcept;

}  // namespace spillway
