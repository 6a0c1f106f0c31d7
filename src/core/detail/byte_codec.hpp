#pragma once
// Little-endian encoding of fixed-size fields into a byte vector, and bounds-checked decoding
// of bytes from another process (internal; used by the packed-table metadata and the shuffle
// messages).

#include <spillway/core/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace spillway::detail {

class ByteWriter {
 public:
  ByteWriter() = default;
  /// Writes into `reuse`, emptied, keeping its capacity.
  explicit ByteWriter(std::vector<std::uint8_t>&& reuse) : out_{std::move(reuse)} {
    out_.resize(out_.capacity());
  }
  template <typename T>
  void put(T v) {
    std::memcpy(grow(sizeof(T)), &v, sizeof(T));
  }
  template <typename Bytes>
  void put_bytes(const Bytes& b) {
    if (!b.empty()) std::memcpy(grow(b.size()), b.data(), b.size());
  }
  void reserve(std::size_t bytes) {
    if (bytes > out_.size()) out_.resize(bytes);
  }
  std::vector<std::uint8_t> take() {
    out_.resize(used_);
    used_ = 0;
    return std::move(out_);
  }

 private:
  /// Room for `n` more bytes (the vector's size is its written part's capacity: a field costs
  /// a copy, not a resize).
  std::uint8_t* grow(std::size_t n) {
    if (used_ + n > out_.size())
      out_.resize(std::max({used_ + n, 2 * out_.size(), std::size_t{64}}));
    std::uint8_t* at = out_.data() + used_;
    used_ += n;
    return at;
  }

  std::vector<std::uint8_t> out_;
  std::size_t used_{0};
};

/// Reads fields in order; a field that runs past the end throws corrupt_data_error with
/// `prefix` + "truncated: <field> needs <n> bytes at offset <o> of <size>".
class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> in, std::string prefix)
      : in_{in}, prefix_{std::move(prefix)} {}
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
  std::string get_string(std::size_t n, const char* field) {
    const auto s = bytes(n, field);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - pos_; }
  /// Throws corrupt_data_error with the prefix and `why`.
  [[noreturn]] void fail(const std::string& why) const {
    SPILLWAY_FAIL(prefix_ + why, corrupt_data_error);
  }

 private:
  void need(std::size_t n, const char* field) const {
    if (n > in_.size() - pos_) {
      fail("truncated: " + std::string(field) + " needs " + std::to_string(n) +
           " bytes at offset " + std::to_string(pos_) + " of " + std::to_string(in_.size()));
    }
  }
  std::span<const std::uint8_t> in_;
  std::string prefix_;
  std::size_t pos_{0};
};

}  // namespace spillway::detail
