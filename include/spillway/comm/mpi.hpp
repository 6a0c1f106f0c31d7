#pragma once
/// @file mpi.hpp
/// One rank per process over MPI (OpenMPI; launched with mpirun, srun or spillway-run): how
/// spillway runs across nodes. Host buffers (HOST, PINNED_HOST) go through MPI directly. Device
/// buffers to a rank of the same node go through CUDA IPC: each rank sets aside a window of
/// device memory (SPILLWAY_MPI_IPC_WINDOW, in SPILLWAY_MPI_IPC_SLOT slots) that the others
/// map; the receiver grants slots, the sender's GPU copies pieces into them over NVLink, the
/// receiver copies them out to the tier it chose. Device buffers to other nodes are staged
/// through pinned host bounce buffers, pipelined: up to four 16 MiB pieces in flight, the copy
/// of one overlapping the transfer of another (no CUDA-aware MPI is assumed).
///
/// Wire protocol: a buffer of n bytes travels as ceil(n / 16 MiB) MPI messages (one if n is 0)
/// with the same tag, so both sides agree whatever the tiers; between ranks that map each
/// other's windows every transfer starts with a header saying whether pieces or window slots
/// follow. Small messages and slot grants use their own tag spaces. Everything that arrives
/// is checked (sizes, magic numbers, piece and slot numbers) and a mismatch is a comm_error.
/// The communicator's MPI errors are returned, not fatal, and become comm_errors.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <memory>

namespace spillway {

namespace mpi {
/// Whether spillway was built with MPI.
bool is_compiled() noexcept;
/// MPI_Init_thread asking for MPI_THREAD_MULTIPLE, unless MPI is already initialized. Under
/// spillway-run (bootstrap.hpp), where each rank starts as an MPI singleton, it then joins the
/// ranks into one communicator, mpi::world() (mpi_world.hpp), ordered by SPILLWAY_RUN_RANK.
/// Returns whether this call initialized MPI. @throws spillway::logic_error without MPI,
/// spillway::comm_error when the ranks cannot join within the comm timeout
bool init(int* argc, char*** argv);
/// MPI_Finalize, if MPI is initialized and not yet finalized.
void finalize() noexcept;
/// This process's rank in mpi::world() (MPI must be initialized); 0 without MPI.
int world_rank() noexcept;
/// MPI_Abort(mpi::world(), code): ends every rank of the job (a rank that failed alone would
/// leave the others waiting). Without MPI, std::exit(code).
[[noreturn]] void abort(int code) noexcept;
}  // namespace mpi

/// A communicator over a duplicate of mpi::world() (MPI must be initialized); collective. `br`
/// provides the bounce buffers for device buffers (PINNED_HOST where live, else HOST) and must
/// outlive it. @throws spillway::logic_error without MPI or before MPI_Init
std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br);
/// The same over a duplicate of the MPI communicator whose handle (an MPI_Comm of this build's
/// MPI library) is at `mpi_comm`: a sub-communicator, or one of a program that set up MPI
/// itself (mpi4py's `MPI._addressof(comm)`). Collective over that communicator.
/// @throws spillway::logic_error without MPI, before MPI_Init, or for a null address
std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br, const void* mpi_comm);

}  // namespace spillway
