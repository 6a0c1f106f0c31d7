#pragma once
/// @file data_type.hpp
/// The column types spillway moves.

#include <spillway/core/host_device.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway {

/// A column's type id. Fixed-width types hold `size_of(t)` bytes per row; BOOL8 is one byte per
/// row (0 or 1, as cuDF); STRING is int32 offsets (rows + 1) plus UTF-8 characters. The
/// temporal types are Arrow's: DATE32 is int32 days since the epoch, TIMESTAMP_* int64 units
/// since the epoch (no time zone). DECIMAL128 is a 16-byte two's-complement integer (Int128)
/// scaled by 10^-scale, its precision and scale in the column's DataType. New ids go at the
/// end: packed metadata carries the number.
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
  DATE32,
  TIMESTAMP_SECONDS,
  TIMESTAMP_MILLISECONDS,
  TIMESTAMP_MICROSECONDS,
  TIMESTAMP_NANOSECONDS,
  DECIMAL128,
};

inline constexpr std::size_t num_type_ids = 18;

/// The storage of a DECIMAL128 value: a two's-complement 128-bit integer, little-endian (the
/// low 64 bits first), as Arrow and cuDF lay it out. Equality, order and wrapping addition;
/// usable in device code.
struct Int128 {
  std::uint64_t lo{0};
  std::int64_t hi{0};

  SPILLWAY_HOST_DEVICE friend constexpr bool operator==(Int128 a, Int128 b) noexcept {
    return a.lo == b.lo && a.hi == b.hi;
  }
  SPILLWAY_HOST_DEVICE friend constexpr bool operator!=(Int128 a, Int128 b) noexcept {
    return !(a == b);
  }
  SPILLWAY_HOST_DEVICE friend constexpr bool operator<(Int128 a, Int128 b) noexcept {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
  }
  SPILLWAY_HOST_DEVICE friend constexpr Int128 operator+(Int128 a, Int128 b) noexcept {
    const std::uint64_t lo = a.lo + b.lo;
    const auto carry = static_cast<std::uint64_t>(lo < a.lo ? 1 : 0);
    const std::uint64_t hi = static_cast<std::uint64_t>(a.hi) + static_cast<std::uint64_t>(b.hi) +
                             carry;  // wraps, as unsigned arithmetic does
    return {lo, static_cast<std::int64_t>(hi)};
  }
  SPILLWAY_HOST_DEVICE constexpr Int128& operator+=(Int128 b) noexcept { return *this = *this + b; }
  /// The value of a 64-bit signed integer (sign-extended).
  SPILLWAY_HOST_DEVICE static constexpr Int128 from(std::int64_t v) noexcept {
    return {static_cast<std::uint64_t>(v), v < 0 ? -1 : 0};
  }
  /// The largest and the smallest value.
  SPILLWAY_HOST_DEVICE static constexpr Int128 max() noexcept { return {~0ULL, INT64_MAX}; }
  SPILLWAY_HOST_DEVICE static constexpr Int128 lowest() noexcept { return {0, INT64_MIN}; }
  /// The nearest double.
  SPILLWAY_HOST_DEVICE constexpr double to_double() const noexcept {
    return static_cast<double>(hi) * 18446744073709551616.0 + static_cast<double>(lo);
  }
};
static_assert(sizeof(Int128) == 16);

/// The most digits a DECIMAL128 holds.
inline constexpr int decimal128_max_precision = 38;

/// A column's full type: its id, and for DECIMAL128 its precision (1 to 38 digits) and scale
/// (digits after the point; may be negative). Converts from and to a TypeId, so a plain id is a
/// type wherever one is asked for; two types are equal when id, precision and scale are.
struct DataType {
  TypeId id{TypeId::INT32};
  std::uint8_t precision{0};
  std::int8_t scale{0};

  constexpr DataType() noexcept = default;
  constexpr DataType(TypeId t) noexcept : id{t} {}           // NOLINT(google-explicit-constructor)
  constexpr operator TypeId() const noexcept { return id; }  // NOLINT(google-explicit-constructor)

  friend constexpr bool operator==(DataType a, DataType b) noexcept = default;
  friend constexpr bool operator==(DataType a, TypeId b) noexcept { return a.id == b; }
};

/// decimal128(precision, scale), unchecked (Column and the imports check it).
constexpr DataType decimal128(int precision, int scale) noexcept {
  DataType t{TypeId::DECIMAL128};
  t.precision = static_cast<std::uint8_t>(precision);
  t.scale = static_cast<std::int8_t>(scale);
  return t;
}

/// Whether `t` is a type a column can have: a known id, and for DECIMAL128 a precision of 1 to
/// 38 and a scale of -38 to 38 (other ids: both 0).
constexpr bool is_valid_type(DataType t) noexcept {
  if (static_cast<std::size_t>(t.id) >= num_type_ids) return false;
  if (t.id != TypeId::DECIMAL128) return t.precision == 0 && t.scale == 0;
  return t.precision >= 1 && t.precision <= decimal128_max_precision &&
         t.scale >= -decimal128_max_precision && t.scale <= decimal128_max_precision;
}

/// Bytes per row of a fixed-width type; 0 for STRING.
SPILLWAY_HOST_DEVICE constexpr std::size_t size_of(TypeId t) noexcept {
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
    case TypeId::DATE32:
      return 4;
    case TypeId::INT64:
    case TypeId::UINT64:
    case TypeId::FLOAT64:
    case TypeId::TIMESTAMP_SECONDS:
    case TypeId::TIMESTAMP_MILLISECONDS:
    case TypeId::TIMESTAMP_MICROSECONDS:
    case TypeId::TIMESTAMP_NANOSECONDS:
      return 8;
    case TypeId::DECIMAL128:
      return 16;
    case TypeId::STRING:
      break;
  }
  return 0;
}

SPILLWAY_HOST_DEVICE constexpr bool is_fixed_width(TypeId t) noexcept {
  return t != TypeId::STRING;
}
/// Whether `t` is DATE32 or a TIMESTAMP_* type.
constexpr bool is_temporal(TypeId t) noexcept {
  return t >= TypeId::DATE32 && t <= TypeId::TIMESTAMP_NANOSECONDS;
}
/// True for a value that is a valid TypeId (used when decoding bytes from another process).
constexpr bool is_valid_type_id(std::uint8_t v) noexcept {
  return v < num_type_ids;
}

/// "int32", "string", "timestamp[us]", ...
std::string_view to_string(TypeId t) noexcept;
/// to_string of the id, and for DECIMAL128 "decimal128(precision, scale)".
std::string to_string(DataType t);

}  // namespace spillway
