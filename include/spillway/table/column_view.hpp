#pragma once
/// @file column_view.hpp
/// Non-owning views of columns and tables.

#include <spillway/table/data_type.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway {

/// A non-owning view of one column; passed by value. Pointers are host or device pointers of
/// the memory the column lives in. `null_mask` is Arrow's validity bitmap (bit i of byte i/8,
/// LSB first; 1 = valid) or nullptr when every row is valid. For STRING, `offsets` holds
/// size + 1 int32 values starting at 0 and `data` the characters.
struct ColumnView {
  DataType type{TypeId::INT32};
  std::size_t size{0};
  const void* data{nullptr};
  const std::int32_t* offsets{nullptr};
  const std::uint8_t* null_mask{nullptr};

  [[nodiscard]] bool nullable() const noexcept { return null_mask != nullptr; }
  /// Host access: whether row i is valid.
  [[nodiscard]] bool is_valid(std::size_t i) const noexcept {
    return null_mask == nullptr || ((null_mask[i / 8] >> (i % 8)) & 1U) != 0;
  }
  /// Host access to a fixed-width value.
  template <typename T>
  [[nodiscard]] const T& value(std::size_t i) const noexcept {
    return static_cast<const T*>(data)[i];
  }
  /// Host access to a string value.
  [[nodiscard]] std::string_view string(std::size_t i) const noexcept {
    return {static_cast<const char*>(data) + offsets[i],
            static_cast<std::size_t>(offsets[i + 1] - offsets[i])};
  }
  /// Bytes of the data buffer: rows x width, or the characters of a STRING column.
  [[nodiscard]] std::size_t data_bytes() const noexcept {
    return is_fixed_width(type) ? size * size_of(type)
                                : (size == 0 ? 0 : static_cast<std::size_t>(offsets[size]));
  }
};

/// Bytes of a validity bitmap for `rows` rows.
constexpr std::size_t mask_bytes(std::size_t rows) noexcept {
  return (rows + 7) / 8;
}

/// A non-owning view of columns of equal length, with names (may be empty strings).
struct TableView {
  std::vector<ColumnView> columns;
  std::vector<std::string> names;

  [[nodiscard]] std::size_t num_columns() const noexcept { return columns.size(); }
  [[nodiscard]] std::size_t num_rows() const noexcept {
    return columns.empty() ? 0 : columns.front().size;
  }
  /// Bytes of all data, offsets and masks (what a pack copies). Reads the last offset of each
  /// STRING column: host-accessible columns only (Table::total_bytes takes any tier).
  [[nodiscard]] std::size_t total_bytes() const noexcept;
};

}  // namespace spillway
