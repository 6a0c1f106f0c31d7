#pragma once
/// @file mpi.hpp
/// One rank per process over MPI (OpenMPI; launched with mpirun or srun): how spillway runs
/// across nodes. Host buffers (HOST, PINNED_HOST) go through MPI directly. Device buffers are
/// staged through pinned host bounce buffers, pipelined: up to four 16 MiB pieces in flight,
/// the copy of one overlapping the transfer of another (no CUDA-aware MPI is assumed).
///
/// Wire protocol: a buffer of n bytes travels as ceil(n / 16 MiB) MPI messages (one if n is 0)
/// with the same tag, so both sides agree whatever the tiers. Small messages use their own tag
/// space. The communicator's MPI errors are returned, not fatal, and become comm_errors.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <memory>

namespace spillway {

namespace mpi {
/// Whether spillway was built with MPI.
bool is_compiled() noexcept;
/// MPI_Init_thread asking for MPI_THREAD_MULTIPLE, unless MPI is already initialized.
/// Returns whether this call initialized MPI. @throws spillway::logic_error without MPI
bool init(int* argc, char*** argv);
/// MPI_Finalize, if MPI is initialized and not yet finalized.
void finalize() noexcept;
/// This process's rank in MPI_COMM_WORLD (MPI must be initialized); 0 without MPI.
int world_rank() noexcept;
/// MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job (a rank that failed alone would
/// leave the others waiting). Without MPI, std::exit(code).
[[noreturn]] void abort(int code) noexcept;
}  // namespace mpi

/// A communicator over a duplicate of MPI_COMM_WORLD (MPI must be initialized). `br` provides
/// the bounce buffers for device buffers (PINNED_HOST where live, else HOST) and must outlive
/// it. @throws spillway::logic_error without MPI or before MPI_Init
std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br);

}  // namespace spillway
