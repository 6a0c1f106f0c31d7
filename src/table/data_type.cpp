#include <spillway/table/data_type.hpp>

#include <array>

namespace spillway {

std::string_view to_string(TypeId t) noexcept {
  static constexpr std::array<std::string_view, num_type_ids> names{
      "int8",   "int16",        "int32",         "int64",         "uint8",         "uint16",
      "uint32", "uint64",       "float32",       "float64",       "bool8",         "string",
      "date32", "timestamp[s]", "timestamp[ms]", "timestamp[us]", "timestamp[ns]", "decimal128"};
  const auto i = static_cast<std::size_t>(t);
  return i < names.size() ? names[i] : "unknown";
}

std::string to_string(DataType t) {
  std::string s(to_string(t.id));
  if (t.id == TypeId::DECIMAL128) {
    s += "(" + std::to_string(int{t.precision}) + ", " + std::to_string(int{t.scale}) + ")";
  }
  return s;
}

}  // namespace spillway
