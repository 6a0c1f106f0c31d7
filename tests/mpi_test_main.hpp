#pragma once
// The main of a test binary whose ranks are processes: under mpirun (or spillway-run) one MPI
// communicator per rank, or with SPILLWAY_TEST_COMM=transfer under spillway-run one transfer
// communicator per rank (no MPI). Each rank gets its communicator and a BufferResource (rank r
// on GPU r % count), handed to `setup` to register or bind the tests; the exit code is
// non-zero if any rank failed.

#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/collectives.hpp>
#include <spillway/comm/mpi.hpp>
#include <spillway/comm/transfer.hpp>
#include <spillway/core/cuda.hpp>

#include "common.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

namespace spillway::test {

inline int run_mpi_tests(int argc, char** argv,
                         const std::function<void(Communicator&, BufferResource&)>& setup) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* kind = std::getenv("SPILLWAY_TEST_COMM");
  const bool transfer = kind != nullptr && std::string(kind) == "transfer";
  std::optional<LaunchInfo> launch;
  if (transfer) {
    launch = bootstrap::from_environment();
    if (!launch) {
      std::fprintf(stderr, "SPILLWAY_TEST_COMM=transfer: start this test with spillway-run\n");
      return 2;
    }
  } else {
    mpi::init(&argc, &argv);
  }
  std::int64_t failed = 0;
  {
    const int rank = transfer ? launch->rank : mpi::world_rank();
    if (const int dev = bootstrap::device_for_rank(rank); dev >= 0) cuda::set_device(dev);
    TempDir dir;
    BufferResource br(small_config(dir.path()));
    auto comm = transfer ? make_transfer_communicator(br, *launch) : make_mpi_communicator(br);
    comm->set_timeout(std::chrono::seconds(60));
    setup(*comm, br);
    const std::int64_t local = RUN_ALL_TESTS();
    constexpr OpID kVerdict = 65000;  // an op id no test uses
    failed = allreduce(*comm, kVerdict, std::span(&local, 1), ReduceOp::max).at(0);
  }
  if (!transfer) mpi::finalize();
  return static_cast<int>(failed);
}

}  // namespace spillway::test
