#include <spillway/core/logging.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/options.hpp>

#include <array>
#include <cstdio>

namespace spillway {

LogLevel parse_log_level(const std::string& text) {
  static constexpr std::array<const char*, 6> names{"none", "error", "warn",
                                                    "info", "debug", "trace"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (text == names[i]) return static_cast<LogLevel>(i);
  }
  SPILLWAY_FAIL("unknown log level '" + text +
                "' (expected none, error, warn, info, debug, trace)");
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
