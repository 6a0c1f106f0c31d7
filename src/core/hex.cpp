#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>

namespace spillway {

namespace {

int digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(2 * bytes.size(), '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  return out;
}

std::vector<std::uint8_t> from_hex(std::string_view text) {
  SPILLWAY_EXPECTS(text.size() % 2 == 0, "hex text of odd length " + std::to_string(text.size()),
                   corrupt_data_error);
  std::vector<std::uint8_t> out(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int d = digit(text[i]);
    SPILLWAY_EXPECTS(d >= 0,
                     "hex text has a character that is not a hex digit at " + std::to_string(i),
                     corrupt_data_error);
    out[i / 2] = static_cast<std::uint8_t>(i % 2 == 0 ? d << 4 : out[i / 2] | d);
  }
  return out;
}

}  // namespace spillway
