#include <spillway/table/hashing.hpp>

#include "table/detail/type_dispatch.hpp"

#include <algorithm>
#include <cstring>

namespace spillway {

namespace {

/// Combines into out[i] the hash of the W-byte value v[i], for columns without nulls whose
/// values are hashed as their bytes (integers, dates, times): a loop the compiler vectorizes.
template <std::size_t W>
[[gnu::always_inline]] inline void combine_hashes(const std::byte* v, std::size_t n,
                                                  std::uint32_t seed, std::uint32_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    std::byte bytes[W];
    std::memcpy(bytes, v + i * W, W);
    out[i] = hash_combine(out[i], murmur3_32(bytes, W, seed));
  }
}

// murmur3's 32-bit multiplies vectorize only from SSE4.1's pmulld on, and the default build
// targets plain x86-64: the loop is also compiled for AVX2 and taken where the CPU has it. On the
// build machine 8 Mi int32 keys took 5 ms against 20 a value at a time. Chosen at the call,
// not by an ifunc (target_clones), whose resolver ThreadSanitizer's instrumentation crashed
// while the program was still being loaded.
#if defined(__x86_64__) && defined(__GNUC__)
template <std::size_t W>
[[gnu::target("avx2")]] void combine_hashes_avx2(const std::byte* v, std::size_t n,
                                                 std::uint32_t seed, std::uint32_t* out) noexcept {
  combine_hashes<W>(v, n, seed, out);
}

bool has_avx2() noexcept {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return yes;
}
#endif

template <std::size_t W>
void combine_hashes_fast(const std::byte* v, std::size_t n, std::uint32_t seed,
                         std::uint32_t* out) noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  if (has_avx2()) {
    combine_hashes_avx2<W>(v, n, seed, out);
    return;
  }
#endif
  combine_hashes<W>(v, n, seed, out);
}

}  // namespace

std::uint32_t hash_element(const ColumnView& col, std::size_t row, std::uint32_t seed) noexcept {
  if (!col.is_valid(row)) return null_hash;
  if (col.type == TypeId::STRING) {
    const auto s = col.string(row);
    return murmur3_32(s.data(), s.size(), seed);
  }
  return detail::dispatch_fixed(col.type,
                                [&]<typename T>() { return hash_value(col.value<T>(row), seed); });
}

void hash_rows(const TableView& keys, std::size_t begin, std::size_t end, std::uint32_t seed,
               std::uint32_t* out) noexcept {
  std::fill(out, out + (end - begin), 0U);
  for (std::size_t c = 0; c < keys.columns.size(); ++c) {
    const ColumnView& col = keys.columns[c];
    const std::uint32_t s = c == 0 ? seed : default_hash_seed;  // as cuDF: only column 0 is seeded
    if (col.type == TypeId::STRING) {
      for (std::size_t r = begin; r < end; ++r) {
        out[r - begin] = hash_combine(out[r - begin], hash_element(col, r, s));
      }
      continue;
    }
    // The type is dispatched once per column, not once per value.
    detail::dispatch_fixed(col.type, [&]<typename T>() {
      if constexpr (std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8)) {
        if (!col.nullable()) {
          const auto* v = static_cast<const std::byte*>(col.data) + begin * sizeof(T);
          combine_hashes_fast<sizeof(T)>(v, end - begin, s, out);
          return;
        }
      }
      const T* v = static_cast<const T*>(col.data);
      for (std::size_t r = begin; r < end; ++r) {
        const std::uint32_t h = col.is_valid(r) ? hash_value(v[r], s) : null_hash;
        out[r - begin] = hash_combine(out[r - begin], h);
      }
    });
  }
}

}  // namespace spillway
