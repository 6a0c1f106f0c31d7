#pragma once
// The main of a test binary run under mpirun: one MPI communicator and BufferResource per
// rank (rank r on GPU r % count), handed to `setup` to register or bind the tests; the exit
// code is non-zero if any rank failed.

#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/mpi_world.hpp>
#include <spillway/core/cuda.hpp>

#include "common.hpp"

#include <mpi.h>

#include <chrono>
#include <functional>

namespace spillway::test {

inline int run_mpi_tests(int argc, char** argv,
                         const std::function<void(Communicator&, BufferResource&)>& setup) {
  ::testing::InitGoogleTest(&argc, argv);
  mpi::init(&argc, &argv);
  int failed = 0;
  {
    int rank = 0;
    MPI_Comm_rank(mpi::world(), &rank);
    if (const int dev = bootstrap::device_for_rank(rank); dev >= 0) cuda::set_device(dev);
    TempDir dir;
    BufferResource br(small_config(dir.path()));
    auto comm = make_mpi_communicator(br);
    comm->set_timeout(std::chrono::seconds(60));
    setup(*comm, br);
    int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, mpi::world());
  }
  mpi::finalize();
  return failed;
}

}  // namespace spillway::test
