// Communicators: N local ranks (threads of this process, driven from Python threads) and this
// process's rank of an MPI job. Blocking calls release the GIL.
#include "bindings.hpp"

#include <spillway/comm/local.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/core/error.hpp>

#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace spillway::python {

void bind_comm(nb::module_& m) {
  nb::class_<Communicator>(m, "Communicator",
                           "One rank's view of a group of ranks (local threads or MPI).")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("nranks", &Communicator::nranks)
      .def_prop_ro("kind", [](const Communicator& c) { return std::string(c.kind()); })
      .def_prop_rw(
          "timeout", [](const Communicator& c) { return c.timeout().count() / 1000.0; },
          [](Communicator& c, double seconds) {
            SPILLWAY_EXPECTS(seconds >= 0.001, "a timeout of at least 0.001 s");
            c.set_timeout(std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
          },
          "Seconds a wait on a peer takes before it is a CommError.")
      .def(
          "barrier",
          [](Communicator& c) {
            nb::gil_scoped_release nogil;
            c.barrier();
          },
          "Waits until every rank has called it. Raises CommError on timeout or a gone peer.")
      .def(
          "leave",
          [](Communicator& c) {
            if (auto* local = dynamic_cast<LocalCommunicator*>(&c)) local->leave();
          },
          "Leaves the group (a rank that failed): the peers' waits on it fail instead of "
          "hanging. Local ranks only; an MPI rank that fails ends its process.");
  m.def(
      "local_communicators",
      [](int nranks) {
        auto comms = LocalCommunicator::create(nranks);
        std::vector<std::unique_ptr<Communicator>> out;
        for (auto& c : comms) out.push_back(std::move(c));
        return out;
      },
      nb::arg("nranks"), "The communicators of a group of `nranks` ranks as threads.");
  m.def("mpi_is_compiled", [] { return mpi::is_compiled(); });
  m.def(
      "mpi_finalize", [] { mpi::finalize(); },
      "MPI_Finalize, once every MPI communicator is gone (spillway.comm.mpi registers it to run "
      "at exit).");
  m.def(
      "mpi_communicator",
      [](BufferResource& br) {
        mpi::init(nullptr, nullptr);
        return make_mpi_communicator(br);
      },
      nb::arg("br"), nb::keep_alive<0, 1>(),
      "This process's rank of the MPI job (mpirun, srun or spillway-run); collective.");
  m.def(
      "mpi_communicator_of",
      [](BufferResource& br, std::uintptr_t address) {
        // (spillway.comm.mpi checks that it is an mpi4py communicator's MPI._addressof)
        mpi::init(nullptr, nullptr);
        return make_mpi_communicator(br, reinterpret_cast<const void*>(address));
      },
      nb::arg("br"), nb::arg("address"), nb::keep_alive<0, 1>(),
      "A rank of the MPI communicator whose handle is at `address`; collective over it.");
}

}  // namespace spillway::python
