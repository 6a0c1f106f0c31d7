#pragma once
/// @file hashing.hpp
/// MurmurHash3 x86_32 and the row hash of hash partitioning, defined as cuDF's device_row_hasher
/// (cudf/table/experimental/row_operators.cuh): each element is hashed with Murmur3 (floats
/// normalized: -0.0 as 0.0, every NaN as the quiet NaN; a null hashes to 0xFFFFFFFF); the first
/// column's element is hashed with the seed and combined into 0, every other column's element
/// is hashed with the default seed 0 and combined in with cuDF's hash_combine.
/// The same functions compile for the host and the GPU.

#include <spillway/core/host_device.hpp>
#include <spillway/table/column_view.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace spillway {

inline constexpr std::uint32_t default_hash_seed = 0;
inline constexpr std::uint32_t null_hash = std::numeric_limits<std::uint32_t>::max();

/// MurmurHash3_x86_32 of `len` bytes (Austin Appleby's reference algorithm).
SPILLWAY_HOST_DEVICE inline std::uint32_t murmur3_32(const void* key, std::size_t len,
                                                     std::uint32_t seed) noexcept {
  constexpr std::uint32_t c1 = 0xcc9e2d51;
  constexpr std::uint32_t c2 = 0x1b873593;
  const auto* data = static_cast<const std::uint8_t*>(key);
  const std::size_t nblocks = len / 4;
  std::uint32_t h = seed;
  for (std::size_t i = 0; i < nblocks; ++i) {
    std::uint32_t k = 0;
    std::memcpy(&k, data + i * 4, 4);
    k *= c1;
    k = (k << 15) | (k >> 17);
    k *= c2;
    h ^= k;
    h = (h << 13) | (h >> 19);
    h = h * 5 + 0xe6546b64;
  }
  const std::uint8_t* tail = data + nblocks * 4;
  std::uint32_t k = 0;
  switch (len & 3U) {
    case 3:
      k ^= static_cast<std::uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<std::uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = (k << 15) | (k >> 17);
      k *= c2;
      h ^= k;
      break;
    default:
      break;
  }
  h ^= static_cast<std::uint32_t>(len);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

/// cuDF's hash_combine for 32-bit hashes.
SPILLWAY_HOST_DEVICE constexpr std::uint32_t hash_combine(std::uint32_t lhs,
                                                          std::uint32_t rhs) noexcept {
  return lhs ^ (rhs + 0x9e3779b9U + (lhs << 6) + (lhs >> 2));
}

/// The hash of one fixed-width value, floats normalized as cuDF does.
template <typename T>
SPILLWAY_HOST_DEVICE inline std::uint32_t hash_value(T v, std::uint32_t seed) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) v = std::numeric_limits<T>::quiet_NaN();
    if (v == T{0}) v = T{0};
  }
  return murmur3_32(&v, sizeof(T), seed);
}

/// The hash of element `row` of a column (host memory).
std::uint32_t hash_element(const ColumnView& col, std::size_t row, std::uint32_t seed) noexcept;

/// Row hashes of rows [begin, end) into out[0 .. end - begin), a column at a time (host memory).
/// Gives the same values as hash_row.
void hash_rows(const TableView& keys, std::size_t begin, std::size_t end, std::uint32_t seed,
               std::uint32_t* out) noexcept;

/// The row hash over the key columns (host memory).
inline std::uint32_t hash_row(const TableView& keys, std::size_t row, std::uint32_t seed) noexcept {
  std::uint32_t h = 0;
  for (std::size_t c = 0; c < keys.columns.size(); ++c) {
    h = hash_combine(h, hash_element(keys.columns[c], row, c == 0 ? seed : default_hash_seed));
  }
  return h;
}

}  // namespace spillway
