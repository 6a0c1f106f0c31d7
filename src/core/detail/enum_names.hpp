#pragma once
// Enums spelled as words (internal): one table of names per enum serves both directions, and an
// unknown word is a logic_error that lists the valid ones.

#include <spillway/core/error.hpp>

#include <array>
#include <string>
#include <utility>

namespace spillway::detail {

template <typename E, std::size_t N>
using EnumNames = std::array<std::pair<const char*, E>, N>;

/// The enum value named `text`. @throws spillway::logic_error "unknown WHAT 'text' (expected
/// a, b or c)"
template <typename E, std::size_t N>
E parse_enum(const std::string& text, const EnumNames<E, N>& names, const char* what) {
  std::string expected;
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i].first) return names[i].second;
    expected += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + names[i].first;
  }
  SPILLWAY_FAIL("unknown " + std::string(what) + " '" + text + "' (expected " + expected + ")");
}

/// The name of `value` ("?" for a value the table lacks).
template <typename E, std::size_t N>
const char* enum_name(E value, const EnumNames<E, N>& names) noexcept {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace spillway::detail
