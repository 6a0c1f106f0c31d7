// The MPI communicator in a build without MPI: each entry point says so.
#include <spillway/comm/mpi.hpp>
#include <spillway/core/error.hpp>

#include <cstdlib>

namespace spillway {

namespace mpi {
bool is_compiled() noexcept {
  return false;
}
bool init(int* /*argc*/, char*** /*argv*/) {
  SPILLWAY_FAIL("spillway was built without MPI (install libopenmpi-dev and reconfigure)",
                logic_error);
}
void finalize() noexcept {}
int world_rank() noexcept {
  return 0;
}
void abort(int code) noexcept {
  std::exit(code);
}
}  // namespace mpi

std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& /*br*/) {
  SPILLWAY_FAIL("spillway was built without MPI (install libopenmpi-dev and reconfigure)",
                logic_error);
}
std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br, const void* /*comm*/) {
  return make_mpi_communicator(br);
}

}  // namespace spillway
