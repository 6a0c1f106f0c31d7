#pragma once
/// @file launch.hpp
/// Running a program's ranks: one (`single`), N as threads of this process (`local`), or this
/// process's rank of an MPI job (`mpi`, under mpirun, srun or spillway-run), each on its GPU
/// with its BufferResource and communicator, and an error in one rank an error of the run,
/// never a hang of the others.

#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <functional>
#include <string>

namespace spillway {

/// How ranks run.
enum class RankKind {
  single,  ///< one rank, this thread (make_single_communicator)
  local,   ///< N ranks as threads of this process (LocalCommunicator)
  mpi,     ///< this process's rank of an MPI job (make_mpi_communicator)
  /// over transfer engines (make_transfer_communicator): this process's rank under
  /// spillway-run, else N ranks as threads of this process meeting in a private directory
  transfer,
};
/// Parses "single|local|mpi|transfer" (the tools' -C). @throws spillway::logic_error naming the
/// choices
RankKind parse_rank_kind(const std::string& text);

/// What run_ranks does besides calling the rank function.
struct LaunchOptions {
  /// Put each rank on its GPU first: local rank r on r % GPUs (LocalCommunicator::device_of),
  /// an MPI rank on bootstrap::device_for_rank. Without it the current GPU stays.
  bool place_on_gpu{true};
  /// Where a rank that throws is reported: by default a line on stderr naming the program and
  /// the rank.
  std::function<void(Rank rank, const std::string& what)> on_error{};
  /// The program's name for those lines.
  std::string program{"spillway"};
};

/// What one rank does; its result is the rank's exit code (0: success).
using RankFunction = std::function<int(Communicator& comm, BufferResource& br)>;

/// Runs `fn` on each rank of this process, each with a BufferResource of `config` (on its
/// GPU) and its communicator: `nranks` threads for `local`, one call for `single`, this
/// process's rank for `mpi` (mpi::init before, mpi::finalize after; `nranks` is then the job's,
/// and not checked), and for `transfer` this process's rank under spillway-run, else `nranks`
/// threads. Ranks that share a GPU split it (shared_gpu_config). A rank that throws is
/// reported (LaunchOptions::on_error) and gives 1: a local rank then leaves its group, so that
/// peers waiting on it fail instead of waiting; an MPI rank aborts the job (mpi::abort), since
/// the other processes may wait on it. Returns the largest exit code of this process's ranks.
/// @throws spillway::logic_error for nranks < 1 (local), or `mpi` in a build without MPI
int run_ranks(RankKind kind, int nranks, const BufferResourceConfig& config, const RankFunction& fn,
              const LaunchOptions& options = {});

/// `config` for one of `ranks_per_gpu` ranks that share a GPU: unless a device limit or pool
/// size is set, each rank's `pool` allocator maps its part of 90% of the device (not 50%
/// each, which would not fit). Unchanged for one rank per GPU.
BufferResourceConfig shared_gpu_config(BufferResourceConfig config, int ranks_per_gpu);

/// How many ranks of this node share each GPU: ceil(ranks on this node / GPUs) (1 without
/// GPUs). For `mpi` the ranks on this node come from spillway-run, else OpenMPI's
/// OMPI_COMM_WORLD_LOCAL_SIZE, else 1.
int ranks_per_gpu(RankKind kind, int nranks);

}  // namespace spillway
