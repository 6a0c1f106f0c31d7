#pragma once
// Where a row hash goes in a hash table (internal to table/: the joins and the group-by).

#include <spillway/core/host_device.hpp>

#include <cstdint>

namespace spillway::detail {

/// A row hash spread over 64 bits (splitmix64's finalizer), whose low bits pick a row's slot
/// or bucket in a join's or group-by's hash table. The row hash's own low bits will not do: the
/// rows of one shuffle partition share hash % partitions, so with a power-of-two partition count
/// they share its low bits and would crowd a fraction of the table.
SPILLWAY_HOST_DEVICE constexpr std::uint64_t spread_hash(std::uint32_t h) noexcept {
  std::uint64_t x = h + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace spillway::detail
