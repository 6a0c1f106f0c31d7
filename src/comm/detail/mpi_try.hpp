#pragma once
// SPILLWAY_MPI_TRY (internal): an MPI call whose failure becomes a spillway::comm_error that
// names the rank, the call, MPI's own message and the file:line, as SPILLWAY_CUDA_TRY does for
// CUDA. MPI must return its errors (MPI_ERRORS_RETURN on the communicator) for it to see them.

#include <spillway/core/error.hpp>

#include <mpi.h>

#include <array>
#include <string>

namespace spillway::detail {

/// "[rank R] WHAT failed: MPI's message".
inline std::string mpi_error_text(int rc, int rank, const std::string& what) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  MPI_Error_string(rc, text.data(), &len);
  return "[rank " + std::to_string(rank) + "] " + what +
         " failed: " + std::string(text.data(), static_cast<std::size_t>(len));
}

}  // namespace spillway::detail

/// SPILLWAY_MPI_TRY(MPI_Isend(...), rank, "MPI_Isend"): throws spillway::comm_error unless the
/// call returns MPI_SUCCESS.
#define SPILLWAY_MPI_TRY(call, rank, what)                                                \
  do {                                                                                    \
    const int spillway_mpi_rc_ = (call);                                                  \
    if (spillway_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                   \
      SPILLWAY_FAIL(::spillway::detail::mpi_error_text(spillway_mpi_rc_, (rank), (what)), \
                    ::spillway::comm_error);                                              \
    }                                                                                     \
  } while (0)
