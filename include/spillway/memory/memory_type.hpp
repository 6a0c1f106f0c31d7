#pragma once
/// @file memory_type.hpp
/// The memory tiers, from fastest to slowest.

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

namespace spillway {

/// A memory tier. Spilling moves data down this list, never up (except on extraction).
enum class MemoryType : int {
  DEVICE = 0,       ///< GPU memory
  PINNED_HOST = 1,  ///< page-locked host memory (fast PCIe copies)
  HOST = 2,         ///< ordinary host memory
  DISK = 3,         ///< a region of a spill file
};

inline constexpr std::array<MemoryType, 4> all_memory_types{
    MemoryType::DEVICE, MemoryType::PINNED_HOST, MemoryType::HOST, MemoryType::DISK};

/// Index of a tier in 0..3 (for per-tier arrays).
constexpr std::size_t index(MemoryType t) noexcept {
  return static_cast<std::size_t>(t);
}

/// "DEVICE", "PINNED_HOST", "HOST", "DISK".
std::string_view to_string(MemoryType t) noexcept;
/// "device", "pinned_host", "host", "disk": the spelling of statistics names.
std::string_view stat_name(MemoryType t) noexcept;
/// Parses either spelling, case-insensitive. @throws spillway::logic_error
MemoryType parse_memory_type(std::string_view text);

/// True for tiers whose bytes the CPU can read through a pointer (PINNED_HOST, HOST).
constexpr bool is_host_accessible(MemoryType t) noexcept {
  return t == MemoryType::PINNED_HOST || t == MemoryType::HOST;
}

/// The tiers a spilled buffer of tier `t` may go to, in order of preference.
std::span<const MemoryType> spill_targets(MemoryType t) noexcept;

}  // namespace spillway
