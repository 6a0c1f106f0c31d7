#include "wire.hpp"

#include <spillway/core/error.hpp>

#include <cstring>
#include <string>

namespace spillway::detail {

namespace {

constexpr std::uint32_t chunk_magic = 0x48435053;   // "SPCH"
constexpr std::uint32_t finish_magic = 0x4E465053;  // "SPFN"

template <typename T>
void put(std::vector<std::uint8_t>& out, T v) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

class Reader {
 public:
  Reader(std::span<const std::uint8_t> in, const char* what) : in_{in}, what_{what} {}
  template <typename T>
  T get(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::uint8_t> bytes(std::size_t n, const char* field) {
    need(n, field);
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  void end() const {
    if (pos_ != in_.size()) fail(std::to_string(in_.size() - pos_) + " trailing bytes");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw corrupt_data_error(std::string("spillway: corrupt shuffle ") + what_ +
                             " message: " + why);
  }

 private:
  void need(std::size_t n, const char* field) const {
    if (n > in_.size() - pos_) {
      fail(std::string("truncated at ") + field + " (" + std::to_string(in_.size()) + " bytes)");
    }
  }
  std::span<const std::uint8_t> in_;
  const char* what_;
  std::size_t pos_{0};
};

void check_pid(const Reader& r, PartID pid, PartID total) {
  if (pid >= total) {
    r.fail("partition " + std::to_string(pid) + " of " + std::to_string(total));
  }
}

}  // namespace

std::vector<std::uint8_t> encode_chunk(const ChunkHeader& h) {
  std::vector<std::uint8_t> out;
  put(out, chunk_magic);
  put(out, h.pid);
  put(out, h.payload_bytes);
  put(out, static_cast<std::uint32_t>(h.metadata.size()));
  out.insert(out.end(), h.metadata.begin(), h.metadata.end());
  return out;
}

ChunkHeader decode_chunk(std::span<const std::uint8_t> bytes, PartID total) {
  Reader r(bytes, "chunk");
  if (r.get<std::uint32_t>("magic") != chunk_magic) r.fail("bad magic");
  ChunkHeader h;
  h.pid = r.get<PartID>("partition");
  check_pid(r, h.pid, total);
  h.payload_bytes = r.get<std::uint64_t>("payload size");
  const auto n = r.get<std::uint32_t>("metadata size");
  const auto meta = r.bytes(n, "metadata");
  h.metadata.assign(meta.begin(), meta.end());
  r.end();
  return h;
}

std::vector<std::uint8_t> encode_finish(const FinishCounts& counts) {
  std::vector<std::uint8_t> out;
  put(out, finish_magic);
  put(out, static_cast<std::uint32_t>(counts.size()));
  for (const auto& [pid, n] : counts) {
    put(out, pid);
    put(out, n);
  }
  return out;
}

FinishCounts decode_finish(std::span<const std::uint8_t> bytes, PartID total) {
  Reader r(bytes, "finish");
  if (r.get<std::uint32_t>("magic") != finish_magic) r.fail("bad magic");
  const auto count = r.get<std::uint32_t>("count");
  if (count > total) r.fail(std::to_string(count) + " partitions of " + std::to_string(total));
  FinishCounts out;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto pid = r.get<PartID>("partition");
    check_pid(r, pid, total);
    out.emplace_back(pid, r.get<std::uint64_t>("chunks"));
  }
  r.end();
  return out;
}

}  // namespace spillway::detail
