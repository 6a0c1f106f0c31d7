#pragma once
// Private to BufferResource (buffer_resource.cpp, reservations.cpp, tier_moves.cpp): its
// statistics' names and small helpers.

#include <spillway/core/limit.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/memory_type.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <string>

namespace spillway::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::size_t physical_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : 0;
}

inline std::string limit_string(std::size_t limit) {
  return limit == unlimited_bytes ? "unlimited" : format_bytes(static_cast<double>(limit));
}

/// The statistics names, made once (RapidsMPF's spelling): alloc-device,
/// copy-device-to-pinned_host, spill-device-to-host, spill-host-freed, ...
struct StatNames {
  std::array<std::string, 4> alloc, freed;
  std::array<std::array<std::string, 4>, 4> copy, spill;
  StatNames() {
    for (MemoryType a : all_memory_types) {
      const std::string from(stat_name(a));
      alloc[index(a)] = "alloc-" + from;
      freed[index(a)] = "spill-" + from + "-freed";
      for (MemoryType b : all_memory_types) {
        const std::string to(stat_name(b));
        copy[index(a)][index(b)] = "copy-" + from + "-to-" + to;
        spill[index(a)][index(b)] = "spill-" + from + "-to-" + to;
      }
    }
  }
};
inline const StatNames& names() {
  static const StatNames n;
  return n;
}
inline const std::string& copy_stat(MemoryType from, MemoryType to) {
  return names().copy[index(from)][index(to)];
}

}  // namespace spillway::detail
