#include "shuffle/detail/wire.hpp"

#include "core/detail/byte_codec.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <cstring>
#include <string>

namespace spillway::detail {

namespace {

constexpr std::uint32_t chunk_magic = 0x48435053;   // "SPCH"
constexpr std::uint32_t finish_magic = 0x4E465053;  // "SPFN"
constexpr std::uint32_t ready_magic = 0x44525053;   // "SPRD"

void end(const ByteReader& r) {
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " trailing bytes");
}

void check_pid(const ByteReader& r, PartID pid, PartID total) {
  if (pid >= total) {
    r.fail("partition " + std::to_string(pid) + " of " + std::to_string(total));
  }
}

void put_header(ByteWriter& w, const ChunkHeader& h) {
  w.put(h.pid);
  w.put(h.payload_bytes);
  w.put(static_cast<std::uint32_t>(h.metadata.size()));
  w.put_bytes(h.metadata);
}

ChunkHeader get_header(ByteReader& r, PartID total) {
  ChunkHeader h;
  h.pid = r.get<PartID>("partition");
  check_pid(r, h.pid, total);
  h.payload_bytes = r.get<std::uint64_t>("payload size");
  const auto n = r.get<std::uint32_t>("metadata size");
  const auto meta = r.bytes(n, "metadata");
  h.metadata.assign(meta.begin(), meta.end());
  return h;
}

}  // namespace

std::vector<std::uint8_t> encode_chunks(std::span<const ChunkHeader> chunks) {
  ByteWriter w;
  w.put(chunk_magic);
  w.put(static_cast<std::uint32_t>(chunks.size()));
  for (const auto& h : chunks) put_header(w, h);
  return w.take();
}

std::vector<std::uint8_t> encode_ready(std::uint32_t payloads) {
  ByteWriter w;
  w.put(ready_magic);
  w.put(payloads);
  return w.take();
}

std::uint32_t decode_ready(std::span<const std::uint8_t> bytes) {
  ByteReader r(bytes, "corrupt shuffle ready message: ");
  if (r.get<std::uint32_t>("magic") != ready_magic) r.fail("bad magic");
  const auto payloads = r.get<std::uint32_t>("payloads");
  if (payloads == 0) r.fail("ready for no payload");
  end(r);
  return payloads;
}

std::vector<ChunkHeader> decode_chunks(std::span<const std::uint8_t> bytes, PartID total) {
  ByteReader r(bytes, "corrupt shuffle chunk message: ");
  if (r.get<std::uint32_t>("magic") != chunk_magic) r.fail("bad magic");
  const auto count = r.get<std::uint32_t>("count");
  // Each header takes at least 16 bytes: a count the message cannot hold is refused before
  // anything is made for it.
  if (count == 0 || count > r.remaining() / 16) {
    r.fail(std::to_string(count) + " chunks in " + std::to_string(r.remaining()) + " bytes");
  }
  std::vector<ChunkHeader> out;
  out.reserve(count);
  std::uint64_t payload = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    out.push_back(get_header(r, total));
    // The payload's size (chunk_offsets) must not wrap around.
    payload += out.back().payload_bytes + chunk_alignment;
    if (out.back().payload_bytes > (std::uint64_t{1} << 56) || payload > (std::uint64_t{1} << 60)) {
      r.fail("a payload of more than 2^60 bytes");
    }
  }
  end(r);
  return out;
}

std::vector<std::uint64_t> chunk_offsets(std::span<const ChunkHeader> chunks) {
  std::vector<std::uint64_t> out;
  out.reserve(chunks.size() + 1);
  std::uint64_t at = 0;
  for (const auto& h : chunks) {
    at = round_up(at, chunk_alignment);
    out.push_back(at);
    at += h.payload_bytes;
  }
  out.push_back(at);
  return out;
}

std::vector<std::uint8_t> encode_finish(const Finish& f) {
  ByteWriter w;
  w.put(finish_magic);
  w.put(static_cast<std::uint32_t>(f.counts.size()));
  for (const auto& [pid, n] : f.counts) {
    w.put(pid);
    w.put(n);
  }
  w.put(static_cast<std::uint32_t>(f.direct.size()));
  for (const auto& h : f.direct) put_header(w, h);
  w.put(f.direct_groups);
  return w.take();
}

Finish decode_finish(std::span<const std::uint8_t> bytes, PartID total) {
  ByteReader r(bytes, "corrupt shuffle finish message: ");
  if (r.get<std::uint32_t>("magic") != finish_magic) r.fail("bad magic");
  const auto count = r.get<std::uint32_t>("count");
  if (count > total) r.fail(std::to_string(count) + " partitions of " + std::to_string(total));
  Finish out;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto pid = r.get<PartID>("partition");
    check_pid(r, pid, total);
    out.counts.emplace_back(pid, r.get<std::uint64_t>("chunks"));
  }
  const auto direct = r.get<std::uint32_t>("direct count");
  if (direct > total) r.fail(std::to_string(direct) + " direct chunks of " + std::to_string(total));
  for (std::uint32_t i = 0; i < direct; ++i) out.direct.push_back(get_header(r, total));
  out.direct_groups = r.get<std::uint32_t>("direct column groups");
  if (out.direct_groups == 0 || out.direct_groups > max_direct_groups) {
    r.fail(std::to_string(out.direct_groups) + " direct column groups (1 to " +
           std::to_string(max_direct_groups) + ")");
  }
  end(r);
  return out;
}

}  // namespace spillway::detail
