#pragma once
/// @file partition_owner.hpp
/// Which rank owns (receives) each output partition of a shuffle.

#include <spillway/comm/tag.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>

namespace spillway {

using PartID = std::uint32_t;

/// owner(pid, nranks) -> the rank that receives partition pid.
using PartitionOwner = std::function<Rank(PartID, int)>;

namespace partition_owner {
/// pid % nranks.
inline Rank round_robin(PartID pid, int nranks) {
  return static_cast<Rank>(pid % static_cast<PartID>(nranks));
}
/// Consecutive blocks: rank r owns [r * total / nranks, (r + 1) * total / nranks).
inline PartitionOwner contiguous(PartID total) {
  return [total](PartID pid, int nranks) {
    const auto n = static_cast<std::uint64_t>(nranks);
    auto first = [&](std::uint64_t r) { return r * total / n; };  // rank r's first partition
    std::uint64_t r = std::min<std::uint64_t>(n - 1, std::uint64_t{pid} * n / total);
    while (r + 1 < n && first(r + 1) <= pid) ++r;
    while (r > 0 && first(r) > pid) --r;
    return static_cast<Rank>(r);
  };
}
}  // namespace partition_owner

}  // namespace spillway
