#pragma once
/// @file units.hpp
/// Byte units, parsing of sizes like "64MiB" and human-readable formatting.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

/// Parses a byte count: a plain integer, or a number with a unit (B, KB, KiB, MB, MiB, GB,
/// GiB, TB, TiB; case-insensitive, K/M/G/T alone mean KiB/MiB/GiB/TiB), e.g. "512MiB", "1.5 GiB".
/// @throws spillway::logic_error naming `what` and the text when it is not a valid size.
std::size_t parse_bytes(std::string_view text, std::string_view what = "size");

/// "5.62 GiB", "171 B": binary units with two decimals.
std::string format_bytes(double bytes);

/// "171.80 ms", "3.20 s", "12.00 us".
std::string format_duration(double seconds);

/// Rounds `n` up to a multiple of `align` (a power of two).
constexpr std::size_t round_up(std::size_t n, std::size_t align) noexcept {
  return (n + align - 1) & ~(align - 1);
}

}  // namespace spillway
