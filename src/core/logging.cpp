#include <spillway/core/logging.hpp>

#include "core/detail/enum_names.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include <array>
#include <cstdio>

namespace spillway {

namespace {
constexpr detail::EnumNames<LogLevel, 6> level_names{{{"none", LogLevel::none},
                                                      {"error", LogLevel::error},
                                                      {"warn", LogLevel::warn},
                                                      {"info", LogLevel::info},
                                                      {"debug", LogLevel::debug},
                                                      {"trace", LogLevel::trace}}};
}  // namespace

LogLevel parse_log_level(const std::string& text) {
  return detail::parse_enum(text, level_names, "log level");
}

const char* to_string(LogLevel level) noexcept {
  return detail::enum_name(level, level_names);
}

namespace detail {

bool log_enabled(LogLevel level) noexcept {
  try {
    return level <= options::log_level();
  } catch (...) {
    return level <= LogLevel::warn;
  }
}

void log_write(LogLevel level, const std::string& msg) noexcept {
  static constexpr std::array<const char*, 6> tags{"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  // One fprintf call per line keeps lines from different threads whole.
  std::fprintf(stderr, "[spillway %s] %s\n", tags[static_cast<std::size_t>(level)], msg.c_str());
}

}  // namespace detail
}  // namespace spillway
