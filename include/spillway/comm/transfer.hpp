#pragma once
/// @file transfer.hpp
/// A communicator over the transfer engine (transfer/engine.hpp): one rank per engine, ranks in
/// threads of one process or in processes on any nodes, with no MPI. The ranks meet through a
/// rendezvous directory (bootstrap.hpp: the one spillway-run makes, or any directory all ranks
/// see, such as one on a shared file system): each rank publishes its engine's metadata there
/// and connects to every other rank's engine.
///
/// Transfers are receiver-driven, like a rendezvous protocol of MPI. A receive registers its
/// buffer with the engine and offers it to the sender in a control message; the sender's
/// matching send writes the whole buffer into it with one one-sided write, whose imm tells the
/// receiver that the bytes are in place. Offers and sends of one (peer, tag) pair up in posting
/// order. Small messages and the barrier are control messages. A dead peer (the engine's
/// liveness check on its control channel) fails every transfer with it.
///
/// Device buffers between ranks of one node with GPUs go GPU to GPU: each rank sets aside a
/// window of device memory (SPILLWAY_TRANSFER_IPC_WINDOW; the caller's buffers, memory of a
/// stream-ordered pool, cannot be mapped by another process), a receive into device memory
/// takes a range of it, the sender's GPU writes there through the engine's cuda_ipc backend,
/// and the receiver copies it into its buffer. Otherwise (another node, a window without room,
/// no GPU) device buffers are staged whole through a host buffer of the sender's or receiver's
/// resource (PINNED_HOST where live, else HOST): the libfabric providers here have no FI_HMEM.
/// A self-send is copied directly.

#include <spillway/comm/bootstrap.hpp>
#include <spillway/comm/communicator.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace spillway {

struct TransferCommOptions {
  /// The engine backend: "libfabric", "loopback" (ranks of one process) or "auto"; empty:
  /// SPILLWAY_TRANSFER_BACKEND.
  std::string backend;
  /// The libfabric provider; empty: SPILLWAY_TRANSFER_PROVIDER.
  std::string provider;
  /// The address the engines bind to (their control channel and libfabric's tcp endpoint);
  /// empty: SPILLWAY_TRANSFER_ADDRESS (127.0.0.1 unless set: ranks on several hosts need
  /// each host's own address).
  std::string address;
  /// The device window for peers of this node (see above); nullopt:
  /// SPILLWAY_TRANSFER_IPC_WINDOW; 0: none.
  std::optional<std::size_t> ipc_window;
};

/// This rank's communicator over a transfer engine of its own; collective over the `nranks`
/// ranks of `launch`, which meet in `launch.dir` under names carrying `launch.token`. `br`
/// provides the staging buffers of device transfers and must outlive the communicator.
/// @throws spillway::comm_error when a rank has not published its engine, or cannot be
/// reached, within the communicator's timeout; spillway::logic_error for a bad option
std::unique_ptr<Communicator> make_transfer_communicator(BufferResource& br,
                                                         const LaunchInfo& launch,
                                                         const TransferCommOptions& options = {});

}  // namespace spillway
