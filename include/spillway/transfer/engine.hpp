#pragma once
/// @file engine.hpp
/// The transfer engine: batched non-contiguous one-sided writes and reads between registered
/// memory of processes that join and leave at run time, with 32-bit imm notifications, small
/// two-sided control messages and a liveness check of its own.
///
/// One engine per process (per GPU). Its worker thread, bound to the CPUs nearest its GPU,
/// posts every operation, polls the backend's completions and retries what the backend could
/// not take yet (an application-level queue). A control channel (TCP) to every peer carries
/// the peer's hello, the control messages and heartbeats: a peer whose connections close or
/// that sends nothing for `peer_timeout` is gone, and every ticket to it ends as peer_gone.
/// What a peer sent before it ended is taken before it is found gone.
///
///     TransferEngine a({.backend = "libfabric", .provider = "tcp"});
///     // hand a.metadata() and a.export_region(dst, 0, n).to_bytes() to the writer
///     PeerId p = b.add_peer(metadata_of_a);
///     Ticket t = b.write(src, remote, chunks, /*imm=*/7, Deadline::in(5s));
///     a.expect_imm(7, 1).wait();   // the batch's bytes are in place

#include <spillway/transfer/region.hpp>
#include <spillway/transfer/ticket.hpp>
#include <spillway/transfer/types.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spillway::transfer {

struct EngineOptions {
  /// "loopback" (engines of this process only, for tests), "libfabric" (its provider below),
  /// "libfabric/<provider>", "cuda_ipc" (processes of one node, GPU memory on at least one
  /// side of every batch), several of them separated by commas, or "auto" (libfabric where
  /// built, else loopback). With several, the engine picks for each batch the first, in this
  /// order, that the peer has too, that both regions are registered with, and that can carry
  /// the batch (cuda_ipc: device memory on one side): e.g. "cuda_ipc,libfabric/shm,
  /// libfabric/tcp" for peers on this node and on others, device and host memory alike.
  std::string backend{"auto"};
  /// How cuda_ipc moves a batch: "kernel" (one gather/scatter kernel), "batch"
  /// (cudaMemcpyBatchAsync, the copy engines), "mixed" (both at once, each on a share of the
  /// chunks), "per_chunk" (a cudaMemcpyAsync per chunk: the baseline benchmarks compare
  /// with) or "auto" (by chunk size and path, as measured).
  /// The initiator's choice holds for its batches, whichever side carries them out.
  std::string ipc_copy{"auto"};
  /// The share of a mixed batch's bytes that cuda_ipc's kernel copies (the copy engines take
  /// the rest), in (0, 1); 0 for the share measured best by chunk size (0.3 below 256 KiB
  /// chunks, 0.1 from there).
  double ipc_kernel_share{0};
  /// The libfabric provider by name: "tcp", "shm", "verbs", "efa", "sockets".
  std::string provider{"tcp"};
  /// The address the control channel (and libfabric's tcp endpoint) binds to.
  std::string address{"127.0.0.1"};
  /// The GPU whose nearest CPUs the worker runs on; -1 for none.
  int device{-1};
  /// How often the control channel says it is alive.
  std::chrono::milliseconds heartbeat_interval{100};
  /// How long a peer may say nothing before it counts as gone.
  std::chrono::milliseconds peer_timeout{5000};
  /// The backend's transmit queue depth; 0 for the provider's default. A tiny queue forces
  /// -FI_EAGAIN, which the engine's own queue absorbs.
  std::size_t tx_queue_depth{0};
};

/// What the engine has done, for benchmarks and tests.
struct EngineCounters {
  std::uint64_t chunks_posted{0};
  std::uint64_t eagain{0};  ///< posts the backend refused for now (and the engine retried)
  std::uint64_t imms_received{0};
};

/// One-sided transfers between registered memory of peers that come and go.
class TransferEngine {
 public:
  /// @throws spillway::logic_error for an unknown backend or a bad option;
  /// spillway::comm_error when the backend or the control channel cannot be opened
  explicit TransferEngine(EngineOptions options = {});
  /// Shuts its control connections down so that what it last sent arrives: it waits for its
  /// peers to close their side, at most 1 s (or peer_timeout, if shorter).
  ~TransferEngine();
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  /// This engine's serialisable address (backend, control channel, identity); hand it to
  /// peers out of band.
  [[nodiscard]] std::vector<std::uint8_t> metadata() const;
  /// The backends in use, in order of preference, separated by commas ("loopback",
  /// "cuda_ipc,libfabric/tcp", ...).
  [[nodiscard]] std::string backend_name() const;

  /// Connects to the engine `metadata` describes; works at any time, also while transfers
  /// between others are in flight. Adding a peer already known returns its id.
  /// @throws spillway::corrupt_data_error for corrupt or truncated metadata;
  /// spillway::logic_error for metadata of this engine or of an engine with no backend in
  /// common with this one;
  /// spillway::comm_error when the peer cannot be reached
  PeerId add_peer(std::span<const std::uint8_t> metadata);
  /// Ends the peer: its tickets end as peer_gone, its regions are no longer written.
  void remove_peer(PeerId peer);
  /// The live peers.
  [[nodiscard]] std::vector<PeerId> peers() const;
  /// Called with a peer that died or stopped answering (on the worker thread) or was removed
  /// (on the thread that called remove_peer).
  void on_peer_failure(std::function<void(PeerId, const std::string& why)> callback);

  /// Registers the memory with every backend of the engine that takes it (libfabric without
  /// FI_HMEM takes no device memory). Host memory that cuda_ipc peers write into from their
  /// GPUs is best a SharedHostMemory (shared_host_memory.hpp), registered as PINNED_HOST: a
  /// peer then writes it one-sided, where other host memory has this engine copy each batch
  /// out of the peer's device memory.
  /// @throws spillway::logic_error for a null pointer, zero bytes, memory that overlaps a
  /// region already registered (the message names both), or memory no backend takes (the
  /// message gives each one's reason)
  Region register_memory(void* ptr, std::size_t bytes, MemoryType type, int device = -1);
  /// Operations on the region must have ended.
  void deregister_memory(const Region& region);
  /// `length` bytes of `region` from `offset`, as a peer may address them.
  /// @throws spillway::logic_error when the range is outside the region
  [[nodiscard]] RemoteRegion export_region(const Region& region, std::size_t offset,
                                           std::size_t length) const;

  /// A one-sided write of every chunk from `src` into `dst`. `imm`, if given, reaches the
  /// owner of `dst` once every byte of the batch is in place there. The ticket ending ok
  /// says the bytes are in place, not that the owner has seen the imm yet: it waits for it
  /// with expect_imm.
  /// @throws spillway::logic_error, before anything moves, for a chunk outside either region,
  /// an empty batch, a region that is not registered, no backend that can carry the batch
  /// (see backend_for); a `dst` of an engine that never was a peer
  Ticket write(const Region& src, const RemoteRegion& dst, std::span<const Chunk> chunks,
               std::optional<std::uint32_t> imm = std::nullopt,
               Deadline deadline = Deadline::never());
  /// The backend that would carry a write from `src` into `dst` (a read is the same).
  /// @throws spillway::logic_error when none can (the message says why for each), or `dst`'s
  /// engine is not a peer
  [[nodiscard]] std::string backend_for(const Region& src, const RemoteRegion& dst) const;
  /// A one-sided read of every chunk from `src` (the peer's) into `dst` (this engine's);
  /// chunk offsets are src_offset in `src`, dst_offset in `dst`.
  Ticket read(const RemoteRegion& src, const Region& dst, std::span<const Chunk> chunks,
              Deadline deadline = Deadline::never());

  /// Completes when `count` imms equal to `imm` have arrived, in any order, counting those
  /// that arrived before this call. Each arrival is consumed by one expectation only.
  Ticket expect_imm(std::uint32_t imm, std::uint32_t count, Deadline deadline = Deadline::never());
  /// Arrivals of `imm` not yet consumed by an expectation.
  [[nodiscard]] std::uint64_t imm_count(std::uint32_t imm) const;

  /// A small two-sided message to `peer` (at most 1 MiB), in order with earlier ones.
  /// @throws spillway::comm_error when the peer is gone
  void send_control(PeerId peer, std::span<const std::uint8_t> bytes);
  /// The next control message from any peer, waiting up to `timeout`; nullopt on timeout.
  std::optional<std::pair<PeerId, std::vector<std::uint8_t>>> recv_control(
      std::chrono::milliseconds timeout);

  [[nodiscard]] EngineCounters counters() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::transfer
