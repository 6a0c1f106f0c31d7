#pragma once
// The transfer engine's state (internal): peers and their control connections, registered
// regions, operations in flight, imm counts, and the worker that drives the backend.
//
// Locks: `backend_mutex` (the backends are driven by one thread at a time) is taken before
// `mutex` (everything else), never waited for after it (submit only try_locks it under
// `mutex`); a peer's `send_mutex` comes between the two. Finishing a ticket takes only the
// ticket's own lock, and may happen under any of them.

#include <spillway/transfer/engine.hpp>

#include "transfer/detail/backend.hpp"
#include "transfer/detail/control_channel.hpp"
#include "transfer/detail/wire.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace spillway::transfer {

namespace detail {

/// A control connection; closes its socket when destroyed.
struct Connection {
  int fd{-1};
  FrameReader reader;
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();
};

struct Peer {
  PeerId id{0};
  EngineMetadata metadata;
  /// By this engine's backend: the backend's handle of the peer, or none (the peer lacks that
  /// backend, or it could not reach the peer).
  std::vector<std::optional<std::uint64_t>> backend_peers;
  bool alive{true};
  std::vector<std::unique_ptr<Connection>> connections;  // changed under the engine's mutex
  std::mutex send_mutex;  // one writer per connection; held while the worker closes them
  Clock::time_point last_heard{Clock::now()};
};

/// Registered memory and each backend's record of it (none: that backend did not take it).
struct Registration {
  Region region;
  std::vector<std::optional<RegionRecord>> records;
};

struct Expectation {
  std::uint32_t count{0};
  std::shared_ptr<TicketState> ticket;
  Deadline deadline;
};

/// What backend `index` of an engine calls back: the engine, told which backend calls.
class BackendLink final : public BackendHost {
 public:
  BackendLink(TransferEngine::Impl& engine, std::size_t index) : engine_{engine}, index_{index} {}
  void deliver_imm(std::uint32_t imm) override;
  bool send_to_peer(std::uint64_t backend_peer, std::span<const std::uint8_t> body,
                    const std::function<void()>& first) override;

 private:
  TransferEngine::Impl& engine_;
  std::size_t index_;
};

}  // namespace detail

struct TransferEngine::Impl {
  explicit Impl(EngineOptions opts);
  ~Impl();

  void deliver_imm(std::uint32_t imm);
  /// A frame for backend `index` of the peer that is `backend_peer` to that backend.
  bool send_to_peer(std::size_t index, std::uint64_t backend_peer,
                    std::span<const std::uint8_t> body, const std::function<void()>& first);
  /// Sends a frame on the peer's first connection; false when it is gone or the send failed.
  /// `first` as in send_to_peer.
  bool send(detail::Peer& peer, detail::FrameType type, std::span<const std::uint8_t> body,
            const std::function<void()>& first = {});

  // Called with `mutex` held.
  void satisfy(std::uint32_t imm);
  detail::Registration& registration_of(const Region& region, const char* what);
  /// The backend that carries a batch between `local` and `remote` for `peer`, or npos with
  /// `why` saying what each backend lacks.
  std::size_t choose(const detail::Peer& peer, const detail::Registration& local,
                     const RemoteRegion& remote, std::string& why) const;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  /// Opens the backends options.backend names (backends.cpp).
  void open_backends();
  /// The backends' names, comma-separated.
  [[nodiscard]] std::string backend_names() const;
  /// Whether the engine `metadata` describes has a backend of this engine's.
  [[nodiscard]] bool shares_a_backend(const detail::EngineMetadata& metadata) const;
  /// The index of this engine's backend named `name`, or npos.
  [[nodiscard]] std::size_t backend_named(std::string_view name) const;
  std::shared_ptr<detail::Peer> peer_of(PeerId peer, const char* what);
  /// The peer owning `engine`'s regions; nullptr (and `why`) when it is gone.
  std::shared_ptr<detail::Peer> peer_of_engine(const detail::EngineId& engine, std::string& why);
  /// Addresses `op` to the owner of `remote`, on the backend that carries it between `local`
  /// and `remote` (choose), and posts it, or queues it for the worker; a ticket already ended
  /// as peer_gone when that engine is no longer a peer. `lock` holds `mutex`, and may be
  /// released. @throws spillway::logic_error when no backend can carry it
  Ticket submit(std::shared_ptr<detail::Op> op, const detail::Registration& local,
                const RemoteRegion& remote, std::span<const Chunk> chunks,
                std::unique_lock<std::mutex>& lock);
  /// Hands `op` to the backend unless it has ended (called with `backend_mutex` held).
  void post(const std::shared_ptr<detail::Op>& op);

  /// A peer for `metadata` reached over `connection`: the known one, or a new one.
  PeerId attach(const detail::EngineMetadata& metadata,
                std::unique_ptr<detail::Connection> connection);
  /// Ends the peer: its operations end as peer_gone and the failure callbacks run. The worker
  /// closes its connections later.
  void fail_peer(const std::shared_ptr<detail::Peer>& peer, const std::string& why);

  // The worker.
  void run();
  void post_submitted();
  void check_deadlines();
  void tend_peers();
  void poll_sockets(bool busy);
  void on_frame(const std::shared_ptr<detail::Peer>& peer, detail::Frame&& frame);
  /// Reads `c` once (up to the end of a whole frame) and hands on the whole frames it holds:
  /// how many, or -1 once it closed or broke (`why` says how).
  /// @throws spillway::corrupt_data_error for a malformed frame
  long read_connection(const std::shared_ptr<detail::Peer>& peer, detail::Connection& c,
                       std::string& why);
  /// Closes a connection that `peer` closed or broke. The peer fails with its last connection
  /// only: engines that add each other at once hold two, and what the peer sent on one before
  /// it ended may be read after the other's close (a barrier's release was lost so).
  void close_connection(const std::shared_ptr<detail::Peer>& peer, const detail::Connection& c,
                        const std::string& why);
  /// Closes `c`, one of the peer's connections; the number it has left.
  std::size_t drop_connection(detail::Peer& peer, const detail::Connection& c);
  /// Takes the connections waiting on the listener: pending until their hello is read.
  void accept_waiting();
  void accept_pending();
  void wake() const noexcept;

  EngineOptions options;
  detail::EngineId id{detail::random_engine_id()};
  std::string control_address;
  int listen_fd{-1};
  int wake_fd{-1};

  std::mutex backend_mutex;  // over all the backends
  std::vector<std::unique_ptr<detail::BackendLink>> links;
  std::vector<std::unique_ptr<detail::Backend>> backends;  // in order of preference

  mutable std::mutex mutex;
  std::map<PeerId, std::shared_ptr<detail::Peer>> peers;  // live, and dead ones not yet closed
  std::map<detail::EngineId, PeerId> by_engine;           // live peers
  std::set<detail::EngineId> gone_engines;
  PeerId next_peer{1};
  std::map<std::uint64_t, detail::Registration> regions;
  std::uint64_t next_region{1};
  std::vector<std::shared_ptr<detail::Op>> ops;  // not yet ended
  std::deque<std::shared_ptr<detail::Op>> submitted;
  std::size_t unposted{0};  // submitted ops the worker has not yet handed to the backend
  std::unordered_map<std::uint32_t, std::uint64_t> arrived;
  std::unordered_map<std::uint32_t, std::deque<detail::Expectation>> expecting;
  std::uint64_t imms_received{0};
  std::deque<std::pair<PeerId, std::vector<std::uint8_t>>> inbox;
  std::condition_variable inbox_ready;
  std::vector<std::function<void(PeerId, const std::string&)>> failure_callbacks;

  // The worker's own.
  std::vector<std::unique_ptr<detail::Connection>> pending;  // accepted, no hello yet
  Clock::time_point next_heartbeat{Clock::now()};
  Clock::time_point last_activity{Clock::now()};  // the backend last did something
  std::atomic<bool> stopping{false};
  std::thread worker;
};

}  // namespace spillway::transfer
