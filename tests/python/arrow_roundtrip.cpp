// A C entry point for tests/python/test_arrow.py: import a record batch from Arrow, pack and
// unpack it through spillway's wire format, export it back, and report its checksum.
#include <spillway/table/arrow.hpp>
#include <spillway/table/checksum.hpp>
#include <spillway/table/pack.hpp>

#include <cstdio>
#include <exception>

extern "C" int spillway_test_roundtrip(ArrowSchema* schema, ArrowArray* array,
                                       ArrowSchema* out_schema, ArrowArray* out_array,
                                       std::uint64_t* rows, std::uint64_t* sum, char* err,
                                       std::size_t errlen) {
  try {
    spillway::BufferResourceConfig cfg;
    cfg.use_gpu = false;
    cfg.io_threads = 1;
    spillway::BufferResource br(cfg);
    auto imported = spillway::import_arrow(schema, array, br);
    const auto before = spillway::checksum(imported.view(), 1);
    auto unpacked = spillway::unpack(spillway::pack(imported.view(), br));
    const auto after = spillway::checksum(unpacked.view(), 1);
    if (!(before == after)) {
      std::snprintf(err, errlen, "checksum changed through pack/unpack");
      return 2;
    }
    *rows = after.rows;
    *sum = after.sum;
    spillway::export_arrow(unpacked.view(), out_schema, out_array);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
    return 1;
  }
}
