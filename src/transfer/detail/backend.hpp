#pragma once
// What the engine asks of a backend (loopback, libfabric) and what a backend tells the engine
// back (internal). The engine calls a backend from one thread at a time: its worker, or a user
// thread registering memory or adding a peer while holding the engine's backend lock.

#include <spillway/core/error.hpp>
#include <spillway/transfer/engine.hpp>

#include "transfer/detail/ticket_state.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spillway::transfer::detail {

/// A registration: the user's region plus what the backend keeps for it.
struct RegionRecord {
  Region region;
  std::uint64_t key{0};            ///< the remote key peers address it by
  std::uint64_t address{0};        ///< what peers address its first byte by
  void* desc{nullptr};             ///< the local descriptor (fi_mr_desc)
  void* handle{nullptr};           ///< the backend's registration (fid_mr*)
  std::vector<std::uint8_t> blob;  ///< what peers need besides (a CUDA IPC handle)
};

/// One write or read batch in flight.
struct Op {
  std::shared_ptr<TicketState> ticket;
  bool is_read{false};
  PeerId peer{0};
  std::size_t backend{0};         ///< which of the engine's backends carries it
  std::uint64_t backend_peer{0};  ///< that backend's handle of the peer (it may rewrite it)
  RegionRecord local;             ///< a copy: deregistering while in flight is the user's bug
  RemoteRegion remote;
  RemoteKey remote_key;  ///< `remote`'s key of the backend that carries it
  std::vector<Chunk> chunks;
  std::optional<std::uint32_t> imm;
  Deadline deadline;
  Clock::time_point submitted{Clock::now()};  ///< for the trace log
  // The backend's progress through the batch.
  std::size_t next{0};       ///< the next chunk to post
  std::size_t next_byte{0};  ///< how much of that chunk is posted (chunks over the backend's
                             ///< largest message go out in pieces)
  std::size_t inflight{0};   ///< posted, not completed
  std::atomic<std::size_t> completed{0};  ///< read by the engine's worker for its messages
};

/// What a backend calls back, on the thread that drives it (each backend of an engine has a
/// host of its own, which knows which backend it serves).
class BackendHost {
 public:
  virtual ~BackendHost() = default;
  /// An imm arrived for this engine (thread-safe: a loopback peer calls it from its thread).
  virtual void deliver_imm(std::uint32_t imm) = 0;
  /// Sends `body` to the backend of the peer `backend_peer` (a FrameType::backend frame on
  /// the control channel); false when the peer is gone or did not take it in time. `first`,
  /// when given, runs once the peer is found and its connection held, before the bytes go:
  /// nothing sent to the peer after `first` (a control message of a thread it woke) can
  /// overtake them.
  virtual bool send_to_peer(std::uint64_t backend_peer, std::span<const std::uint8_t> body,
                            const std::function<void()>& first = {}) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// "loopback" or "libfabric/<provider>": peers must have the same.
  [[nodiscard]] virtual std::string name() const = 0;
  /// This backend's address, for the engine's metadata.
  [[nodiscard]] virtual std::vector<std::uint8_t> address() const = 0;
  /// Fills `record.key`, `.address`, `.desc`, `.handle`.
  /// @throws spillway::logic_error for memory the backend cannot take (the engine then
  /// leaves the region to its other backends)
  virtual void register_region(RegionRecord& record) = 0;
  virtual void deregister_region(RegionRecord& record) noexcept = 0;
  /// The backend's handle of a peer at `address`.
  virtual std::uint64_t add_peer(std::span<const std::uint8_t> address) = 0;
  /// The engine knows the peer at `backend_peer` now (so BackendHost::send_to_peer reaches
  /// it): a backend that must tell the peer something before they transfer does it here.
  virtual void peer_added(std::uint64_t /*backend_peer*/) {}
  /// Forgets the peer; what is in flight to it is abandoned (its tickets ended by the engine).
  virtual void remove_peer(std::uint64_t backend_peer) noexcept = 0;
  /// Whether the backend can carry a batch between memory of these kinds (both registered
  /// with it): cuda_ipc needs device memory on one side.
  [[nodiscard]] virtual bool carries(MemoryType /*local*/, MemoryType /*remote*/) const {
    return true;
  }
  /// Takes the op; its ticket is finished by progress() (ok or error).
  virtual void post(std::shared_ptr<Op> op) = 0;
  /// Polls completions, then posts what is queued. @returns whether anything happened
  virtual bool progress() = 0;
  /// Whether the backend drives its operations on threads of its own (libfabric): the
  /// engine's worker then neither polls it nor counts its operations as work to spin for.
  [[nodiscard]] virtual bool self_driven() const { return false; }
  /// What the backend of peer `backend_peer` sent with BackendHost::send_to_peer.
  /// @throws spillway::corrupt_data_error for a malformed message (the peer is then failed)
  virtual void on_message(std::uint64_t /*backend_peer*/, std::span<const std::uint8_t> /*body*/) {
    SPILLWAY_FAIL("a backend message for a backend that takes none", corrupt_data_error);
  }
  /// A file descriptor that becomes readable when progress() has work, or -1 (then the
  /// engine's worker polls progress() without sleeping while peers exist).
  virtual int wait_fd() { return -1; }
  /// Whether the worker may sleep on wait_fd() now (fi_trywait).
  virtual bool may_sleep() { return true; }
  [[nodiscard]] virtual EngineCounters counters() const = 0;
};

std::unique_ptr<Backend> make_loopback_backend(BackendHost& host);
/// @throws spillway::cuda_error or spillway::logic_error where there is no GPU
std::unique_ptr<Backend> make_cuda_ipc_backend(BackendHost& host, const EngineOptions& options);
/// @throws spillway::logic_error where spillway was built without libfabric
std::unique_ptr<Backend> make_fabric_backend(BackendHost& host, const EngineOptions& options);
/// Whether this build has the libfabric backend.
bool fabric_compiled() noexcept;

}  // namespace spillway::transfer::detail
