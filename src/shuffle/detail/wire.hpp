#pragma once
// The shuffle's small messages (internal), little-endian, checked when read (they come from
// another process):
//   chunks: u32 "SPCH" | u32 count (>= 1) | count x (u32 partition, u64 payload bytes,
//           u32 metadata bytes, metadata): the chunks whose payloads follow as one payload
//           message, each at its chunk_offsets() place
//   ready:  u32 "SPRD": the receiver of a chunks message has memory waiting for its payload,
//           which may now be sent (one per chunks message, in the order they came)
//   finish: u32 "SPFN" | u32 count | count x (u32 partition, u64 chunks sent) |
//           u32 direct | direct x (u32 partition, u64 payload bytes, u32 metadata bytes,
//           metadata): the partitions whose chunk from this rank goes straight into the
//           owner's final buffer (Shuffler::insert_finished with chunks), counted in `count` |
//           u32 groups: the direct chunks' columns go in that many groups (column c of C in
//           group c * groups / C), each with a tag stage of its own, 1..max_direct_groups

#include <spillway/shuffle/partition_owner.hpp>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace spillway::detail {

struct ChunkHeader {
  PartID pid{0};
  std::uint64_t payload_bytes{0};
  std::vector<std::uint8_t> metadata;
};

std::vector<std::uint8_t> encode_chunks(std::span<const ChunkHeader> chunks);
/// @throws spillway::corrupt_data_error naming what is wrong
std::vector<ChunkHeader> decode_chunks(std::span<const std::uint8_t> bytes,
                                       PartID total_partitions);
/// A ready message: the owner has posted the receives of the sender's next `payloads`
/// announced payloads (in the order they were announced), so they may go.
std::vector<std::uint8_t> encode_ready(std::uint32_t payloads);
/// The payloads a ready message covers (at least one).
/// @throws spillway::corrupt_data_error naming what is wrong
std::uint32_t decode_ready(std::span<const std::uint8_t> bytes);
/// Where each chunk of a chunks message starts in its payload, each at a multiple of
/// chunk_alignment (as a payload allocated on its own starts), then the payload's size.
std::vector<std::uint64_t> chunk_offsets(std::span<const ChunkHeader> chunks);
inline constexpr std::uint64_t chunk_alignment = 256;

using FinishCounts = std::vector<std::pair<PartID, std::uint64_t>>;
/// At most this many column groups of direct chunks (tag stages of their own).
inline constexpr std::uint32_t max_direct_groups = 16;
struct Finish {
  FinishCounts counts;
  std::vector<ChunkHeader> direct;
  std::uint32_t direct_groups{1};
};
std::vector<std::uint8_t> encode_finish(const Finish& f);
/// @throws spillway::corrupt_data_error naming what is wrong
Finish decode_finish(std::span<const std::uint8_t> bytes, PartID total_partitions);

}  // namespace spillway::detail
