#include <spillway/core/units.hpp>

#include <spillway/core/error.hpp>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace spillway {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}
}  // namespace

std::size_t parse_bytes(std::string_view text, std::string_view what) {
  auto bad = [&](const char* why) {
    SPILLWAY_FAIL(std::string(what) + ": '" + std::string(text) + "' is not a valid byte size (" +
                  why + "; expected e.g. 1048576, 512MiB, 1.5GiB)");
  };
  std::string_view s = trim(text);
  if (s.empty()) bad("empty");
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) bad("no number");
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, value);
  if (ec != std::errc() || ptr != s.data() + i || !std::isfinite(value) || value < 0) {
    bad("bad number");
  }
  const std::string unit = lower(trim(s.substr(i)));
  struct Unit {
    const char* name;
    double factor;
  };
  static constexpr std::array<Unit, 14> units{{{"", 1},
                                               {"b", 1},
                                               {"k", 1024.0},
                                               {"kib", 1024.0},
                                               {"kb", 1e3},
                                               {"m", 1024.0 * 1024},
                                               {"mib", 1024.0 * 1024},
                                               {"mb", 1e6},
                                               {"g", 1024.0 * 1024 * 1024},
                                               {"gib", 1024.0 * 1024 * 1024},
                                               {"gb", 1e9},
                                               {"t", 1024.0 * 1024 * 1024 * 1024},
                                               {"tib", 1024.0 * 1024 * 1024 * 1024},
                                               {"tb", 1e12}}};
  const bool integral = s.substr(0, i).find('.') == std::string_view::npos;
  for (const auto& u : units) {
    if (unit == u.name) {
      if (integral) {  // exactly: a double would round counts beyond 2^53
        std::uint64_t n = 0;
        const auto [end, err] = std::from_chars(s.data(), s.data() + i, n);
        std::uint64_t bytes = 0;
        if (err != std::errc() || end != s.data() + i ||
            __builtin_mul_overflow(n, static_cast<std::uint64_t>(u.factor), &bytes) ||
            bytes > std::numeric_limits<std::size_t>::max()) {
          bad("too large");
        }
        return static_cast<std::size_t>(bytes);
      }
      const double bytes = value * u.factor;
      if (bytes >= static_cast<double>(std::numeric_limits<std::size_t>::max())) bad("too large");
      if (u.factor == 1 && value != std::floor(value)) bad("fractional byte count");
      return static_cast<std::size_t>(bytes);
    }
  }
  bad("unknown unit");
  return 0;  // unreachable
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> names{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t i = 0;
  double v = bytes;
  while (std::abs(v) >= 1024.0 && i + 1 < names.size()) {
    v /= 1024.0;
    ++i;
  }
  char buf[64];
  if (i == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f B", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, names[i]);
  }
  return buf;
}

std::string format_duration(double seconds) {
  char buf[64];
  if (seconds >= 1.0) {
    std::snprintf(buf, sizeof(buf), "%.2f s", seconds);
  } else if (seconds >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f us", seconds * 1e6);
  }
  return buf;
}

}  // namespace spillway
