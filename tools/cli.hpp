#pragma once
// Command-line helpers shared by the tools: each reports a bad flag through the tool's own
// `usage(error)`, which prints the message and the usage and exits with code 2.

#include <cerrno>
#include <cstdlib>
#include <string>

namespace spillway::cli {

using Usage = void (*)(const std::string& error);

/// The value after flag argv[i] (i moves onto it).
inline std::string value(int argc, char** argv, int& i, Usage usage) {
  if (i + 1 >= argc) usage(std::string(argv[i]) + " needs a value");
  return argv[++i];
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

}  // namespace spillway::cli
