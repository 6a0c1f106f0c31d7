// A rank of an MPI job killed with SIGKILL: the surviving ranks get a comm_error from their
// receive within the communicator's timeout, instead of hanging. Run under mpirun with
// orte_enable_recovery=1 and orte_abort_on_non_zero_status=0 (else OpenMPI ends the whole job
// itself); ctest checks for one "PASS" line per surviving rank and no "FAIL".
#include <spillway/comm/mpi.hpp>
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

using namespace spillway;

int main(int argc, char** argv) {
  mpi::init(&argc, &argv);
  auto cfg = BufferResourceConfig::from_options();
  cfg.use_gpu = false;
  BufferResource br(cfg);
  auto comm = make_mpi_communicator(br);
  const auto timeout = std::chrono::seconds(3);
  comm->set_timeout(timeout);
  comm->barrier();
  if (comm->rank() == 1) std::raise(SIGKILL);  // dies without a word to anyone
  const auto t0 = std::chrono::steady_clock::now();
  const char* verdict = "FAIL: no error";
  try {
    auto f = comm->recv(1, Tag{1, 0}, br.allocate(MemoryType::HOST, 1 << 20));
    comm->wait(*f);
  } catch (const comm_error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    verdict = s < 3.0 + 5.0 ? "PASS: comm_error within the timeout" : "FAIL: the error came late";
    std::printf("rank %d: %s (%.2f s): %s\n", comm->rank(), verdict, s, e.what());
  }
  if (verdict[0] == 'F') std::printf("rank %d: %s\n", comm->rank(), verdict);
  std::fflush(stdout);
  std::_Exit(0);  // not MPI_Finalize: it would wait for the dead rank
}
