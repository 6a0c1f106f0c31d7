#pragma once
/// @file arrow.hpp
/// Tables in and out through the Arrow C Data Interface (the ArrowSchema/ArrowArray structs of
/// the Arrow specification; no Arrow library needed), so that tables from pyarrow, Polars,
/// DuckDB or cuDF come in without copies where the layouts agree.

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/column_view.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
// Verbatim layout from the Arrow C data interface specification.
extern "C" {
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};
}
#endif

namespace spillway {

/// A table imported from Arrow. The view points into the Arrow buffers where their layout is
/// spillway's (fixed-width values, int32-offset strings, validity bitmaps at offset 0); bool
/// (bit-packed in Arrow) and sliced columns are copied into HOST buffers. Owns the imported
/// ArrowArray and ArrowSchema and releases them when destroyed. Move-only.
class ArrowImport {
 public:
  ~ArrowImport();
  ArrowImport(const ArrowImport&) = delete;
  ArrowImport& operator=(const ArrowImport&) = delete;
  ArrowImport(ArrowImport&&) noexcept;
  ArrowImport& operator=(ArrowImport&&) = delete;

  [[nodiscard]] const TableView& view() const noexcept { return view_; }

 private:
  friend ArrowImport import_arrow(ArrowSchema*, ArrowArray*, BufferResource&);
  ArrowImport() = default;
  ArrowSchema schema_{};
  ArrowArray array_{};
  TableView view_;
  std::vector<std::unique_ptr<Buffer>> copies_;
};

/// Imports a record batch: `schema` of format "+s" (a struct) and its `array`. Takes ownership
/// of both (they are moved out and marked released, as the specification says of a consumer).
/// Supported child formats: c s i l C S I L f g b u (int8..uint64, float32/64, bool, utf8).
/// @throws spillway::logic_error naming the column and format of an unsupported type, and for
///         a malformed array (wrong buffer counts, negative lengths); the structs are released.
ArrowImport import_arrow(ArrowSchema* schema, ArrowArray* array, BufferResource& br);

/// Exports a host table as a record batch ("+s"): the buffers are copied into memory the
/// exported array owns (bool8 columns are bit-packed), names and nullability kept. The caller
/// (consumer) must call the release callbacks.
void export_arrow(const TableView& table, ArrowSchema* schema, ArrowArray* array);

}  // namespace spillway
