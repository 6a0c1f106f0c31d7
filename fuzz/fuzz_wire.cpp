// libFuzzer target for the shuffle's wire messages, decoded as a receiving rank decodes them:
// a chunk message (then the packed metadata it carries, against the payload size it names) or
// a finish message (then the metadata of each direct chunk it names); short inputs also as a
// ready message.
// A valid message must decode to fields that encode back to the same bytes; an invalid one
// must give spillway::corrupt_data_error naming the problem: never a crash, a hang, undefined
// behaviour or a read outside the input.
// Input: u8 kind (even: chunk, odd: finish) | u16 total partitions (0 means 1) | message.
#include <spillway/core/error.hpp>

#include <spillway/table/pack_format.hpp>
#include "shuffle/detail/wire.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

namespace {

void decode_metadata(const spillway::detail::ChunkHeader& h) {
  try {
    (void)spillway::detail::decode(h.metadata, static_cast<std::size_t>(h.payload_bytes));
  } catch (const spillway::corrupt_data_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool finish = (data[0] & 1U) != 0;
  std::uint16_t total = 0;
  std::memcpy(&total, data + 1, 2);
  const auto parts = static_cast<spillway::PartID>(total == 0 ? 1 : total);
  const std::span<const std::uint8_t> msg(data + 3, size - 3);
  try {
    try {
      // A ready message that decodes covers at least one payload and is the encoding of its
      // count (so no other bytes pass as one).
      const std::uint32_t payloads = spillway::detail::decode_ready(msg);
      const auto again = spillway::detail::encode_ready(payloads);
      if (payloads == 0 || again.size() != msg.size() ||
          std::memcmp(again.data(), msg.data(), msg.size()) != 0) {
        std::abort();
      }
    } catch (const spillway::corrupt_data_error&) {
    }
    if (finish) {
      const auto f = spillway::detail::decode_finish(msg, parts);
      const auto again = spillway::detail::encode_finish(f);
      if (again.size() != msg.size() || std::memcmp(again.data(), msg.data(), msg.size()) != 0) {
        std::abort();  // a message that decodes must be the encoding of what it decoded to
      }
      for (const auto& h : f.direct) decode_metadata(h);
    } else {
      const auto chunks = spillway::detail::decode_chunks(msg, parts);
      const auto again = spillway::detail::encode_chunks(chunks);
      if (again.size() != msg.size() || std::memcmp(again.data(), msg.data(), msg.size()) != 0) {
        std::abort();
      }
      const auto offsets = spillway::detail::chunk_offsets(chunks);
      for (std::size_t i = 0; i < chunks.size(); ++i) {
        if (offsets[i] + chunks[i].payload_bytes > offsets.back()) std::abort();  // in the payload
        decode_metadata(chunks[i]);
      }
    }
  } catch (const spillway::corrupt_data_error&) {
  }
  return 0;
}
