#include <spillway/table/data_type.hpp>

#include <array>

namespace spillway {

std::string_view to_string(TypeId t) noexcept {
  static constexpr std::array<std::string_view, num_type_ids> names{
      "int8",   "int16",  "int32",   "int64",   "uint8", "uint16",
      "uint32", "uint64", "float32", "float64", "bool8", "string"};
  const auto i = static_cast<std::size_t>(t);
  return i < names.size() ? names[i] : "unknown";
}

}  // namespace spillway
