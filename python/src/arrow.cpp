// Host tables in and out through the Arrow PyCapsule interface: `__arrow_c_array__` (a
// schema and an array capsule) and `__arrow_c_stream__` (a stream capsule), as pyarrow,
// Polars and DuckDB give and take them.
#include "bindings.hpp"
#include "table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/arrow.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/table.hpp>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace spillway::python {

namespace {

template <typename T>
T* capsule_pointer(nb::handle capsule, const char* name) {
  auto* p = static_cast<T*>(PyCapsule_GetPointer(capsule.ptr(), name));
  if (p == nullptr) {
    PyErr_Clear();
    SPILLWAY_FAIL(std::string("expected a PyCapsule named '") + name + "'");
  }
  return p;
}

template <typename T>
void release_and_free(PyObject* capsule, const char* name) {
  auto* p = static_cast<T*>(PyCapsule_GetPointer(capsule, name));
  if (p == nullptr) {
    PyErr_Clear();
    return;
  }
  if (p->release != nullptr) p->release(p);
  std::free(p);
}

/// spillway's own copy of imported batches, concatenated, on tier `to`, made without the GIL
/// (the Arrow buffers stay alive in `imported`).
Table copied(std::span<const ArrowImport> imported, BufferResource& br, MemoryType to) {
  SPILLWAY_EXPECTS(to != MemoryType::DISK,
                   "an Arrow batch goes into DEVICE, PINNED_HOST or "
                   "HOST memory, not DISK");
  std::vector<TableView> views;
  for (const ArrowImport& i : imported) views.push_back(i.view());
  nb::gil_scoped_release nogil;
  return concat(views, br, to, br.stream());
}

}  // namespace

Table import_capsules(nb::handle schema_capsule, nb::handle array_capsule, BufferResource& br,
                      MemoryType to) {
  auto* schema = capsule_pointer<ArrowSchema>(schema_capsule, "arrow_schema");
  auto* array = capsule_pointer<ArrowArray>(array_capsule, "arrow_array");
  SPILLWAY_EXPECTS(schema->release != nullptr && array->release != nullptr,
                   "an Arrow capsule that was consumed already");
  ArrowImport imported = import_arrow(schema, array, br);  // takes ownership of both
  return copied(std::span(&imported, 1), br, to);
}

bool on_host(const Table& table) {
  const auto host = [](const Buffer* b) {
    return b == nullptr || b->mem_type() == MemoryType::HOST ||
           b->mem_type() == MemoryType::PINNED_HOST;
  };
  for (std::size_t c = 0; c < table.num_columns(); ++c) {
    const Column& col = table.column(c);
    if (!host(&col.data()) || !host(col.offsets()) || !host(col.null_mask())) return false;
  }
  return true;
}

nb::tuple export_capsules(const Table& table) {
  auto* schema = static_cast<ArrowSchema*>(std::calloc(1, sizeof(ArrowSchema)));
  auto* array = static_cast<ArrowArray*>(std::calloc(1, sizeof(ArrowArray)));
  if (schema == nullptr || array == nullptr) {
    std::free(schema);
    std::free(array);
    throw std::bad_alloc();
  }
  try {
    export_arrow(table.view(), schema, array);
  } catch (...) {
    std::free(schema);
    std::free(array);
    throw;
  }
  nb::object s = nb::steal(PyCapsule_New(schema, "arrow_schema", [](PyObject* c) {
    release_and_free<ArrowSchema>(c, "arrow_schema");
  }));
  nb::object a = nb::steal(PyCapsule_New(
      array, "arrow_array", [](PyObject* c) { release_and_free<ArrowArray>(c, "arrow_array"); }));
  return nb::make_tuple(s, a);
}

ArrowStreamReader::ArrowStreamReader(nb::handle stream_capsule) {
  auto* stream = capsule_pointer<ArrowArrayStream>(stream_capsule, "arrow_array_stream");
  SPILLWAY_EXPECTS(stream->release != nullptr, "an Arrow stream that was consumed already");
  stream_ = *stream;  // moved out, as a consumer does
  stream->release = nullptr;
}

ArrowStreamReader::~ArrowStreamReader() {
  if (stream_.release != nullptr) stream_.release(&stream_);
}

void ArrowStreamReader::check(int rc, const char* what) {
  if (rc == 0) return;
  const char* why = stream_.get_last_error != nullptr ? stream_.get_last_error(&stream_) : nullptr;
  SPILLWAY_FAIL(std::string("Arrow stream ") + what + " failed (" + std::to_string(rc) +
                    "): " + (why != nullptr ? why : "no message"),
                io_error);
}

std::optional<ArrowImport> ArrowStreamReader::next_import(BufferResource& br) {
  if (pending_) {
    std::optional<ArrowImport> out(std::move(pending_));
    pending_.reset();
    return out;
  }
  ArrowArray array{};
  {
    nb::gil_scoped_release nogil;  // the producer may read a file
    check(stream_.get_next(&stream_, &array), "get_next");
  }
  if (array.release == nullptr) return std::nullopt;  // the end
  ArrowSchema schema{};  // each batch's own (a stream may give its schema again and again)
  if (const int rc = stream_.get_schema(&stream_, &schema); rc != 0) {
    array.release(&array);
    check(rc, "get_schema");
  }
  return import_arrow(&schema, &array, br);
}

std::optional<Table> ArrowStreamReader::next(BufferResource& br, MemoryType to, std::size_t rows) {
  std::vector<ArrowImport> batches;
  std::size_t have = 0;
  while (auto batch = next_import(br)) {
    const std::size_t n = batch->view().num_rows();
    if (!batches.empty() && have + n > rows) {  // the next table's first
      pending_.emplace(std::move(*batch));
      break;
    }
    have += n;
    batches.push_back(std::move(*batch));
  }
  if (batches.empty()) return std::nullopt;
  return copied(batches, br, to);
}

nb::object ArrowStreamReader::schema() {
  auto* schema = static_cast<ArrowSchema*>(std::calloc(1, sizeof(ArrowSchema)));
  if (schema == nullptr) throw std::bad_alloc();
  if (const int rc = stream_.get_schema(&stream_, schema); rc != 0) {
    std::free(schema);
    check(rc, "get_schema");
  }
  return nb::steal(PyCapsule_New(schema, "arrow_schema", [](PyObject* c) {
    release_and_free<ArrowSchema>(c, "arrow_schema");
  }));
}

void bind_arrow(nb::module_& m) {
  nb::class_<Table>(m, "Table",
                    "A table of spillway's (int8..uint64, float32/64, bool, utf8 columns with "
                    "validity), in and out through the Arrow PyCapsule interface (a table on "
                    "the GPU comes out through a host copy) and, fixed-width columns, DLPack.")
      .def_prop_ro("num_rows", &Table::num_rows)
      .def_prop_ro("num_columns", &Table::num_columns)
      .def_prop_ro("column_names", [](const Table& t) { return t.names(); })
      .def_prop_ro(
          "on_gpu",
          [](const Table& t) {
            return t.num_columns() > 0 && t.column(0).data().mem_type() == MemoryType::DEVICE;
          },
          "Whether its columns are in GPU memory (from DLPack arrays on the GPU, or "
          "Shuffler.extract(device=True)).")
      .def(
          "copy",
          [](const Table& t, const std::string& tier) {
            const MemoryType to = parse_memory_type(tier);
            SPILLWAY_EXPECTS(to == MemoryType::HOST || to == MemoryType::DEVICE,
                             "Table.copy: into 'HOST' or 'DEVICE', not '" + tier + "'");
            SPILLWAY_EXPECTS(t.num_columns() > 0, "Table.copy: a table without columns");
            BufferResource& br = t.column(0).data().resource();
            Table c = [&] {
              nb::gil_scoped_release nogil;
              Table copied = copy_table(t, to, br, br.stream());
              br.stream().synchronize();
              return copied;
            }();
            nb::object out = nb::cast(std::move(c), nb::rv_policy::move);
            keep_resource_alive(out, br);
            return out;
          },
          nb::arg("tier"),
          "A copy of the table in 'DEVICE' (GPU) or 'HOST' memory of the same BufferResource.")
      .def(
          "__arrow_c_array__",
          [](const Table& t, nb::handle requested_schema) {
            SPILLWAY_EXPECTS(requested_schema.is_none(),
                             "__arrow_c_array__: a requested schema is not supported");
            if (on_host(t)) return export_capsules(t);
            // A table on the GPU (or spilled) comes out through a copy in host memory.
            BufferResource& br = t.column(0).data().resource();
            const Table host = [&] {
              nb::gil_scoped_release nogil;
              Table h = copy_table(t, MemoryType::HOST, br, br.stream());
              br.stream().synchronize();
              return h;
            }();
            return export_capsules(host);
          },
          nb::arg("requested_schema") = nb::none(),
          "The table as a record batch: (schema capsule, array capsule).");
  m.def(
      "table_from_capsules",
      [](nb::handle schema, nb::handle array, BufferResource& br, const std::string& tier) {
        return import_capsules(schema, array, br, parse_memory_type(tier));
      },
      nb::arg("schema"), nb::arg("array"), nb::arg("br"), nb::arg("tier") = "HOST",
      nb::keep_alive<0, 3>(),
      "A spillway Table copied from an Arrow record batch's capsules into `tier` ('HOST', "
      "'PINNED_HOST', or 'DEVICE': straight to the GPU, through pinned staging).");
  // Test hooks live in the private submodule _spillway.testing.
  nb::module_ testing = m.def_submodule("testing", "Hooks for spillway's own tests.");
  testing.def(
      "pack_round_trip",
      [](const Table& t, BufferResource& br) { return to_table(unpack(pack(t.view(), br))); },
      nb::arg("table"), nb::arg("br"), nb::keep_alive<0, 2>(),
      "The table packed and unpacked (the form in which the shuffle moves it).");
  nb::class_<ArrowStreamReader>(m, "ArrowStreamReader",
                                "Record batches, one at a time, from an Arrow stream capsule.")
      .def(nb::init<nb::handle>(), nb::arg("stream"))
      .def("schema", &ArrowStreamReader::schema, "The stream's schema, as a capsule.")
      .def(
          "next",
          [](ArrowStreamReader& r, BufferResource& br, const std::string& tier, std::size_t rows) {
            return r.next(br, parse_memory_type(tier), rows);
          },
          nb::arg("br"), nb::arg("tier") = "HOST", nb::arg("rows") = 0, nb::keep_alive<0, 2>(),
          "The next batch as a spillway Table on `tier` (as table_from_capsules), or None at "
          "the end; with `rows`, the next batches concatenated while they fit in that many "
          "rows (at least one): one table, one copy, from a stream of small batches.");
}

}  // namespace spillway::python
