#pragma once
// Tables between Python and spillway (internal to the extension): Arrow capsules in and out,
// and the Arrow C stream interface's struct, which spillway's C++ API does not need.

#include "bindings.hpp"

#include <spillway/memory/buffer_resource.hpp>
#include <spillway/table/arrow.hpp>
#include <spillway/table/table.hpp>

#include <nanobind/stl/optional.h>

#include <optional>

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
extern "C" {
// Verbatim layout from the Arrow C stream interface specification.
struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};
}
#endif

// Table holds a std::vector of move-only columns, which std::is_copy_constructible cannot
// tell: say so, so that nanobind moves Tables instead of copying them.
namespace nanobind::detail {
template <>
struct is_copy_constructible<spillway::Table> : std::false_type {};
}  // namespace nanobind::detail

namespace spillway::python {

/// Makes the Python object of a Table made in C++ (not returned through a binding that says
/// keep_alive) keep its buffer resource's Python object alive.
inline void keep_resource_alive(nb::handle table, BufferResource& br) {
  const nb::object owner = nb::find(&br);
  if (!owner.is_valid()) return;  // a resource Python does not know: nothing to keep
#if NB_VERSION_MAJOR >= 3
  nb::keep_alive_obj(table, owner);
#else
  nb::detail::keep_alive(table.ptr(), owner.ptr());
#endif
}

/// A spillway copy of the record batch in two Arrow capsules (consumed), its buffers on tier
/// `to` (HOST, PINNED_HOST, or DEVICE: straight to the GPU).
/// @throws spillway::logic_error for capsules of another kind or an unsupported type
Table import_capsules(nb::handle schema_capsule, nb::handle array_capsule, BufferResource& br,
                      MemoryType to = MemoryType::HOST);
/// Whether every buffer of the table is in host memory (HOST or PINNED_HOST).
bool on_host(const Table& table);
/// The table (in host memory) as (schema capsule, array capsule), each released with its capsule.
nb::tuple export_capsules(const Table& table);

/// Reads an Arrow stream capsule (consumed) batch by batch.
class ArrowStreamReader {
 public:
  explicit ArrowStreamReader(nb::handle stream_capsule);
  ~ArrowStreamReader();
  ArrowStreamReader(const ArrowStreamReader&) = delete;
  ArrowStreamReader& operator=(const ArrowStreamReader&) = delete;
  /// The next batches, concatenated into one table on `to` while their rows fit in `rows`
  /// (at least one batch; 0: one), or nullopt at the end.
  /// @throws spillway::io_error for the producer's error
  std::optional<Table> next(BufferResource& br, MemoryType to = MemoryType::HOST,
                            std::size_t rows = 0);
  /// The stream's schema as an "arrow_schema" capsule.
  nb::object schema();

 private:
  void check(int rc, const char* what);
  std::optional<ArrowImport> next_import(BufferResource& br);
  ArrowArrayStream stream_{};
  std::optional<ArrowImport> pending_;  // read, and the first of the next table
};

}  // namespace spillway::python
