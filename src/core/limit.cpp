#include <spillway/core/limit.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <charconv>
#include <cmath>

namespace spillway {

Limit Limit::fraction(double f) {
  SPILLWAY_EXPECTS(f >= 0.0 && f <= 1.0 && std::isfinite(f),
                   "a limit fraction must be within [0, 1], got " + std::to_string(f));
  return Limit{Kind::fraction, 0, f};
}

Limit Limit::parse(std::string_view text, std::string_view what) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text == "unlimited" || text == "none" || text == "inf") return unlimited();
  if (!text.empty() && text.back() == '%') {
    std::string_view num = text.substr(0, text.size() - 1);
    double pct = -1;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), pct);
    SPILLWAY_EXPECTS(ec == std::errc() && ptr == num.data() + num.size() && pct >= 0 && pct <= 100,
                     std::string(what) + ": '" + std::string(text) +
                         "' is not a valid percentage (expected 0%..100%)");
    return fraction(pct / 100.0);
  }
  return bytes(parse_bytes(text, what));
}

std::size_t Limit::resolve(std::size_t capacity) const noexcept {
  switch (kind_) {
    case Kind::bytes:
      return bytes_;
    case Kind::fraction:
      return static_cast<std::size_t>(std::floor(static_cast<double>(capacity) * fraction_));
    case Kind::unlimited:
      break;
  }
  return unlimited_bytes;
}

std::string Limit::to_string() const {
  switch (kind_) {
    case Kind::bytes:
      return format_bytes(static_cast<double>(bytes_));
    case Kind::fraction:
      return std::to_string(fraction_ * 100.0) + "%";
    case Kind::unlimited:
      break;
  }
  return "unlimited";
}

}  // namespace spillway
