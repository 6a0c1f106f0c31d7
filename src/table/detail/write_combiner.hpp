#pragma once
// Software write-combining for the CPU scatter of fixed-width values (internal): each
// partition gets a cache-line buffer per column that is written out whole, with non-temporal
// stores once the destination is line-aligned, instead of scattered 1-16 byte stores that each
// miss and read the line first. Keeps each partition's values in input order.

#include <spillway/core/error.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace spillway::detail {

/// The buffers of one thread for a group of columns of one width W whose destinations sit at
/// the same place within a cache line in every partition: each row's partition is then read,
/// and its fill count kept, once for the whole group (a column at a time, the partition ids
/// were read again for every column and the count's load-add-store chain ran per value).
class WriteCombiner {
 public:
  static constexpr std::size_t line = 64;
  /// The most columns in a group.
  static constexpr std::size_t max_group = 16;

  /// Whether columns with first destinations `a` and `b` (per partition) can share a group.
  static bool same_alignment(std::span<std::byte* const> a, std::span<std::byte* const> b) {
    for (std::size_t p = 0; p < a.size(); ++p) {
      if (reinterpret_cast<std::uintptr_t>(a[p]) % line !=
          reinterpret_cast<std::uintptr_t>(b[p]) % line) {
        return false;
      }
    }
    return true;
  }

  /// `dest[k][p]`: where this thread's first value of partition p goes in column k; each a
  /// multiple of the values' width past a line boundary, alike for every k.
  explicit WriteCombiner(std::vector<std::vector<std::byte*>> dest)
      : k_{dest.size()},
        n_{dest.empty() ? 0 : dest[0].size()},
        buf_(k_ * n_),
        to_(k_ * n_),
        fill_(n_) {
    SPILLWAY_EXPECTS(k_ <= max_group, "write-combining a group of over 16 columns");
    for (std::size_t p = 0; p < n_; ++p) {
      for (std::size_t k = 0; k < k_; ++k) to_[p * k_ + k] = dest[k][p];
      // The first line's bytes start where the destination starts within its line.
      fill_[p] =
          k_ == 0 ? 0
                  : static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(dest[0][p]) % line);
    }
  }

  /// Rows [0, count) of the group's columns, `from[k]` the first value of column k.
  template <std::size_t W, typename PidT>
  void push_rows(const PidT* ids, std::span<const std::byte* const> from,
                 std::size_t count) noexcept {
    // The usual group sizes with the column loops unrolled (4096 partitions: groups of 1, 2048
    // and 300: of 2, 1024: of 4), any other (five, at 64 to 128 and at 512 partitions) through
    // the same code with the size at run time.
    switch (k_) {
      case 1:
        push<W, PidT, 1>(ids, from, count);
        return;
      case 2:
        push<W, PidT, 2>(ids, from, count);
        return;
      case 4:
        push<W, PidT, 4>(ids, from, count);
        return;
      default:
        push<W, PidT, 0>(ids, from, count);
    }
  }

  /// Writes out what is left (the tail of every partition). Call once, at the end.
  void finish() noexcept {
    for (std::size_t p = 0; p < n_; ++p) {
      for (std::size_t k = 0; k < k_; ++k) {
        std::byte* to = to_[p * k_ + k];
        const std::size_t start = reinterpret_cast<std::uintptr_t>(to) % line;
        if (fill_[p] > start) std::memcpy(to, buf_[p * k_ + k].bytes + start, fill_[p] - start);
      }
    }
#if defined(__SSE2__)
    _mm_sfence();  // order the non-temporal stores before the data is handed on
#endif
  }

 private:
  struct alignas(line) Line {
    std::byte bytes[line];
  };

  /// push_rows for groups of K columns (0: k_, read once).
  template <std::size_t W, typename PidT, std::size_t K>
  void push(const PidT* ids, std::span<const std::byte* const> from, std::size_t count) noexcept {
    // Locals throughout: the byte stores may alias anything reached through a member or a
    // span, which would then be loaded again for every value.
    const std::size_t group = K == 0 ? k_ : K;
    std::uint32_t* const fill = fill_.data();
    Line* const buf = buf_.data();
    std::array<const std::byte*, max_group> src{};
    for (std::size_t k = 0; k < group; ++k) src[k] = from[k];
    for (std::size_t i = 0; i < count; ++i) {
      const PidT p = ids[i];
      std::uint32_t f = fill[p];
      Line* const b = buf + p * group;
      for (std::size_t k = 0; k < group; ++k) std::memcpy(b[k].bytes + f, src[k] + i * W, W);
      f += W;
      if (f == line) {
        flush<K>(p);
        f = 0;
      }
      fill[p] = f;
    }
  }

  template <std::size_t K>
  void flush(std::size_t p) noexcept {
    const std::size_t group = K == 0 ? k_ : K;
    for (std::size_t k = 0; k < group; ++k) {
      std::byte*& to = to_[p * group + k];
      const std::byte* from = buf_[p * group + k].bytes;
      const std::size_t start = reinterpret_cast<std::uintptr_t>(to) % line;
#if defined(__SSE2__)
      if (start == 0) {
        auto* dst = reinterpret_cast<__m128i*>(to);
        const auto* src = reinterpret_cast<const __m128i*>(from);
        _mm_stream_si128(dst + 0, _mm_load_si128(src + 0));
        _mm_stream_si128(dst + 1, _mm_load_si128(src + 1));
        _mm_stream_si128(dst + 2, _mm_load_si128(src + 2));
        _mm_stream_si128(dst + 3, _mm_load_si128(src + 3));
        to += line;
        continue;
      }
#endif
      // The first, partial line (or every line, without non-temporal stores).
      std::memcpy(to, from + start, line - start);
      to += line - start;
    }
  }

  std::size_t k_;
  std::size_t n_;
  std::vector<Line> buf_;            // [p * k + k']
  std::vector<std::byte*> to_;       // [p * k + k']: where the current line goes
  std::vector<std::uint32_t> fill_;  // [p]: bytes of the current lines, from the line's start
};

}  // namespace spillway::detail
