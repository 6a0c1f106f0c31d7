#include <spillway/table/hashing.hpp>

#include <algorithm>

namespace spillway {

std::uint32_t hash_element(const ColumnView& col, std::size_t row, std::uint32_t seed) noexcept {
  if (!col.is_valid(row)) return null_hash;
  switch (col.type) {
    case TypeId::INT8:
      return hash_value(col.value<std::int8_t>(row), seed);
    case TypeId::INT16:
      return hash_value(col.value<std::int16_t>(row), seed);
    case TypeId::INT32:
      return hash_value(col.value<std::int32_t>(row), seed);
    case TypeId::INT64:
      return hash_value(col.value<std::int64_t>(row), seed);
    case TypeId::UINT8:
    case TypeId::BOOL8:
      return hash_value(col.value<std::uint8_t>(row), seed);
    case TypeId::UINT16:
      return hash_value(col.value<std::uint16_t>(row), seed);
    case TypeId::UINT32:
      return hash_value(col.value<std::uint32_t>(row), seed);
    case TypeId::UINT64:
      return hash_value(col.value<std::uint64_t>(row), seed);
    case TypeId::FLOAT32:
      return hash_value(col.value<float>(row), seed);
    case TypeId::FLOAT64:
      return hash_value(col.value<double>(row), seed);
    case TypeId::STRING: {
      const auto s = col.string(row);
      return murmur3_32(s.data(), s.size(), seed);
    }
  }
  return null_hash;
}

}  // namespace spillway

namespace spillway {

namespace {
template <typename T>
void combine_fixed(const ColumnView& col, std::size_t begin, std::size_t end, std::uint32_t seed,
                   std::uint32_t* out) noexcept {
  const T* v = static_cast<const T*>(col.data);
  if (col.null_mask == nullptr) {
    for (std::size_t r = begin; r < end; ++r) {
      out[r - begin] = hash_combine(out[r - begin], hash_value(v[r], seed));
    }
  } else {
    for (std::size_t r = begin; r < end; ++r) {
      const std::uint32_t h = col.is_valid(r) ? hash_value(v[r], seed) : null_hash;
      out[r - begin] = hash_combine(out[r - begin], h);
    }
  }
}
}  // namespace

void hash_rows(const TableView& keys, std::size_t begin, std::size_t end, std::uint32_t seed,
               std::uint32_t* out) noexcept {
  std::fill(out, out + (end - begin), 0U);
  for (std::size_t c = 0; c < keys.columns.size(); ++c) {
    const ColumnView& col = keys.columns[c];
    const std::uint32_t s = c == 0 ? seed : default_hash_seed;  // as cuDF: only column 0 is seeded
    switch (col.type) {
      case TypeId::INT8:
        combine_fixed<std::int8_t>(col, begin, end, s, out);
        break;
      case TypeId::INT16:
        combine_fixed<std::int16_t>(col, begin, end, s, out);
        break;
      case TypeId::INT32:
        combine_fixed<std::int32_t>(col, begin, end, s, out);
        break;
      case TypeId::INT64:
        combine_fixed<std::int64_t>(col, begin, end, s, out);
        break;
      case TypeId::UINT8:
      case TypeId::BOOL8:
        combine_fixed<std::uint8_t>(col, begin, end, s, out);
        break;
      case TypeId::UINT16:
        combine_fixed<std::uint16_t>(col, begin, end, s, out);
        break;
      case TypeId::UINT32:
        combine_fixed<std::uint32_t>(col, begin, end, s, out);
        break;
      case TypeId::UINT64:
        combine_fixed<std::uint64_t>(col, begin, end, s, out);
        break;
      case TypeId::FLOAT32:
        combine_fixed<float>(col, begin, end, s, out);
        break;
      case TypeId::FLOAT64:
        combine_fixed<double>(col, begin, end, s, out);
        break;
      case TypeId::STRING:
        for (std::size_t r = begin; r < end; ++r) {
          out[r - begin] = hash_combine(out[r - begin], hash_element(col, r, s));
        }
        break;
    }
  }
}

}  // namespace spillway
