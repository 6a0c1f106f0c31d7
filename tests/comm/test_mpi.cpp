// The conformance suite on the MPI communicator: run under mpirun (ctest runs -np 2, 3 and 4);
// every rank runs every case, and the exit code is non-zero if any rank failed.
#include <spillway/comm/mpi.hpp>
#include <spillway/core/cuda.hpp>

#include "comm/conformance.hpp"

#include <mpi.h>

using namespace spillway;

namespace {

class MpiCase : public ::testing::Test {
 public:
  MpiCase(const test::CommCase& c, Communicator& comm, BufferResource& br)
      : case_{c}, comm_{comm}, br_{br} {}
  void TestBody() override {
    case_.body(comm_, br_);
    comm_.barrier();
  }

 private:
  const test::CommCase& case_;
  Communicator& comm_;
  BufferResource& br_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mpi::init(&argc, &argv);
  int failed = 0;
  {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (const int gpus = cuda::device_count(); gpus > 0) cuda::set_device(rank % gpus);
    test::TempDir dir;
    BufferResource br(test::small_config(dir.path()));
    auto comm = make_mpi_communicator(br);
    comm->set_timeout(std::chrono::seconds(60));
    static const auto cases = test::conformance_cases();
    for (const auto& c : cases) {
      ::testing::RegisterTest("MpiConformance", c.name.c_str(), nullptr, nullptr, __FILE__,
                              __LINE__,
                              [&]() -> ::testing::Test* { return new MpiCase(c, *comm, br); });
    }
    int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  mpi::finalize();
  return failed;
}
