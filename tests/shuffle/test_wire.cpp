// The shuffle's wire messages: what is encoded decodes to the same, and bytes that are not a
// valid message (cut short, wrong magic, a partition out of range, trailing bytes, too many
// column groups) are a corrupt_data_error naming what is wrong.
#include <spillway/core/error.hpp>

#include "shuffle/detail/wire.hpp"

#include <gtest/gtest.h>

using namespace spillway;
using namespace spillway::detail;

TEST(Wire, AChunkHeaderRoundTrips) {
  const ChunkHeader h{7, 123456789012ULL, {1, 2, 3, 4, 5}};
  const auto bytes = encode_chunk(h);
  const auto back = decode_chunk(bytes, 8);
  EXPECT_EQ(back.pid, 7u);
  EXPECT_EQ(back.payload_bytes, h.payload_bytes);
  EXPECT_EQ(back.metadata, h.metadata);
}

TEST(Wire, AFinishRoundTrips) {
  Finish f;
  f.counts = {{0, 3}, {5, 1}};
  f.direct.push_back(ChunkHeader{5, 4096, {9, 9}});
  f.direct_groups = 4;
  const auto back = decode_finish(encode_finish(f), 6);
  EXPECT_EQ(back.counts, f.counts);
  ASSERT_EQ(back.direct.size(), 1u);
  EXPECT_EQ(back.direct[0].pid, 5u);
  EXPECT_EQ(back.direct[0].payload_bytes, 4096u);
  EXPECT_EQ(back.direct[0].metadata, (std::vector<std::uint8_t>{9, 9}));
  EXPECT_EQ(back.direct_groups, 4u);
}

TEST(Wire, BadBytesAreCorruptDataErrors) {
  const auto chunk = encode_chunk(ChunkHeader{2, 10, {1, 2, 3}});
  auto expect_corrupt = [](auto&& decode, const std::string& what) {
    try {
      decode();
      ADD_FAILURE() << what << " was accepted";
    } catch (const corrupt_data_error& e) {
      EXPECT_NE(std::string(e.what()).find("corrupt shuffle"), std::string::npos) << e.what();
    }
  };
  for (std::size_t n = 0; n < chunk.size(); ++n) {  // every cut
    const std::vector<std::uint8_t> cut(chunk.begin(), chunk.begin() + static_cast<long>(n));
    expect_corrupt([&] { (void)decode_chunk(cut, 4); }, "a chunk cut to " + std::to_string(n));
  }
  expect_corrupt([&] { (void)decode_chunk(chunk, 2); }, "partition 2 of 2");
  auto magic = chunk;
  magic[0] ^= 0xff;
  expect_corrupt([&] { (void)decode_chunk(magic, 4); }, "a wrong magic");
  auto longer = chunk;
  longer.push_back(0);
  expect_corrupt([&] { (void)decode_chunk(longer, 4); }, "a trailing byte");
  Finish f;
  f.direct_groups = max_direct_groups + 1;
  expect_corrupt([&] { (void)decode_finish(encode_finish(f), 4); }, "too many groups");
  expect_corrupt([&] { (void)decode_finish(chunk, 4); }, "a chunk read as a finish");
}
