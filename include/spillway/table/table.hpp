#pragma once
/// @file table.hpp
/// Owning columns and tables: their bytes live in Buffers of a BufferResource.

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>

#include <memory>
#include <string>
#include <vector>

namespace spillway {

/// One column that owns its buffers (data; offsets for STRING; an optional validity mask).
/// Move-only. `view()` needs the buffers in a memory tier (not DISK).
class Column {
 public:
  /// @throws spillway::logic_error when the buffers do not fit the type and row count.
  Column(DataType type, std::size_t rows, std::unique_ptr<Buffer> data,
         std::unique_ptr<Buffer> offsets = nullptr, std::unique_ptr<Buffer> null_mask = nullptr);

  [[nodiscard]] DataType type() const noexcept { return type_; }
  [[nodiscard]] std::size_t size() const noexcept { return rows_; }
  [[nodiscard]] ColumnView view() const;
  [[nodiscard]] const Buffer& data() const noexcept { return *data_; }
  [[nodiscard]] const Buffer* offsets() const noexcept { return offsets_.get(); }
  [[nodiscard]] const Buffer* null_mask() const noexcept { return mask_.get(); }

  /// A column's buffers, handed over whole.
  struct Buffers {
    std::unique_ptr<Buffer> data;
    std::unique_ptr<Buffer> offsets;    ///< STRING only
    std::unique_ptr<Buffer> null_mask;  ///< may be null
  };
  /// Hands the buffers over (to keep them elsewhere without a copy: SpillableTables); the
  /// column is left without any and must not be used but to be destroyed.
  [[nodiscard]] Buffers release() && noexcept;

 private:
  DataType type_;
  std::size_t rows_;
  std::unique_ptr<Buffer> data_;
  std::unique_ptr<Buffer> offsets_;
  std::unique_ptr<Buffer> mask_;
};

/// Columns of equal length, with names. Move-only.
class Table {
 public:
  Table() = default;
  /// @throws spillway::logic_error when the lengths differ or names do not match the columns.
  Table(std::vector<Column> columns, std::vector<std::string> names = {});

  [[nodiscard]] std::size_t num_columns() const noexcept { return columns_.size(); }
  [[nodiscard]] std::size_t num_rows() const noexcept {
    return columns_.empty() ? 0 : columns_.front().size();
  }
  [[nodiscard]] const Column& column(std::size_t i) const { return columns_.at(i); }
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] TableView view() const;
  /// Bytes of all data, offsets and masks, from the buffers' sizes: for a table in any tier
  /// (TableView::total_bytes reads STRING offsets, so it takes host-accessible columns only).
  [[nodiscard]] std::size_t total_bytes() const noexcept;
  /// Hands the columns over (to free them one at a time); the table is left empty.
  [[nodiscard]] std::vector<Column> release() && noexcept;

 private:
  std::vector<Column> columns_;
  std::vector<std::string> names_;
};

/// A copy of `table` whose buffers are on tier `to` (DEVICE to hand a host table to the GPU
/// functions of gpu.hpp, HOST to read a result on the host). Copies that involve the GPU are
/// asynchronous on `stream`. @throws spillway::out_of_memory
Table copy_table(const Table& table, MemoryType to, BufferResource& br, Stream stream = {});

}  // namespace spillway
