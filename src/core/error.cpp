#include <spillway/core/error.hpp>

#include <cstring>

namespace spillway::detail {

std::string format_error(const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  return "spillway: " + msg + " (" + (base != nullptr ? base + 1 : file) + ":" +
         std::to_string(line) + ")";
}

std::string errno_string(int err) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be buf.
  const char* s = strerror_r(err, buf, sizeof(buf));
  return std::string(s) + " (errno " + std::to_string(err) + ")";
}

}  // namespace spillway::detail
