#pragma once
// Helpers shared by the command-line tools. The flag readers report a bad flag through the
// tool's own `usage(error)`, which prints the message and the usage and exits with code 2.

#include <spillway/comm/launch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace spillway::cli {

using Usage = void (*)(const std::string& error);

/// A tool's `usage(error)`: prints "tool: error" (when there is one) and the usage `text`, then
/// exits with 2 after an error, 0 for -h (no error: the usage goes to stdout).
[[noreturn]] inline void print_usage(const char* tool, const std::string& error, const char* text) {
  std::ostream& os = error.empty() ? std::cout : std::cerr;
  if (!error.empty()) os << tool << ": " << error << "\n\n";
  os << text;
  std::exit(error.empty() ? 0 : 2);
}

/// The value after flag argv[i] (i moves onto it).
inline std::string value(int argc, char** argv, int& i, Usage usage) {
  if (i + 1 >= argc) usage(std::string(argv[i]) + " needs a value");
  return argv[++i];
}

/// The kind of ranks after -C (argv[i]): local, mpi or single (parse_rank_kind's words).
inline std::string rank_kind(int argc, char** argv, int& i, Usage usage) {
  const std::string v = value(argc, argv, i, usage);
  try {
    (void)parse_rank_kind(v);
  } catch (const std::exception& e) {
    usage(std::string("-C: ") + e.what());
  }
  return v;
}

/// The whole number after flag argv[i], within [min, max].
inline long long number(int argc, char** argv, int& i, long long min, long long max, Usage usage) {
  const std::string flag = argv[i];
  const std::string v = value(argc, argv, i, usage);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || errno != 0 || n < min || n > max) {
    usage(flag + " takes a whole number from " + std::to_string(min) + " to " +
          std::to_string(max) + ", got '" + v + "'");
  }
  return n;
}

/// The number after flag argv[i], within [min, max] (`what` says how, for the message).
inline double real(int argc, char** argv, int& i, double min, double max, const char* what,
                   Usage usage) {
  const std::string flag = argv[i];
  const std::string v = value(argc, argv, i, usage);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(x >= min && x <= max)) {
    usage(flag + " takes " + what + ", got '" + v + "'");
  }
  return x;
}

/// The median of `v` (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace spillway::cli
