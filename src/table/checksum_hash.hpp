#pragma once
// The element and row hashes of the table checksum, the same on the CPU and the GPU (internal).

#include <spillway/core/host_device.hpp>
#include <spillway/table/hashing.hpp>

#include <cstddef>
#include <cstdint>

namespace spillway::detail {

/// The two seeds of a row's 64-bit checksum value (high and low half).
inline constexpr std::uint32_t checksum_seed_hi = 0x2545f491U;
inline constexpr std::uint32_t checksum_seed_lo = 0x9e3779b9U;

/// The hash of one element's raw bytes (no float normalization: -0.0 and 0.0 differ), or of
/// a null marker.
SPILLWAY_HOST_DEVICE inline std::uint32_t raw_element_hash(bool valid, const void* bytes,
                                                           std::size_t len,
                                                           std::uint32_t seed) noexcept {
  if (!valid) return murmur3_32("null", 4, seed ^ 0x5bd1e995U);
  return murmur3_32(bytes, len, seed);
}

}  // namespace spillway::detail
