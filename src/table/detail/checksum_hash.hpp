#pragma once
// The row values of the table checksum, the same on the CPU and the GPU (internal).
//
// A row's value is a strong 64-bit mix of the sum of one term per column: a fixed-width
// element's raw bits (no float normalization: -0.0 and 0.0 differ) plus a constant, times an
// odd multiplier of its column; a string's two Murmur3 hashes and length instead of the bits;
// a null a constant. One multiply per element keeps the checksum far cheaper than the data
// movement it checks, and the column multipliers make it depend on which column holds what.

#include <spillway/core/host_device.hpp>
#include <spillway/table/hashing.hpp>

#include <cstddef>
#include <cstdint>

namespace spillway::detail {

SPILLWAY_HOST_DEVICE constexpr std::uint64_t column_multiplier(std::size_t column) noexcept {
  return (0x9E3779B97F4A7C15ULL ^ (std::uint64_t{column} * 0xD6E8FEB86659FD93ULL)) | 1ULL;
}

/// A fixed-width element's bits as one 64-bit integer: the value zero-extended, or for 16-byte
/// values (Int128) both halves mixed.
SPILLWAY_HOST_DEVICE constexpr std::uint64_t value_bits(std::uint64_t v) noexcept {
  return v;
}
SPILLWAY_HOST_DEVICE constexpr std::uint64_t value_bits(Int128 v) noexcept {
  return v.lo + static_cast<std::uint64_t>(v.hi) * 0xC2B2AE3D27D4EB4FULL;
}

/// A fixed-width element's term: its bytes as a little-endian integer (value_bits).
SPILLWAY_HOST_DEVICE constexpr std::uint64_t fixed_term(std::uint64_t bits,
                                                        std::size_t column) noexcept {
  return (bits + 0x632BE59BD9B4E019ULL) * column_multiplier(column);
}

SPILLWAY_HOST_DEVICE constexpr std::uint64_t null_term(std::size_t column) noexcept {
  return 0x8CB92BA72F3D8DD7ULL * column_multiplier(column);
}

SPILLWAY_HOST_DEVICE inline std::uint64_t string_term(const void* chars, std::size_t len,
                                                      std::size_t column) noexcept {
  const std::uint64_t hi = murmur3_32(chars, len, 0x2545f491U);
  const std::uint64_t lo = murmur3_32(chars, len, 0x9e3779b9U);
  return (((hi << 32) | lo) ^ (std::uint64_t{len} << 7)) * column_multiplier(column) + column;
}

/// The row's value from the sum of its terms (SplitMix64's finalizer).
SPILLWAY_HOST_DEVICE constexpr std::uint64_t row_value(std::uint64_t terms) noexcept {
  std::uint64_t x = terms ^ 0xA0761D6478BD642FULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace spillway::detail
