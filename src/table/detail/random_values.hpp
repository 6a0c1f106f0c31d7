#pragma once
// The counter-based values of random_int32_table, the same on the CPU and the GPU (internal).

#include <spillway/core/error.hpp>
#include <spillway/core/host_device.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway::detail {

/// SplitMix64's finalizer: a good 64-bit mix of a counter.
SPILLWAY_HOST_DEVICE constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// Row `row` of column `col`: uniform in [min, min + range) (range 0 means 2^32).
SPILLWAY_HOST_DEVICE constexpr std::int32_t random_int32(std::uint64_t seed, std::size_t col,
                                                         std::size_t row, std::int32_t min,
                                                         std::uint64_t range) noexcept {
  const std::uint64_t v = splitmix64(splitmix64(seed ^ (std::uint64_t{col} << 48)) + row);
  const std::uint64_t r = range == 0 ? (v >> 32) : ((v >> 32) * range) >> 32;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(min) + static_cast<std::uint32_t>(r));
}

/// The `range` of random_int32 for values in [min, max] (0 for all 2^32 values).
/// @throws spillway::logic_error when min > max
inline std::uint64_t random_int32_range(std::int32_t min, std::int32_t max) {
  SPILLWAY_EXPECTS(min <= max, "random_int32_table: min " + std::to_string(min) + " is above max " +
                                   std::to_string(max));
  return std::uint64_t(std::int64_t{max} - min + 1) & 0xFFFFFFFFULL;
}

}  // namespace spillway::detail
