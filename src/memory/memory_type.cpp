#include <spillway/memory/memory_type.hpp>

#include <spillway/core/error.hpp>

#include <algorithm>
#include <cctype>
#include <string>

namespace spillway {

std::string_view to_string(MemoryType t) noexcept {
  switch (t) {
    case MemoryType::DEVICE:
      return "DEVICE";
    case MemoryType::PINNED_HOST:
      return "PINNED_HOST";
    case MemoryType::HOST:
      return "HOST";
    case MemoryType::DISK:
      break;
  }
  return "DISK";
}

std::string_view stat_name(MemoryType t) noexcept {
  switch (t) {
    case MemoryType::DEVICE:
      return "device";
    case MemoryType::PINNED_HOST:
      return "pinned_host";
    case MemoryType::HOST:
      return "host";
    case MemoryType::DISK:
      break;
  }
  return "disk";
}

MemoryType parse_memory_type(std::string_view text) {
  std::string up(text);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (MemoryType t : all_memory_types) {
    if (up == to_string(t)) return t;
  }
  SPILLWAY_FAIL("unknown memory type '" + std::string(text) +
                "' (expected device, pinned_host, host or disk)");
}

std::span<const MemoryType> spill_targets(MemoryType t) noexcept {
  static constexpr std::array<MemoryType, 3> from_device{MemoryType::PINNED_HOST, MemoryType::HOST,
                                                         MemoryType::DISK};
  static constexpr std::array<MemoryType, 2> from_pinned{MemoryType::HOST, MemoryType::DISK};
  static constexpr std::array<MemoryType, 1> from_host{MemoryType::DISK};
  switch (t) {
    case MemoryType::DEVICE:
      return from_device;
    case MemoryType::PINNED_HOST:
      return from_pinned;
    case MemoryType::HOST:
      return from_host;
    case MemoryType::DISK:
      break;
  }
  return {};
}

}  // namespace spillway
