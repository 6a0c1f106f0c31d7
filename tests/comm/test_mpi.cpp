// The conformance suite on the MPI communicator: run under mpirun (ctest runs -np 2, 3 and 4);
// every rank runs every case, and the exit code is non-zero if any rank failed.
#include "comm/conformance.hpp"
#include "mpi_test_main.hpp"

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
  static const auto cases = test::conformance_cases();
  return test::run_mpi_tests(argc, argv, [](Communicator& comm, BufferResource& br) {
    for (const auto& c : cases) {
      ::testing::RegisterTest(
          "MpiConformance", c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [&c, &comm, &br]() -> ::testing::Test* { return new MpiCase(c, comm, br); });
    }
  });
}
