#pragma once
// Private to the MPI communicator: how ranks that spillway-run started as MPI singletons
// join into one communicator.

#include <spillway/comm/bootstrap.hpp>

#include <mpi.h>

namespace spillway::mpi::detail {

/// Joins this singleton with the launch's other ranks into one communicator, ordered by rank.
/// @throws spillway::comm_error when a peer does not come within the timeout or exited
MPI_Comm join(const LaunchInfo& launch);

}  // namespace spillway::mpi::detail
