#pragma once
/// @file logger.hpp
/// The communicator's logger: every line names the rank ("[spillway WARN] [rank 1/4] ...").

#include <spillway/comm/tag.hpp>
#include <spillway/core/logging.hpp>

#include <string>

namespace spillway {

class Logger {
 public:
  Logger(Rank rank, int nranks)
      : prefix_{"[rank " + std::to_string(rank) + "/" + std::to_string(nranks) + "] "} {}
  void error(const std::string& msg) const { write(LogLevel::error, msg); }
  void warn(const std::string& msg) const { write(LogLevel::warn, msg); }
  void info(const std::string& msg) const { write(LogLevel::info, msg); }
  void debug(const std::string& msg) const { write(LogLevel::debug, msg); }
  void trace(const std::string& msg) const { write(LogLevel::trace, msg); }
  [[nodiscard]] const std::string& prefix() const noexcept { return prefix_; }

 private:
  void write(LogLevel level, const std::string& msg) const {
    if (detail::log_enabled(level)) detail::log_write(level, prefix_ + msg);
  }
  std::string prefix_;
};

}  // namespace spillway
