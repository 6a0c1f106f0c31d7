// The shuffle's wire messages (chunks, ready, finish): what is encoded decodes to the same,
// and bytes that are not a valid message (cut short, wrong magic, a partition out of range,
// trailing bytes, too many column groups) are a corrupt_data_error naming what is wrong.
#include <spillway/core/error.hpp>

#include "shuffle/detail/wire.hpp"

#include <gtest/gtest.h>

using namespace spillway;
using namespace spillway::detail;

TEST(Wire, AChunkHeaderRoundTrips) {
  const ChunkHeader h{7, 123456789012ULL, {1, 2, 3, 4, 5}};
  const auto back = decode_chunks(encode_chunks(std::span(&h, 1)), 8);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].pid, 7u);
  EXPECT_EQ(back[0].payload_bytes, h.payload_bytes);
  EXPECT_EQ(back[0].metadata, h.metadata);
  EXPECT_EQ(chunk_offsets(back), (std::vector<std::uint64_t>{0, h.payload_bytes}));
}

TEST(Wire, SeveralChunksRoundTripWithTheirPlacesInThePayload) {
  const std::vector<ChunkHeader> chunks{{3, 100, {1}}, {0, 0, {}}, {3, 256, {2, 2}}, {1, 7, {3}}};
  const auto back = decode_chunks(encode_chunks(chunks), 4);
  ASSERT_EQ(back.size(), chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(back[i].pid, chunks[i].pid);
    EXPECT_EQ(back[i].payload_bytes, chunks[i].payload_bytes);
    EXPECT_EQ(back[i].metadata, chunks[i].metadata);
  }
  // Each chunk at the next multiple of 256 bytes, as an allocation of its own would start.
  EXPECT_EQ(chunk_offsets(back), (std::vector<std::uint64_t>{0, 256, 256, 512, 519}));
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
  const ChunkHeader header{2, 10, {1, 2, 3}};
  const auto chunk = encode_chunks(std::span(&header, 1));
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
    expect_corrupt([&] { (void)decode_chunks(cut, 4); }, "a chunk cut to " + std::to_string(n));
  }
  expect_corrupt([&] { (void)decode_chunks(chunk, 2); }, "partition 2 of 2");
  auto magic = chunk;
  magic[0] ^= 0xff;
  expect_corrupt([&] { (void)decode_chunks(magic, 4); }, "a wrong magic");
  auto longer = chunk;
  longer.push_back(0);
  expect_corrupt([&] { (void)decode_chunks(longer, 4); }, "a trailing byte");
  auto none = chunk;
  none[4] = none[5] = none[6] = none[7] = 0;
  expect_corrupt([&] { (void)decode_chunks(none, 4); }, "no chunks");
  auto many = chunk;
  many[4] = many[5] = many[6] = many[7] = 0xff;
  expect_corrupt([&] { (void)decode_chunks(many, 4); }, "more chunks than the bytes hold");
  const std::vector<ChunkHeader> huge{{0, std::uint64_t{1} << 55, {}},
                                      {0, std::uint64_t{1} << 55, {}},
                                      {0, std::uint64_t{1} << 62, {}}};
  expect_corrupt([&] { (void)decode_chunks(encode_chunks(huge), 4); }, "a payload that wraps");
  Finish f;
  f.direct_groups = max_direct_groups + 1;
  expect_corrupt([&] { (void)decode_finish(encode_finish(f), 4); }, "too many groups");
  expect_corrupt([&] { (void)decode_finish(chunk, 4); }, "a chunk read as a finish");
  EXPECT_EQ(decode_ready(encode_ready(1)), 1U);
  EXPECT_EQ(decode_ready(encode_ready(70000)), 70000U);
  expect_corrupt([&] { (void)decode_ready(encode_ready(0)); }, "a ready message for no payload");
  auto ready = encode_ready(3);
  ready.push_back(0);
  expect_corrupt([&] { (void)decode_ready(ready); }, "a ready message with a trailing byte");
  expect_corrupt([&] { (void)decode_ready(std::span(chunk).first(3)); },
                 "a ready message cut short");
  expect_corrupt([&] { (void)decode_ready(chunk); }, "a chunk read as a ready message");
}
