#include <spillway/table/arrow.hpp>

#include <spillway/core/error.hpp>

#include "table/detail/cpu_threads.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace spillway {

namespace {

struct Format {
  const char* arrow;
  TypeId type;
};
constexpr Format formats[] = {{"c", TypeId::INT8},
                              {"s", TypeId::INT16},
                              {"i", TypeId::INT32},
                              {"l", TypeId::INT64},
                              {"C", TypeId::UINT8},
                              {"S", TypeId::UINT16},
                              {"I", TypeId::UINT32},
                              {"L", TypeId::UINT64},
                              {"f", TypeId::FLOAT32},
                              {"g", TypeId::FLOAT64},
                              {"b", TypeId::BOOL8},
                              {"u", TypeId::STRING},
                              {"tdD", TypeId::DATE32},
                              {"tss:", TypeId::TIMESTAMP_SECONDS},
                              {"tsm:", TypeId::TIMESTAMP_MILLISECONDS},
                              {"tsu:", TypeId::TIMESTAMP_MICROSECONDS},
                              {"tsn:", TypeId::TIMESTAMP_NANOSECONDS}};

/// The Arrow format string of a type (decimals as "d:precision,scale").
std::string arrow_format(DataType t) {
  if (t.id == TypeId::DECIMAL128) {
    return "d:" + std::to_string(int{t.precision}) + "," + std::to_string(int{t.scale});
  }
  for (const auto& f : formats) {
    if (f.type == t.id) return f.arrow;
  }
  return "?";
}

/// A number of an Arrow format string, from `at` to the next ',' or the end.
std::optional<int> format_number(std::string_view fmt, std::size_t& at) {
  const std::size_t end = std::min(fmt.find(',', at), fmt.size());
  int v = 0;
  const auto [p, ec] = std::from_chars(fmt.data() + at, fmt.data() + end, v);
  if (ec != std::errc{} || p != fmt.data() + end || end == at) return std::nullopt;
  at = end + 1;
  return v;
}

/// The type of an Arrow format string, or why it has none here.
std::variant<DataType, std::string> parse_format(std::string_view fmt) {
  const std::string supported =
      " (supported: int8..int64, uint8..uint64, float32, float64, bool, utf8 string, large "
      "utf8, utf8 view, date32, timestamp without a time zone, decimal128)";
  if (fmt == "U" || fmt == "vu") return DataType{TypeId::STRING};  // copied into utf8
  if (fmt.starts_with("d:")) {                                     // d:precision,scale[,bitwidth]
    std::size_t at = 2;
    const auto precision = format_number(fmt, at);
    const auto scale = precision ? format_number(fmt, at) : std::nullopt;
    const auto bits = at < fmt.size() && scale ? format_number(fmt, at) : std::optional<int>(128);
    if (!precision || !scale || !bits || at < fmt.size()) {
      return "malformed decimal format '" + std::string(fmt) + "'";
    }
    if (*bits != 128) {
      return "decimal" + std::to_string(*bits) + " is not supported (decimal128 is)";
    }
    const DataType t = decimal128(*precision, *scale);
    if (*precision < 1 || *precision > decimal128_max_precision || *scale < -128 || *scale > 127 ||
        !is_valid_type(t)) {
      return "decimal128 of precision " + std::to_string(*precision) + " and scale " +
             std::to_string(*scale) + " (want precision 1 to 38, scale -38 to 38)";
    }
    return t;
  }
  if (fmt.starts_with("ts") && fmt.size() > 4 && fmt[3] == ':') {
    return "timestamps with a time zone ('" + std::string(fmt) +
           "') are not supported; cast to a timestamp without one";
  }
  for (const auto& f : formats) {
    if (fmt == f.arrow) return DataType{f.type};
  }
  return "Arrow format '" + std::string(fmt) + "' is not supported" + supported;
}

[[noreturn]] void bad_column(const std::string& name, std::size_t i, const std::string& why) {
  SPILLWAY_FAIL("import_arrow: column " + std::to_string(i) + " ('" + name + "'): " + why);
}

/// The string layouts that come in besides utf8 ('u', int32 offsets, taken as it is): large
/// utf8 ('U', int64 offsets) and utf8 views ('vu', Polars' default), both copied into utf8.
enum class Strings { utf8, large, view };

/// rows strings (from row `offset` of the Arrow column) as utf8: int32 offsets and characters
/// in HOST buffers, every length and position checked against the buffers it reads.
void copy_to_utf8(const ArrowArray& ca, Strings layout, std::size_t offset, std::size_t rows,
                  const std::string& name, std::size_t ci, BufferResource& br, ColumnView& v,
                  std::vector<std::unique_ptr<Buffer>>& copies) {
  struct Piece {
    const char* at;
    std::int64_t len;
  };
  std::vector<Piece> pieces(rows);
  if (layout == Strings::large) {
    const auto* off = static_cast<const std::int64_t*>(ca.buffers[1]) + offset;
    const auto* chars = static_cast<const char*>(ca.buffers[2]);
    if (off[0] < 0) bad_column(name, ci, "negative string offset");
    for (std::size_t r = 0; r < rows; ++r) {
      if (off[r + 1] < off[r]) {
        bad_column(name, ci, "string offsets decrease at row " + std::to_string(r));
      }
      pieces[r] = {chars + off[r], off[r + 1] - off[r]};
    }
  } else {
    // Views: 16 bytes each, int32 length, then the string itself when it is at most 12 bytes,
    // else a 4-byte prefix, the index of its data buffer and its offset there. The last
    // buffer holds the data buffers' sizes.
    const std::int64_t data_buffers = ca.n_buffers - 3;
    const auto* views = static_cast<const std::uint8_t*>(ca.buffers[1]) + offset * 16;
    const auto* sizes = static_cast<const std::int64_t*>(ca.buffers[ca.n_buffers - 1]);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint8_t* view = views + r * 16;
      std::int32_t len = 0;
      std::memcpy(&len, view, 4);
      if (len < 0) bad_column(name, ci, "a negative string length at row " + std::to_string(r));
      if (len <= 12) {
        pieces[r] = {reinterpret_cast<const char*>(view + 4), len};
        continue;
      }
      std::int32_t buffer = 0;
      std::int32_t at = 0;
      std::memcpy(&buffer, view + 8, 4);
      std::memcpy(&at, view + 12, 4);
      if (buffer < 0 || buffer >= data_buffers || at < 0 || sizes == nullptr ||
          ca.buffers[2 + buffer] == nullptr || std::int64_t{at} + len > sizes[buffer]) {
        bad_column(
            name, ci,
            "a string view at row " + std::to_string(r) + " points outside its data buffers");
      }
      pieces[r] = {static_cast<const char*>(ca.buffers[2 + buffer]) + at, len};
    }
  }
  std::int64_t total = 0;
  for (const Piece& p : pieces) total += p.len;
  if (total > INT32_MAX) {
    bad_column(name, ci, "more than 2 GiB of characters in one column (utf8's int32 offsets)");
  }
  auto offsets = br.allocate(MemoryType::HOST, (rows + 1) * sizeof(std::int32_t));
  auto chars =
      br.allocate(MemoryType::HOST, std::max<std::size_t>(static_cast<std::size_t>(total), 1));
  auto* o = reinterpret_cast<std::int32_t*>(offsets->data());
  o[0] = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::memcpy(chars->data() + o[r], pieces[r].at, static_cast<std::size_t>(pieces[r].len));
    o[r + 1] = o[r] + static_cast<std::int32_t>(pieces[r].len);
  }
  v.offsets = o;
  v.data = chars->data();
  copies.push_back(std::move(offsets));
  copies.push_back(std::move(chars));
}

}  // namespace

ArrowImport::~ArrowImport() {
  if (array_.release != nullptr) array_.release(&array_);
  if (schema_.release != nullptr) schema_.release(&schema_);
}

ArrowImport::ArrowImport(ArrowImport&& o) noexcept
    : schema_{o.schema_},
      array_{o.array_},
      view_{std::move(o.view_)},
      copies_{std::move(o.copies_)} {
  o.schema_.release = nullptr;
  o.array_.release = nullptr;
}

ArrowImport import_arrow(ArrowSchema* schema, ArrowArray* array, BufferResource& br) {
  SPILLWAY_EXPECTS(schema != nullptr && array != nullptr && schema->release != nullptr &&
                       array->release != nullptr,
                   "import_arrow: null or already released ArrowSchema/ArrowArray");
  ArrowImport imp;
  imp.schema_ = *schema;  // take ownership (moves the structs, as a consumer does)
  schema->release = nullptr;
  imp.array_ = *array;
  array->release = nullptr;
  const ArrowSchema& s = imp.schema_;
  const ArrowArray& a = imp.array_;
  const std::string_view top = s.format != nullptr ? s.format : "";
  SPILLWAY_EXPECTS(
      top == "+s",
      "import_arrow: expected a record batch (struct format '+s'), got '" + std::string(top) + "'");
  // Every count and pointer is checked before it is used: the structs come from the caller.
  SPILLWAY_EXPECTS(a.length >= 0 && a.offset >= 0 && a.n_children == s.n_children &&
                       s.n_children >= 0 && a.length <= INT64_MAX - a.offset,
                   "import_arrow: malformed struct array (length " + std::to_string(a.length) +
                       ", offset " + std::to_string(a.offset) + ", " +
                       std::to_string(a.n_children) + " children for " +
                       std::to_string(s.n_children) + " fields)");
  SPILLWAY_EXPECTS(s.n_children == 0 || (s.children != nullptr && a.children != nullptr),
                   "import_arrow: a record batch of " + std::to_string(s.n_children) +
                       " fields without its list of children");
  SPILLWAY_EXPECTS(
      a.n_buffers >= 0 && (a.n_buffers == 0 || a.buffers != nullptr),
      "import_arrow: malformed struct array (" + std::to_string(a.n_buffers) + " buffers)");
  SPILLWAY_EXPECTS(a.null_count == 0 || a.n_buffers < 1 || a.buffers[0] == nullptr,
                   "import_arrow: null rows at the record-batch level are not supported");
  const auto rows = static_cast<std::size_t>(a.length);
  for (std::int64_t i = 0; i < s.n_children; ++i) {
    if (s.children[i] == nullptr || a.children[i] == nullptr) {
      SPILLWAY_FAIL("import_arrow: column " + std::to_string(i) + " is a null pointer");
    }
    const ArrowSchema& cs = *s.children[i];
    const ArrowArray& ca = *a.children[i];
    const std::string name = cs.name != nullptr ? cs.name : "";
    const std::string fmt = cs.format != nullptr ? cs.format : "";
    const auto ci = static_cast<std::size_t>(i);
    const Strings strings = fmt == "U"    ? Strings::large
                            : fmt == "vu" ? Strings::view
                                          : Strings::utf8;
    const auto parsed = parse_format(fmt);
    if (const auto* why = std::get_if<std::string>(&parsed)) bad_column(name, ci, *why);
    const DataType type = std::get<DataType>(parsed);
    if (cs.dictionary != nullptr)
      bad_column(name, ci, "dictionary-encoded columns are not supported");
    if (ca.length < a.offset + a.length) {
      bad_column(name, ci,
                 "its length " + std::to_string(ca.length) + " is shorter than the batch");
    }
    if (ca.offset < 0 || ca.offset > INT64_MAX - ca.length) {
      bad_column(name, ci, "bad offset " + std::to_string(ca.offset));
    }
    const std::int64_t expected_buffers = type == TypeId::STRING ? 3 : 2;
    const bool buffers_ok =
        strings == Strings::view ? ca.n_buffers >= 3 : ca.n_buffers == expected_buffers;
    if (!buffers_ok || ca.buffers == nullptr) {
      bad_column(name, ci,
                 "expected " + std::to_string(expected_buffers) + " buffers, got " +
                     std::to_string(ca.n_buffers));
    }
    // (A view column's buffers past the views are checked where they are read.)
    for (std::int64_t b = 1; b < (strings == Strings::view ? 2 : expected_buffers); ++b) {
      if (ca.buffers[b] == nullptr && rows > 0) {
        bad_column(name, ci, "buffer " + std::to_string(b) + " is a null pointer");
      }
    }
    const auto offset = static_cast<std::size_t>(ca.offset + a.offset);
    ColumnView v;
    v.type = type;
    v.size = rows;
    if (rows == 0) {  // no buffer is read (a producer may leave them null)
      if (type == TypeId::STRING) {
        auto zero = br.allocate(MemoryType::HOST, sizeof(std::int32_t));
        std::memset(zero->data(), 0, zero->size());
        v.offsets = reinterpret_cast<const std::int32_t*>(zero->data());
        imp.copies_.push_back(std::move(zero));
      }
      imp.view_.columns.push_back(v);
      imp.view_.names.push_back(name);
      continue;
    }
    const auto* validity = static_cast<const std::uint8_t*>(ca.buffers[0]);
    if (ca.null_count != 0 && validity != nullptr) {
      if (offset % 8 == 0) {
        v.null_mask = validity + offset / 8;
      } else {
        auto mask = br.allocate(MemoryType::HOST, mask_bytes(rows));
        if (mask->size() > 0) std::memset(mask->data(), 0, mask->size());
        detail::copy_bits(reinterpret_cast<std::uint8_t*>(mask->data()), 0, validity, offset, rows);
        v.null_mask = reinterpret_cast<const std::uint8_t*>(mask->data());
        imp.copies_.push_back(std::move(mask));
      }
    }
    if (type == TypeId::BOOL8) {
      // Arrow packs booleans into bits; spillway keeps one byte per row.
      auto data = br.allocate(MemoryType::HOST, rows);
      const auto* bits = static_cast<const std::uint8_t*>(ca.buffers[1]);
      auto* out = reinterpret_cast<std::uint8_t*>(data->data());
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t b = offset + r;
        out[r] = static_cast<std::uint8_t>((bits[b / 8] >> (b % 8)) & 1U);
      }
      v.data = data->data();
      imp.copies_.push_back(std::move(data));
    } else if (strings != Strings::utf8) {
      copy_to_utf8(ca, strings, offset, rows, name, ci, br, v, imp.copies_);
    } else if (type == TypeId::STRING) {
      const auto* off = static_cast<const std::int32_t*>(ca.buffers[1]) + offset;
      const auto* chars = static_cast<const char*>(ca.buffers[2]);
      if (off[0] < 0) bad_column(name, ci, "negative string offset");
      for (std::size_t r = 0; r < rows; ++r) {
        if (off[r + 1] < off[r])
          bad_column(name, ci, "string offsets decrease at row " + std::to_string(r));
      }
      if (off[0] == 0) {
        v.offsets = off;
        v.data = chars;
      } else {
        // A slice: rebase the offsets (the characters stay where they are).
        auto rebased = br.allocate(MemoryType::HOST, (rows + 1) * sizeof(std::int32_t));
        auto* o = reinterpret_cast<std::int32_t*>(rebased->data());
        for (std::size_t r = 0; r <= rows; ++r) o[r] = off[r] - off[0];
        v.offsets = o;
        v.data = chars + off[0];
        imp.copies_.push_back(std::move(rebased));
      }
    } else {
      v.data = static_cast<const std::byte*>(ca.buffers[1]) + offset * size_of(type);
    }
    imp.view_.columns.push_back(v);
    imp.view_.names.push_back(name);
  }
  return imp;
}

// ---- export ------------------------------------------------------------------------------------

namespace {

struct ExportedColumn {
  std::vector<std::uint8_t> validity;
  std::vector<std::uint8_t> data;
  std::vector<std::int32_t> offsets;
  std::vector<const void*> buffers;
};

struct ExportedBatch {
  std::vector<ArrowArray> children;
  std::vector<ArrowArray*> child_ptrs;
  std::vector<const void*> buffers{nullptr};
};

struct ExportedSchema {
  std::string format;
  std::string name;
  std::vector<ArrowSchema> children;
  std::vector<ArrowSchema*> child_ptrs;
};

void release_column(ArrowArray* a) {
  delete static_cast<ExportedColumn*>(a->private_data);
  a->release = nullptr;
}

void release_batch(ArrowArray* a) {
  for (std::int64_t i = 0; i < a->n_children; ++i) {
    if (a->children[i]->release != nullptr) a->children[i]->release(a->children[i]);
  }
  delete static_cast<ExportedBatch*>(a->private_data);
  a->release = nullptr;
}

void release_schema(ArrowSchema* s) {
  for (std::int64_t i = 0; i < s->n_children; ++i) {
    if (s->children[i]->release != nullptr) s->children[i]->release(s->children[i]);
  }
  delete static_cast<ExportedSchema*>(s->private_data);
  s->release = nullptr;
}

void fill_schema(ArrowSchema* s, ExportedSchema* d, std::int64_t flags) {
  s->format = d->format.c_str();
  s->name = d->name.c_str();
  s->metadata = nullptr;
  s->flags = flags;
  s->n_children = static_cast<std::int64_t>(d->children.size());
  s->children = d->child_ptrs.empty() ? nullptr : d->child_ptrs.data();
  s->dictionary = nullptr;
  s->release = release_schema;
  s->private_data = d;
}

}  // namespace

void export_arrow(const TableView& table, ArrowSchema* schema, ArrowArray* array) {
  SPILLWAY_EXPECTS(schema != nullptr && array != nullptr, "export_arrow: null output structs");
  const std::size_t ncols = table.num_columns();
  const std::size_t rows = table.num_rows();
  auto batch = std::make_unique<ExportedBatch>();
  auto top = std::make_unique<ExportedSchema>();
  top->format = "+s";
  batch->children.resize(ncols);
  top->children.resize(ncols);
  for (std::size_t c = 0; c < ncols; ++c) {
    const ColumnView& col = table.columns[c];
    auto d = std::make_unique<ExportedColumn>();
    std::int64_t nulls = 0;
    if (col.nullable()) {
      d->validity.assign(mask_bytes(rows), 0);
      detail::copy_bits(d->validity.data(), 0, col.null_mask, 0, rows);
      for (std::size_t r = 0; r < rows; ++r) nulls += col.is_valid(r) ? 0 : 1;
    }
    d->buffers.push_back(d->validity.empty() ? nullptr : d->validity.data());
    if (col.type == TypeId::BOOL8) {
      d->data.assign(mask_bytes(rows), 0);
      for (std::size_t r = 0; r < rows; ++r) {
        if (col.value<std::uint8_t>(r) != 0)
          d->data[r / 8] |= static_cast<std::uint8_t>(1U << (r % 8));
      }
      d->buffers.push_back(d->data.data());
    } else if (col.type == TypeId::STRING) {
      d->offsets.assign(col.offsets, col.offsets + rows + 1);
      if (rows == 0) d->offsets.assign(1, 0);
      const std::size_t n = col.data_bytes();
      d->data.resize(n);
      if (n > 0) std::memcpy(d->data.data(), col.data, n);
      d->buffers.push_back(d->offsets.data());
      d->buffers.push_back(d->data.data());
    } else {
      const std::size_t n = rows * size_of(col.type);
      d->data.resize(n);
      if (n > 0) std::memcpy(d->data.data(), col.data, n);
      d->buffers.push_back(d->data.data());
    }
    ArrowArray& ca = batch->children[c];
    ca.length = static_cast<std::int64_t>(rows);
    ca.null_count = nulls;
    ca.offset = 0;
    ca.n_buffers = static_cast<std::int64_t>(d->buffers.size());
    ca.n_children = 0;
    ca.buffers = d->buffers.data();
    ca.children = nullptr;
    ca.dictionary = nullptr;
    ca.release = release_column;
    ca.private_data = d.release();

    auto cs = new ExportedSchema();  // owned by the child schema's release
    cs->format = arrow_format(col.type);
    cs->name = c < table.names.size() ? table.names[c] : "";
    // Nullable, as Arrow fields are by default (whether or not this table has nulls).
    fill_schema(&top->children[c], cs, ARROW_FLAG_NULLABLE);
  }
  for (auto& ch : batch->children) batch->child_ptrs.push_back(&ch);
  for (auto& ch : top->children) top->child_ptrs.push_back(&ch);
  array->length = static_cast<std::int64_t>(rows);
  array->null_count = 0;
  array->offset = 0;
  array->n_buffers = 1;
  array->n_children = static_cast<std::int64_t>(ncols);
  array->buffers = batch->buffers.data();
  array->children = batch->child_ptrs.empty() ? nullptr : batch->child_ptrs.data();
  array->dictionary = nullptr;
  array->release = release_batch;
  array->private_data = batch.release();
  fill_schema(schema, top.release(), 0);
}

}  // namespace spillway
