#pragma once
/// @file logging.hpp
/// A minimal leveled logger writing to stderr; the level comes from SPILLWAY_LOG_LEVEL.

#include <sstream>
#include <string>

namespace spillway {

enum class LogLevel { none = 0, error, warn, info, debug, trace };

/// Parses "none|error|warn|info|debug|trace". @throws spillway::logic_error otherwise.
LogLevel parse_log_level(const std::string& text);
/// "none", "error", ... as parse_log_level reads them.
const char* to_string(LogLevel level) noexcept;

namespace detail {
/// Writes one line atomically ("[spillway WARN] ..."). Thread-safe.
void log_write(LogLevel level, const std::string& msg) noexcept;
/// Whether messages of `level` are printed at the current option setting.
bool log_enabled(LogLevel level) noexcept;
}  // namespace detail

}  // namespace spillway

/// SPILLWAY_LOG(warn, "spilled " << n << " bytes"): the stream expression runs only when enabled.
#define SPILLWAY_LOG(level, expr)                                                         \
  do {                                                                                    \
    if (::spillway::detail::log_enabled(::spillway::LogLevel::level)) {                   \
      std::ostringstream spillway_log_ss_;                                                \
      spillway_log_ss_ << expr;                                                           \
      ::spillway::detail::log_write(::spillway::LogLevel::level, spillway_log_ss_.str()); \
    }                                                                                     \
  } while (0)
