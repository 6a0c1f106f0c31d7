#pragma once
/// @file communicator.hpp
/// The Communicator interface: ranks, asynchronous tagged sends and receives of Buffers of any
/// memory tier and of small host messages, completion tests with a timeout, and a barrier.
/// Implementations: SingleCommunicator (single.hpp), LocalCommunicator (local.hpp, ranks as
/// threads of one process), MpiCommunicator (mpi.hpp, one rank per process).

#include <spillway/comm/logger.hpp>
#include <spillway/comm/progress_thread.hpp>
#include <spillway/comm/tag.hpp>
#include <spillway/memory/buffer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway {

namespace detail {

/// The state of one send or receive, advanced by `progress()` (implementation-specific).
class Request {
 public:
  Request(bool is_send, Rank peer, Tag tag, std::size_t bytes)
      : is_send{is_send}, peer{peer}, tag{tag}, bytes{bytes} {}
  virtual ~Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  /// Advances the transfer; true once it has completed (the buffer may then be reused).
  /// @throws spillway::comm_error when it failed (the peer is gone, sizes disagree, ...)
  virtual bool progress() = 0;
  /// Called when a future is dropped before completing: the transfer stops touching the
  /// buffer before this returns, and says so (true); or, when the transport cannot stop it
  /// within the communicator's timeout (an MPI send to a dead peer), it lets the transfer go
  /// and says false: the transport may still read or write the buffer, which must then never
  /// be freed.
  virtual bool cancel() noexcept { return true; }
  /// "send of 4096 bytes to rank 1 (op 3 stage 1)"
  [[nodiscard]] std::string describe() const;

  const bool is_send;
  const Rank peer;
  const Tag tag;
  const std::size_t bytes;
  /// When it was posted (for a caller that gives up on a transfer after a timeout).
  const std::chrono::steady_clock::time_point posted{std::chrono::steady_clock::now()};
};

}  // namespace detail

/// An outstanding send or receive. It owns the buffer being sent or received into until the
/// transfer has completed; then `Communicator::release` hands the buffer back.
class Future {
 public:
  Future(std::shared_ptr<detail::Request> request, std::unique_ptr<Buffer> buffer)
      : request_{std::move(request)}, buffer_{std::move(buffer)} {}
  ~Future() {
    if (!done_ && request_ && !request_->cancel()) {
      // The transport may still use the buffer (and the request its own): both are let go of,
      // never freed. Only a transfer with a dead peer comes here, on the way to an error.
      (void)new std::shared_ptr<detail::Request>(std::move(request_));
      (void)buffer_.release();
    }
  }
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  [[nodiscard]] const detail::Request& request() const noexcept { return *request_; }
  /// The request, shared (for a caller that describes it after the future is gone).
  [[nodiscard]] std::shared_ptr<const detail::Request> shared_request() const noexcept {
    return request_;
  }
  [[nodiscard]] const Buffer* buffer() const noexcept { return buffer_.get(); }

 private:
  friend class Communicator;
  std::shared_ptr<detail::Request> request_;
  std::unique_ptr<Buffer> buffer_;
  bool done_{false};
};

/// A small host message received by `recv_any`.
struct Message {
  Rank source{0};
  std::vector<std::uint8_t> data;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] Rank rank() const noexcept { return rank_; }
  [[nodiscard]] int nranks() const noexcept { return nranks_; }
  /// "local", "mpi", "single".
  [[nodiscard]] virtual const char* kind() const noexcept = 0;

  // The transfers. Each checks its arguments here, once, then calls the implementation's
  // do_* (which may take them as valid).

  /// Sends `buffer` (DEVICE, PINNED_HOST or HOST; its queued writes must be done or on its
  /// stream) to `dst`. The receiver posts a receive of exactly buffer->size() bytes.
  /// @throws spillway::logic_error for a bad rank or a null or DISK buffer
  std::unique_ptr<Future> send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag);
  /// Receives the next buffer sent by `src` with `tag` into `buffer`, whose tier the receiver
  /// chose (so the bytes land where it wants them). Its size must equal the sent size.
  /// @throws spillway::logic_error for a bad rank or a null or DISK buffer
  std::unique_ptr<Future> recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer);
  /// Sends a small host message (metadata, control) to `dst`.
  /// @throws spillway::logic_error for a bad rank
  void send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag);
  /// A small message with `tag` from any rank, if one has arrived; never blocks.
  std::optional<Message> recv_any(Tag tag) { return do_recv_any(tag); }
  /// Blocks until every rank has called barrier(). @throws spillway::comm_error on timeout
  void barrier() { do_barrier(); }
  /// Whether `peer` is known to have left the group (a local rank whose communicator left:
  /// LocalCommunicator::leave; a rank of the transfer communicator whose engine reports it
  /// failed), so that what waits on it without a transfer posted (a message it will never
  /// send) can fail at once. The messages it sent before leaving can still be received. False
  /// where the transport cannot tell (MPI): a transfer's timeout then finds a dead peer.
  /// @throws spillway::logic_error for a bad rank
  [[nodiscard]] bool has_left(Rank peer) const;

  /// Whether `future` has completed (advancing it). @throws spillway::comm_error if it failed
  bool test(Future& future);
  /// The indices of the futures that have completed (each tested once).
  std::vector<std::size_t> test_some(std::span<const std::unique_ptr<Future>> futures);
  /// Blocks until `future` completes. @throws spillway::comm_error when it fails or has not
  /// completed after timeout() (a dead or stuck peer)
  void wait(Future& future);
  /// The buffer of a completed future. @throws spillway::logic_error if it has not completed
  std::unique_ptr<Buffer> release(std::unique_ptr<Future> future);

  /// Claims op id `op` for one operation (a Shuffler) on this communicator until
  /// release_op(op), and returns the generation of this use of it for its tags (how many
  /// operations had the id before, modulo op_generations): so messages of the next use of the
  /// id wait for it and never reach one still finishing on this rank. Every rank must claim
  /// an id as many times, in the same order. Thread-safe.
  /// @throws spillway::logic_error when `op` is in use on this communicator
  std::uint8_t claim_op(OpID op);
  /// Frees `op` for its next use. Thread-safe.
  void release_op(OpID op) noexcept;

  /// How long wait() and barrier() wait for a peer: SPILLWAY_COMM_TIMEOUT (seconds, default
  /// 300) unless set here.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) noexcept { timeout_ = t; }
  [[nodiscard]] const Logger& logger() const noexcept { return logger_; }
  /// The communicator's progress thread (started on first use), where operations such as the
  /// Shuffler register their progress functions.
  ProgressThread& progress_thread();

 protected:
  Communicator(Rank rank, int nranks);

 private:
  /// The implementation's transfers, called with checked arguments (see send, recv, ...).
  virtual std::unique_ptr<Future> do_send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) = 0;
  virtual std::unique_ptr<Future> do_recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) = 0;
  virtual void do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) = 0;
  virtual std::optional<Message> do_recv_any(Tag tag) = 0;
  virtual void do_barrier() = 0;
  [[nodiscard]] virtual bool do_has_left(Rank /*peer*/) const noexcept { return false; }

  /// Throws spillway::logic_error unless 0 <= r < nranks().
  void check_rank(Rank r, const char* what) const;
  /// Throws spillway::logic_error for a DISK buffer or a null one.
  static void check_buffer(const Buffer* b, const char* what);

  struct OpUse {
    bool live{false};
    std::uint32_t uses{0};
  };

  Rank rank_;
  int nranks_;
  Logger logger_;
  std::chrono::milliseconds timeout_;
  std::mutex ops_mutex_;
  std::unordered_map<OpID, OpUse> ops_;
  std::mutex progress_mutex_;
  std::unique_ptr<ProgressThread> progress_;  // last: stopped before the rest goes
};

}  // namespace spillway
