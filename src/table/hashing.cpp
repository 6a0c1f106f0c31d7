#include <spillway/table/hashing.hpp>

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
