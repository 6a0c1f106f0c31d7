// The transfer engine's serialised forms: metadata and remote regions.

#include "transfer/detail/wire.hpp"

#include <spillway/core/error.hpp>
#include <spillway/transfer/region.hpp>

#include "core/detail/byte_codec.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

namespace spillway::transfer {
namespace detail {
namespace {

constexpr std::uint16_t kVersion = 2;                 // 2: several backends an engine
constexpr std::uint32_t kMetadataMagic = 0x45545753;  // "SWTE"
constexpr std::uint32_t kRegionMagic = 0x52525753;    // "SWRR"
constexpr std::size_t kMaxField = 1 << 16;            // no field of these is larger

std::uint64_t checksum(std::span<const std::uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

template <typename Bytes>
void put_field(spillway::detail::ByteWriter& w, const Bytes& b) {
  w.put(static_cast<std::uint32_t>(b.size()));
  w.put_bytes(b);
}

std::span<const std::uint8_t> get_field(spillway::detail::ByteReader& r, const char* field) {
  const auto n = r.get<std::uint32_t>(field);
  if (n > kMaxField) {
    r.fail(std::string(field) + " claims " + std::to_string(n) + " bytes (at most " +
           std::to_string(kMaxField) + ")");
  }
  return r.bytes(n, field);
}

}  // namespace

std::vector<std::uint8_t> seal(std::uint32_t magic, const std::vector<std::uint8_t>& body) {
  spillway::detail::ByteWriter w;
  w.put(magic);
  w.put(kVersion);
  w.put_bytes(body);
  auto out = w.take();
  const std::uint64_t sum = checksum(out);
  const auto* p = reinterpret_cast<const std::uint8_t*>(&sum);
  out.insert(out.end(), p, p + sizeof(sum));
  return out;
}

std::span<const std::uint8_t> unseal(std::uint32_t magic, std::span<const std::uint8_t> bytes,
                                     const std::string& what) {
  constexpr std::size_t kHeader = sizeof(std::uint32_t) + sizeof(std::uint16_t);
  constexpr std::size_t kTrailer = sizeof(std::uint64_t);
  spillway::detail::ByteReader r(bytes, what + ": ");
  if (bytes.size() < kHeader + kTrailer) {
    r.fail("truncated: " + std::to_string(bytes.size()) + " bytes, at least " +
           std::to_string(kHeader + kTrailer) + " needed");
  }
  if (r.get<std::uint32_t>("magic") != magic) r.fail("not transfer-engine bytes (bad magic)");
  const auto version = r.get<std::uint16_t>("version");
  if (version != kVersion) {
    r.fail("version " + std::to_string(version) + ", this build reads " + std::to_string(kVersion));
  }
  std::uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - kTrailer, kTrailer);
  if (sum != checksum(bytes.first(bytes.size() - kTrailer))) {
    r.fail("checksum mismatch (corrupt or truncated)");
  }
  return bytes.subspan(kHeader, bytes.size() - kHeader - kTrailer);
}

EngineId random_engine_id() {
  std::random_device rd;
  EngineId id{};
  for (std::size_t i = 0; i < id.size(); i += 4) {
    const std::uint32_t v = rd();
    std::memcpy(id.data() + i, &v, 4);
  }
  return id;
}

std::string to_string(const EngineId& id) {
  char buf[17];
  for (int i = 0; i < 8; ++i) std::snprintf(buf + 2 * i, 3, "%02x", id[i]);
  return buf;
}

const BackendAddress* EngineMetadata::backend(std::string_view name) const {
  for (const auto& b : backends) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::string EngineMetadata::backend_names() const {
  std::string out;
  for (const auto& b : backends) out += (out.empty() ? "" : ",") + b.name;
  return out;
}

std::vector<std::uint8_t> EngineMetadata::to_bytes() const {
  spillway::detail::ByteWriter w;
  w.put_bytes(engine);
  put_field(w, control);
  w.put(static_cast<std::uint32_t>(backends.size()));
  for (const auto& b : backends) {
    put_field(w, b.name);
    put_field(w, b.address);
  }
  return seal(kMetadataMagic, w.take());
}

EngineMetadata EngineMetadata::from_bytes(std::span<const std::uint8_t> bytes) {
  const auto body = unseal(kMetadataMagic, bytes, "transfer engine metadata");
  spillway::detail::ByteReader r(body, "transfer engine metadata: ");
  EngineMetadata m;
  const auto id = r.bytes(m.engine.size(), "engine id");
  std::copy(id.begin(), id.end(), m.engine.begin());
  const auto control = get_field(r, "control address");
  m.control.assign(control.begin(), control.end());
  const auto n = r.get<std::uint32_t>("backend count");
  if (n == 0 || n > kMaxBackends) {
    r.fail(std::to_string(n) + " backends (1 to " + std::to_string(kMaxBackends) + ")");
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    BackendAddress b;
    const auto name = get_field(r, "backend name");
    b.name.assign(name.begin(), name.end());
    const auto address = get_field(r, "backend address");
    b.address.assign(address.begin(), address.end());
    if (b.name.empty()) r.fail("backend " + std::to_string(i) + " has no name");
    if (m.backend(b.name) != nullptr) r.fail("backend " + b.name + " is named twice");
    m.backends.push_back(std::move(b));
  }
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unexpected trailing bytes");
  if (m.control.find(':') == std::string::npos) {
    r.fail("control address '" + m.control + "' is not host:port");
  }
  return m;
}

}  // namespace detail

std::vector<std::uint8_t> RemoteRegion::to_bytes() const {
  spillway::detail::ByteWriter w;
  w.put_bytes(engine);
  w.put(region_id);
  w.put(length);
  w.put(static_cast<std::int32_t>(type));
  w.put(static_cast<std::int32_t>(device));
  w.put(offset);
  w.put(static_cast<std::uint32_t>(keys.size()));
  for (const RemoteKey& k : keys) {
    detail::put_field(w, k.backend);
    w.put(k.address);
    w.put(k.key);
    detail::put_field(w, k.blob);
  }
  return detail::seal(detail::kRegionMagic, w.take());
}

RemoteRegion RemoteRegion::from_bytes(std::span<const std::uint8_t> bytes) {
  const auto body = detail::unseal(detail::kRegionMagic, bytes, "remote region");
  spillway::detail::ByteReader r(body, "remote region: ");
  RemoteRegion region;
  const auto id = r.bytes(region.engine.size(), "engine id");
  std::copy(id.begin(), id.end(), region.engine.begin());
  region.region_id = r.get<std::uint64_t>("region id");
  region.length = r.get<std::uint64_t>("length");
  const auto type = r.get<std::int32_t>("memory type");
  if (type < 0 || type > static_cast<std::int32_t>(MemoryType::HOST)) {
    r.fail("memory type " + std::to_string(type) + " is not device, pinned or host");
  }
  region.type = static_cast<MemoryType>(type);
  region.device = r.get<std::int32_t>("device");
  region.offset = r.get<std::uint64_t>("offset");
  const auto n = r.get<std::uint32_t>("key count");
  if (n == 0 || n > detail::kMaxBackends) {
    r.fail(std::to_string(n) + " backend keys (1 to " + std::to_string(detail::kMaxBackends) + ")");
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    RemoteKey k;
    const auto name = detail::get_field(r, "backend name");
    k.backend.assign(name.begin(), name.end());
    k.address = r.get<std::uint64_t>("address");
    k.key = r.get<std::uint64_t>("key");
    const auto blob = detail::get_field(r, "backend blob");
    k.blob.assign(blob.begin(), blob.end());
    if (k.backend.empty()) r.fail("backend key " + std::to_string(i) + " has no name");
    region.keys.push_back(std::move(k));
  }
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unexpected trailing bytes");
  if (region.region_id == 0) r.fail("region id 0");
  if (region.offset + region.length < region.offset) r.fail("offset + length overflows");
  return region;
}

}  // namespace spillway::transfer
