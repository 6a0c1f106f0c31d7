#include <spillway/table/hashing.hpp>

#include "table/detail/type_dispatch.hpp"

#include <algorithm>

namespace spillway {

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
      const T* v = static_cast<const T*>(col.data);
      for (std::size_t r = begin; r < end; ++r) {
        const std::uint32_t h = col.is_valid(r) ? hash_value(v[r], s) : null_hash;
        out[r - begin] = hash_combine(out[r - begin], h);
      }
    });
  }
}

}  // namespace spillway
