#include <spillway/table/table.hpp>

#include <spillway/core/error.hpp>

namespace spillway {

std::size_t TableView::total_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& c : columns) {
    n += c.data_bytes();
    if (c.type == TypeId::STRING) n += (c.size + 1) * sizeof(std::int32_t);
    if (c.nullable()) n += mask_bytes(c.size);
  }
  return n;
}

std::size_t Table::total_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& c : columns_) {
    n += c.data().size();
    if (c.offsets() != nullptr) n += c.offsets()->size();
    if (c.null_mask() != nullptr) n += c.null_mask()->size();
  }
  return n;
}

Column::Column(DataType type, std::size_t rows, std::unique_ptr<Buffer> data,
               std::unique_ptr<Buffer> offsets, std::unique_ptr<Buffer> null_mask)
    : type_{type},
      rows_{rows},
      data_{std::move(data)},
      offsets_{std::move(offsets)},
      mask_{std::move(null_mask)} {
  SPILLWAY_EXPECTS(is_valid_type(type_), "not a column type: " + to_string(type_));
  SPILLWAY_EXPECTS(data_ != nullptr, "a column needs a data buffer");
  if (is_fixed_width(type_)) {
    SPILLWAY_EXPECTS(data_->size() >= rows_ * size_of(type_),
                     "a " + to_string(type_) + " column of " + std::to_string(rows_) +
                         " rows needs " + std::to_string(rows_ * size_of(type_)) +
                         " data bytes, got " + std::to_string(data_->size()));
  } else {
    SPILLWAY_EXPECTS(offsets_ != nullptr && offsets_->size() >= (rows_ + 1) * sizeof(std::int32_t),
                     "a string column needs rows + 1 int32 offsets");
  }
  SPILLWAY_EXPECTS(mask_ == nullptr || mask_->size() >= mask_bytes(rows_),
                   "the null mask is shorter than the rows");
}

ColumnView Column::view() const {
  ColumnView v;
  v.type = type_;
  v.size = rows_;
  v.data = data_->data();
  v.offsets = offsets_ ? reinterpret_cast<const std::int32_t*>(offsets_->data()) : nullptr;
  v.null_mask = mask_ ? reinterpret_cast<const std::uint8_t*>(mask_->data()) : nullptr;
  return v;
}

Column::Buffers Column::release() && noexcept {
  return {std::move(data_), std::move(offsets_), std::move(mask_)};
}

Table::Table(std::vector<Column> columns, std::vector<std::string> names)
    : columns_{std::move(columns)}, names_{std::move(names)} {
  if (names_.empty()) names_.resize(columns_.size());
  SPILLWAY_EXPECTS(names_.size() == columns_.size(), "a table needs one name per column");
  for (const auto& c : columns_) {
    SPILLWAY_EXPECTS(c.size() == num_rows(), "all columns of a table must have the same length");
  }
}

TableView Table::view() const {
  TableView v;
  v.names = names_;
  v.columns.reserve(columns_.size());
  for (const auto& c : columns_) v.columns.push_back(c.view());
  return v;
}

std::vector<Column> Table::release() && noexcept {
  std::vector<Column> out;
  out.swap(columns_);
  names_.clear();
  return out;
}

Table copy_table(const Table& table, MemoryType to, BufferResource& br, Stream stream) {
  auto copy = [&](const Buffer* b) -> std::unique_ptr<Buffer> {
    if (b == nullptr) return nullptr;
    auto res = br.reserve(to, b->size());
    return br.copy(*b, res, stream);
  };
  std::vector<Column> columns;
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    const Column& col = table.column(c);
    columns.emplace_back(col.type(), col.size(), copy(&col.data()), copy(col.offsets()),
                         copy(col.null_mask()));
  }
  return Table(std::move(columns), table.names());
}

}  // namespace spillway
