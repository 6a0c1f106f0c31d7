#pragma once
// The control messages of the `transfer` communicator (internal): each starts with its kind,
// the sending rank and the tag, then what the kind carries. Everything parsed is checked; a
// message that is malformed or names another rank than its connection's is corrupt data.

#include <spillway/comm/tag.hpp>
#include <spillway/core/error.hpp>

#include "core/detail/byte_codec.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::detail {

struct TransferWire {
  enum class Kind : std::uint8_t {
    message = 1,   ///< a piece of a small message: last?, bytes
    offer = 2,     ///< a receive: size, imm, the exported region (empty for 0 bytes)
    refuse = 3,    ///< the matching send failed: imm, why
    empty = 4,     ///< the matching send of 0 bytes: imm
    arrive = 5,    ///< a rank reached barrier `generation` (to rank 0)
    release = 6,   ///< every rank reached barrier `generation` (from rank 0)
    withdraw = 7,  ///< a receive was dropped before its send came: imm (with the offer's tag)
  };

  /// The most bytes of a small message in one control message (the engine takes 1 MiB).
  static constexpr std::size_t max_piece = (std::size_t{1} << 20) - 64;

  struct Parsed {
    Kind kind{Kind::message};
    std::uint32_t tag{0};
    bool last{false};
    std::uint64_t size{0};
    std::uint32_t imm{0};
    bool device{false};  ///< an offer of the device window (else of host memory)
    std::uint64_t generation{0};
    std::span<const std::uint8_t> payload;
  };

  static std::vector<std::uint8_t> message(Rank src, std::uint32_t tag, bool last,
                                           std::span<const std::uint8_t> bytes) {
    ByteWriter w = head(Kind::message, src, tag, bytes.size() + 1);
    w.put<std::uint8_t>(last ? 1 : 0);
    w.put_bytes(bytes);
    return w.take();
  }
  static std::vector<std::uint8_t> offer(Rank src, std::uint32_t tag, std::uint64_t size,
                                         std::uint32_t imm, bool device,
                                         const std::vector<std::uint8_t>& region) {
    ByteWriter w = head(Kind::offer, src, tag, region.size() + 13);
    w.put(size);
    w.put(imm);
    w.put<std::uint8_t>(device ? 1 : 0);
    w.put_bytes(region);
    return w.take();
  }
  /// A refuse (with `why`), an empty answer or a withdrawal (with the offer's tag).
  static std::vector<std::uint8_t> answer(Kind kind, Rank src, std::uint32_t imm,
                                          std::string_view why, std::uint32_t tag = 0) {
    ByteWriter w = head(kind, src, tag, why.size() + 4);
    w.put(imm);
    w.put_bytes(why);
    return w.take();
  }
  static std::vector<std::uint8_t> barrier(Kind kind, Rank src, std::uint64_t generation) {
    ByteWriter w = head(kind, src, 0, 8);
    w.put(generation);
    return w.take();
  }

  /// @throws spillway::corrupt_data_error naming what is wrong
  static Parsed parse(std::span<const std::uint8_t> bytes, Rank from) {
    ByteReader r(bytes, "transfer communicator message: ");
    Parsed p;
    const auto kind = r.get<std::uint8_t>("kind");
    if (kind < 1 || kind > 7) r.fail("unknown kind " + std::to_string(kind));
    p.kind = static_cast<Kind>(kind);
    const auto src = r.get<std::int32_t>("rank");
    if (src != from) {
      r.fail("it says it is from rank " + std::to_string(src) + " but came from rank " +
             std::to_string(from));
    }
    p.tag = r.get<std::uint32_t>("tag");
    switch (p.kind) {
      case Kind::message:
        p.last = r.get<std::uint8_t>("last") != 0;
        break;
      case Kind::offer:
        p.size = r.get<std::uint64_t>("size");
        p.imm = r.get<std::uint32_t>("imm");
        p.device = r.get<std::uint8_t>("device") != 0;
        if (p.size > 0 && r.remaining() == 0) r.fail("an offer of bytes without a region");
        break;
      case Kind::refuse:
      case Kind::empty:
      case Kind::withdraw:
        p.imm = r.get<std::uint32_t>("imm");
        break;
      case Kind::arrive:
      case Kind::release:
        p.generation = r.get<std::uint64_t>("generation");
        break;
    }
    p.payload = r.bytes(r.remaining(), "payload");
    return p;
  }

 private:
  static ByteWriter head(Kind kind, Rank src, std::uint32_t tag, std::size_t body) {
    ByteWriter w;
    w.reserve(9 + body);
    w.put(static_cast<std::uint8_t>(kind));
    w.put(static_cast<std::int32_t>(src));
    w.put(tag);
    return w;
  }
};

}  // namespace spillway::detail
