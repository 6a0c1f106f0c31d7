#include "shuffle/detail/wire.hpp"

#include "core/detail/byte_codec.hpp"

#include <spillway/core/error.hpp>

#include <cstring>
#include <string>

namespace spillway::detail {

namespace {

constexpr std::uint32_t chunk_magic = 0x48435053;   // "SPCH"
constexpr std::uint32_t finish_magic = 0x4E465053;  // "SPFN"

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

std::vector<std::uint8_t> encode_chunk(const ChunkHeader& h) {
  ByteWriter w;
  w.put(chunk_magic);
  put_header(w, h);
  return w.take();
}

ChunkHeader decode_chunk(std::span<const std::uint8_t> bytes, PartID total) {
  ByteReader r(bytes, "corrupt shuffle chunk message: ");
  if (r.get<std::uint32_t>("magic") != chunk_magic) r.fail("bad magic");
  ChunkHeader h = get_header(r, total);
  end(r);
  return h;
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
