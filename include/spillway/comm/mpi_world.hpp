#pragma once
/// @file mpi_world.hpp
/// The MPI communicator of all ranks, for code that makes MPI calls of its own (it needs
/// <mpi.h>, so only in builds with MPI): MPI_COMM_WORLD under mpirun or srun; under
/// spillway-run, where every rank starts as an MPI singleton, the communicator that mpi::init
/// joined them into, ordered by SPILLWAY_RUN_RANK.

#include <mpi.h>

namespace spillway::mpi {
MPI_Comm world() noexcept;
}  // namespace spillway::mpi
