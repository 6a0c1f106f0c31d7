// The MPI world spillway uses: MPI_COMM_WORLD under mpirun, or the communicator the ranks
// that spillway-run started as singletons join into (mpi_join.cpp).
#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/mpi_world.hpp>
#include <spillway/core/error.hpp>

#include "comm/detail/mpi_join.hpp"

#include <mpi.h>

namespace spillway {

namespace mpi {

namespace {

MPI_Comm world_comm = MPI_COMM_WORLD;

}  // namespace

bool is_compiled() noexcept {
  return true;
}

bool init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return false;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    SPILLWAY_FAIL("MPI_Init_thread failed", comm_error);
  }
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (const auto launch = bootstrap::from_environment();
      launch && size == 1 && launch->nranks > 1) {
    world_comm = detail::join(*launch);
  }
  return true;
}

void finalize() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) return;
  if (world_comm != MPI_COMM_WORLD) {  // (MPI_Comm_disconnect waits forever on ompi-server)
    MPI_Comm_free(&world_comm);
    world_comm = MPI_COMM_WORLD;
  }
  MPI_Finalize();
}

MPI_Comm world() noexcept {
  return world_comm;
}

int world_rank() noexcept {
  int r = 0;
  MPI_Comm_rank(world_comm, &r);
  return r;
}

void abort(int code) noexcept {
  MPI_Abort(world_comm, code);
  std::_Exit(code);
}

}  // namespace mpi

}  // namespace spillway
