// spillway.Shuffler: the out-of-core all-to-all shuffle of host tables, partitioned by hashing
// key columns. Every blocking call releases the GIL.
#include "bindings.hpp"
#include "table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/gpu.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/partition.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <unordered_map>
#include <vector>

namespace spillway::python {

namespace {

/// A Shuffler with the resource it packs and unpacks with.
class PyShuffler {
 public:
  PyShuffler(Communicator& comm, OpID op, PartID partitions, BufferResource& br)
      : br_{br}, shuffler_{comm, op, partitions, br}, total_{partitions} {}

  void insert(const Table& table, const std::vector<std::size_t>& keys) {
    for (std::size_t k : keys) {
      SPILLWAY_EXPECTS(k < table.num_columns(),
                       "key column " + std::to_string(k) + " of a table with " +
                           std::to_string(table.num_columns()) + " columns");
    }
    const bool device = table.num_columns() > 0 && !on_host(table);
    SPILLWAY_EXPECTS(!device || table.column(0).data().mem_type() == MemoryType::DEVICE,
                     "insert: a table neither in host memory nor on the GPU (spilled?)");
    nb::gil_scoped_release nogil;
    // A table on the GPU (from DLPack arrays) is partitioned there.
    auto packed = device ? gpu::partition_and_pack(table.view(), keys, total_, br_, br_.stream())
                         : partition_and_pack(table.view(), keys, total_, br_);
    std::unordered_map<PartID, PackedData> chunks;
    for (PartID p = 0; p < total_; ++p) {
      if (packed[p].payload != nullptr && packed[p].payload->size() > 0) {
        chunks.emplace(p, std::move(packed[p]));
      }
    }
    shuffler_.insert(std::move(chunks));
  }

  void insert_finished() {
    nb::gil_scoped_release nogil;
    shuffler_.insert_finished();
  }

  PartID wait_any(double seconds) {
    nb::gil_scoped_release nogil;
    return shuffler_.wait_any(std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
  }

  std::optional<PartID> poll(double seconds) {
    nb::gil_scoped_release nogil;
    return shuffler_.try_wait_any(
        std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
  }

  Table extract(PartID pid, bool device) {
    SPILLWAY_EXPECTS(!device || br_.is_live(MemoryType::DEVICE),
                     "extract(device=True) with a BufferResource that has no DEVICE tier");
    nb::gil_scoped_release nogil;
    if (!device) return unpack_and_concat(shuffler_.extract(pid), br_);
    Table t = gpu::unpack_and_concat(shuffler_.extract(pid), br_, br_.stream());
    br_.stream().synchronize();
    return t;
  }

  [[nodiscard]] bool finished() const { return shuffler_.finished(); }
  [[nodiscard]] std::vector<PartID> local_partitions() const {
    return shuffler_.local_partitions();
  }

 private:
  BufferResource& br_;
  Shuffler shuffler_;
  PartID total_;
};

}  // namespace

void bind_shuffle(nb::module_& m) {
  nb::class_<PyShuffler>(m, "Shuffler",
                         "One rank's part of a shuffle: insert tables, then take the partitions "
                         "this rank owns as they complete.")
      .def(nb::init<Communicator&, OpID, PartID, BufferResource&>(), nb::arg("comm"),
           nb::arg("op_id"), nb::arg("partitions"), nb::arg("br"), nb::keep_alive<1, 2>(),
           nb::keep_alive<1, 5>())
      .def("insert", &PyShuffler::insert, nb::arg("table"), nb::arg("keys"),
           "Hash-partitions `table` on the key columns (indices) and sends each part to its "
           "owner.")
      .def("insert_finished", &PyShuffler::insert_finished, "No more inserts from this rank.")
      .def("wait_any", &PyShuffler::wait_any, nb::arg("timeout"),
           "A local partition that has completed, within `timeout` seconds; raises CommError "
           "after it.")
      .def("poll", &PyShuffler::poll, nb::arg("timeout"),
           "A local partition that has completed within `timeout` seconds, or None.")
      .def("extract", &PyShuffler::extract, nb::arg("partition"), nb::arg("device") = false,
           nb::keep_alive<0, 1>(),
           "A completed partition as one table: in host memory, or with device=True on the GPU "
           "(to take its columns through DLPack).")
      .def_prop_ro("finished", &PyShuffler::finished)
      .def_prop_ro("local_partitions", &PyShuffler::local_partitions);
}

}  // namespace spillway::python
