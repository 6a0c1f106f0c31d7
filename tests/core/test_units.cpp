#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/core/limit.hpp>
#include <spillway/core/units.hpp>

#include <gtest/gtest.h>

using namespace spillway;

TEST(Units, ParseBytes) {
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("1048576"), MiB);
  EXPECT_EQ(parse_bytes("512MiB"), 512 * MiB);
  EXPECT_EQ(parse_bytes("512 mib"), 512 * MiB);
  EXPECT_EQ(parse_bytes("1.5GiB"), GiB + GiB / 2);
  EXPECT_EQ(parse_bytes("2G"), 2 * GiB);
  EXPECT_EQ(parse_bytes("3KB"), 3000u);
  EXPECT_EQ(parse_bytes("1TiB"), 1024 * GiB);
}

TEST(Units, ParseBytesRejectsGarbageWithItsName) {
  for (const char* bad : {"", "abc", "12XB", "-5", "1.5", "MiB", "1e400GiB"}) {
    try {
      (void)parse_bytes(bad, "SPILLWAY_HOST_LIMIT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("SPILLWAY_HOST_LIMIT"), std::string::npos) << e.what();
    }
  }
}

TEST(Units, Format) {
  EXPECT_EQ(format_bytes(171), "171 B");
  EXPECT_EQ(format_bytes(5.62 * GiB), "5.62 GiB");
  EXPECT_EQ(format_duration(0.1718), "171.80 ms");
  EXPECT_EQ(format_duration(3.2), "3.20 s");
  EXPECT_EQ(round_up(1, 4096), 4096u);
  EXPECT_EQ(round_up(8192, 4096), 8192u);
}

TEST(Limit, ParseAndResolve) {
  EXPECT_TRUE(Limit::parse("unlimited").is_unlimited());
  EXPECT_EQ(Limit::parse("unlimited").resolve(100), unlimited_bytes);
  EXPECT_EQ(Limit::parse("64MiB").resolve(GiB), 64 * MiB);
  EXPECT_EQ(Limit::parse("50%").resolve(1000), 500u);
  EXPECT_EQ(Limit::parse("0%").resolve(1000), 0u);
  EXPECT_EQ(Limit::fraction(0.25).resolve(4 * GiB), GiB);
  EXPECT_EQ(Limit::bytes(0).resolve(GiB), 0u);
  EXPECT_THROW((void)Limit::parse("150%"), logic_error);
  EXPECT_THROW((void)Limit::parse("x%"), logic_error);
  EXPECT_THROW((void)Limit::fraction(-0.1), logic_error);
}

TEST(Hex, RoundTripsEveryByteAndNamesBadText) {
  std::vector<std::uint8_t> all(256);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint8_t>(i);
  const std::string text = spillway::to_hex(all);
  EXPECT_EQ(text.substr(0, 8), "00010203");
  EXPECT_EQ(text.substr(text.size() - 4), "feff");
  EXPECT_EQ(spillway::from_hex(text), all);
  EXPECT_EQ(spillway::from_hex("ABcd"), (std::vector<std::uint8_t>{0xab, 0xcd}));
  EXPECT_TRUE(spillway::from_hex("").empty());
  EXPECT_THROW((void)spillway::from_hex("abc"), spillway::corrupt_data_error);
  try {
    (void)spillway::from_hex("00zz");
    ADD_FAILURE() << "no error";
  } catch (const spillway::corrupt_data_error& e) {
    EXPECT_NE(std::string(e.what()).find("at 2"), std::string::npos) << e.what();
  }
}
