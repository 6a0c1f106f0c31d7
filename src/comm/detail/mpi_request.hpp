#pragma once
// Private to the MPI communicator (mpi.cpp): one buffer transfer's state machine (host,
// staged and IPC-window modes, MpiRequest; its steps in mpi_request.cpp). What the
// communicator and its requests share is mpi_state.hpp.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/options.hpp>
#include <spillway/core/units.hpp>

#include "comm/detail/mpi_ipc.hpp"
#include "comm/detail/mpi_state.hpp"
#include "comm/detail/mpi_try.hpp"

#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include <array>
#include <climits>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace spillway::detail {

constexpr std::size_t piece = 16 * MiB;  // bytes per MPI message of a buffer
constexpr std::size_t slots = 4;         // bounce pieces in flight per staged transfer

/// One buffer transfer. Its mode:
/// - host: a HOST or PINNED_HOST buffer, every piece posted at once, straight from or into it;
/// - staged: a DEVICE buffer through `slots` bounce pieces, each cycling copy -> MPI (send) or
///   MPI -> copy (receive);
/// - window: a DEVICE buffer sent to a peer of the node, piece by piece through the slots of
///   the receiver's CUDA IPC window (mpi_ipc.hpp), into a buffer of any tier.
/// Between window pairs every transfer starts with a TransferHeader (mode `header` until then
/// on the receiving side), since only the sender knows whether its buffer is on the GPU.
class MpiRequest final : public detail::Request {
 public:
  MpiRequest(bool is_send, Rank peer, Tag tag, Buffer& buf, std::shared_ptr<MpiState> st);

  ~MpiRequest() override { (void)cancel(); }

  /// Whether the communicator must step it (see MpiState::stepped).
  [[nodiscard]] bool stepped() const noexcept { return stepped_; }

  bool progress() override;

  /// Advances this transfer as far as it can without waiting (under the progress mutex); a
  /// failure is kept for its own progress() to throw.
  void step() noexcept;

  /// Steps every live stepped transfer of the communicator.
  static void progress_stepped(MpiState& st);

  bool cancel() noexcept override;

 private:
  enum class Mode { header, host, staged, window };
  enum class Phase { free, copying, transferring };
  struct Slot {
    Phase phase{Phase::free};
    std::size_t index{0};
    MPI_Request req{MPI_REQUEST_NULL};
    Event event;
  };
  /// A piece on its way through a window slot.
  struct Lane {
    enum { granted, copying, noticed } phase{granted};
    SlotMessage msg;                    // the grant (receive) or the notice (send) it sent
    MPI_Request req{MPI_REQUEST_NULL};  // of that message
    Event event;                        // the copy into the slot (send) or out of it (receive)
  };

  [[nodiscard]] bool done() const noexcept {
    return finished_ == total_ && header_req_ == MPI_REQUEST_NULL;
  }

  /// Pieces of `bytes` each (one if the buffer is empty): 16 MiB, or the window's slot size.
  void set_piece(std::size_t bytes) {
    piece_ = bytes;
    total_ = buf_.size() == 0 ? 1 : (buf_.size() + bytes - 1) / bytes;
  }
  [[nodiscard]] std::size_t length(std::size_t i) const {
    return std::min(piece_, buf_.size() - std::min(buf_.size(), i * piece_));
  }
  [[nodiscard]] std::byte* at(std::size_t i) {
    return buf_.size() > 0 ? buf_.data() + i * piece_ : nullptr;
  }

  /// Whether piece `i` may be posted now: it is the next of this transfer (after the header),
  /// and every earlier transfer of the same key has posted all of its messages. Under
  /// progress_mutex.
  [[nodiscard]] bool may_post(std::size_t i) const {
    return i + (headed_ ? 1 : 0) == posted_ && st_->posting[key_].front() == this;
  }

  /// Counts a posted message; after the last one the next transfer of the key may post.
  void posted() {
    if (++posted_ == total_ + (headed_ ? 1 : 0)) leave_queue();
  }

  /// Under progress_mutex.
  void leave_queue() noexcept {
    const auto it = st_->posting.find(key_);
    if (it == st_->posting.end()) return;
    std::erase(it->second, this);
    if (it->second.empty()) st_->posting.erase(it);
  }

  void post(std::size_t i, void* where, MPI_Request& req);

  template <class T>
  void post_small(T& msg, int mtag, MPI_Request& req, bool send) {
    if (send) {
      SPILLWAY_MPI_TRY(MPI_Isend(&msg, sizeof msg, MPI_BYTE, peer, mtag, st_->comm, &req),
                       st_->rank, "MPI_Isend");
    } else {
      SPILLWAY_MPI_TRY(MPI_Irecv(&msg, sizeof msg, MPI_BYTE, peer, mtag, st_->comm, &req),
                       st_->rank, "MPI_Irecv");
    }
  }

  /// Tests a small receive; true when it has arrived whole. Checks its size (the bytes come
  /// from another process).
  template <class T>
  bool arrived(MPI_Request& req, const char* what) {
    int flag = 0;
    MPI_Status status;
    SPILLWAY_MPI_TRY(MPI_Test(&req, &flag, &status), st_->rank,
                     std::string("MPI_Test (") + what + ")");
    if (flag == 0) return false;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<std::size_t>(got) != sizeof(T)) {
      fail(std::string("a ") + what + " of " + std::to_string(got) + " bytes, expected " +
           std::to_string(sizeof(T)));
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& what) const {
    SPILLWAY_FAIL("[rank " + std::to_string(st_->rank) + "] " + describe() + ": " + what,
                  comm_error);
  }

  /// Host mode: posts every piece once the key allows (under st_->lock()). Returns whether all
  /// are posted.
  bool try_post_all();

  bool test_all();

  void check_count(const MPI_Status& status, std::size_t i) const;

  /// Window pairs: the sender posts the header and goes on in its mode; the receiver learns
  /// the mode from it.
  void step_header();

  void start_staged();

  void advance(std::size_t s);

  /// Window send: takes the receiver's grants one by one, copies each granted piece into the
  /// slot, and once a copy is done posts its notice (in grant order).
  void step_window_send();

  /// Window receive: grants free slots of this rank's window to the next pieces, takes the
  /// notices in order, copies each piece out of its slot and frees the slot when that is done.
  void step_window_recv();

  Buffer& buf_;
  std::shared_ptr<MpiState> st_;
  Event ready_;        // the buffer's stream when posted
  const bool headed_;  // a window pair: a header comes first
  const PostKey key_;
  Mode mode_{Mode::host};
  bool stepped_{false};
  std::size_t piece_{0};   // bytes per piece
  std::size_t total_{0};   // pieces
  std::size_t posted_{0};  // messages posted with key_.tag (header, pieces or notices)
  std::size_t finished_{0};
  std::exception_ptr error_;
  // header
  TransferHeader header_;
  MPI_Request header_req_{MPI_REQUEST_NULL};
  // host
  std::vector<MPI_Request> reqs_;
  std::vector<MPI_Status> status_;  // for MPI_Testall, kept across tests
  // staged
  std::unique_ptr<Buffer> bounce_;
  std::vector<Slot> slot_;
  std::size_t next_{0};
  // window
  std::list<Lane> lanes_;
  bool grant_held_{false};  // a grant arrived, its copy waits for ready_
  SlotMessage slot_msg_;    // the grant (send) or notice (receive) expected
  MPI_Request slot_msg_req_{MPI_REQUEST_NULL};
  std::size_t granted_{0};
  std::size_t noticed_{0};
};

/// A new transfer; stepped ones join the communicator's progress and take their first step.
std::shared_ptr<MpiRequest> start(bool is_send, Rank peer, Tag tag, Buffer& buf,
                                  const std::shared_ptr<MpiState>& st);

}  // namespace spillway::detail
