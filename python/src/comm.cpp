// Communicators: N local ranks (threads of this process, driven from Python threads), this
// process's rank of an MPI job, and ranks over transfer engines (processes under spillway-run,
// or threads meeting in a directory). Blocking calls release the GIL.
#include "bindings.hpp"

#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/local.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/transfer.hpp>
#include <spillway/core/error.hpp>

#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
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
  m.def(
      "transfer_communicator",
      [](BufferResource& br, int rank, int nranks, const std::string& directory,
         const std::string& token, const std::string& backend, const std::string& provider,
         const std::string& address) {
        LaunchInfo launch;
        if (nranks < 0) {  // this process's rank under spillway-run
          auto here = bootstrap::from_environment();
          SPILLWAY_EXPECTS(here.has_value(),
                           "spillway.comm.transfer() without ranks runs under spillway-run "
                           "(no SPILLWAY_RUN_* variables here)");
          launch = *here;
        } else {
          SPILLWAY_EXPECTS(nranks >= 1 && rank >= 0 && rank < nranks,
                           "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
          launch = LaunchInfo{rank, nranks, -1, directory, token};
        }
        return make_transfer_communicator(br, launch, {backend, provider, address, {}});
      },
      nb::arg("br"), nb::arg("rank") = 0, nb::arg("nranks") = -1, nb::arg("directory") = "",
      nb::arg("token") = "", nb::arg("backend") = "", nb::arg("provider") = "",
      nb::arg("address") = "", nb::keep_alive<0, 1>(), nb::call_guard<nb::gil_scoped_release>(),
      "A rank over a transfer engine of its own; collective over the ranks, which meet in "
      "`directory` (nranks < 0: this process's rank under spillway-run).");
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
