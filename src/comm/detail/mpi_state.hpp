#pragma once
// Private to the MPI communicator (mpi.cpp): what the communicator and its transfers
// (mpi_request.hpp) share, and the cancellation of one MPI request.

#include <spillway/comm/communicator.hpp>
#include <spillway/core/stream.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include "comm/detail/mpi_ipc.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace spillway::detail {

class MpiRequest;

/// Transfers that match on the receiving side by post order: the same direction, peer and MPI
/// tag. MPI matches a peer's messages of one tag in the order they were posted, so the messages
/// of such transfers must be posted transfer after transfer, each in order, on both sides.
struct PostKey {
  bool is_send;
  Rank peer;
  int tag;
  friend auto operator<=>(const PostKey&, const PostKey&) = default;
};

/// What the communicator and its requests share.
struct MpiState {
  MPI_Comm comm{MPI_COMM_NULL};
  int rank{0};
  int size{1};
  bool serialize{false};  // below MPI_THREAD_MULTIPLE: one MPI call at a time
  std::mutex mutex;
  BufferResource* br{nullptr};
  OwningStream stream{nullptr};     // for the bounce copies and copies out of the window
  std::unique_ptr<IpcWindows> ipc;  // null without a GPU
  // Stepped transfers (device buffers, and all transfers of window pairs) advance together: a
  // rank waiting on one of them must keep the others moving, or two ranks each waiting on
  // their own send deadlock.
  std::recursive_mutex progress_mutex;
  std::vector<std::weak_ptr<MpiRequest>> stepped;
  /// Per key, the transfers (in start order) that have messages left to post; only the first
  /// may post. Under progress_mutex.
  std::map<PostKey, std::deque<const MpiRequest*>> posting;
  /// How long a dropped transfer's MPI requests may take to settle after MPI_Cancel (the
  /// communicator's timeout), and the peers one of them did not settle with: a dead peer,
  /// whose other transfers are let go of at once. Under progress_mutex.
  std::atomic<std::int64_t> cancel_wait_ms{300000};
  std::set<Rank> unsettled;

  [[nodiscard]] std::unique_lock<std::mutex> lock() {
    return serialize ? std::unique_lock(mutex) : std::unique_lock<std::mutex>();
  }
  /// Whether transfers from `src` to `dst` start with a header (the sender may use the
  /// receiver's window).
  [[nodiscard]] bool windowed(Rank src, Rank dst) const {
    if (!ipc) return false;
    return src == rank ? ipc->pushes_to(dst) : ipc->pushed_by(src);
  }
  /// Four MPI tags per Tag: buffer bytes (and headers and notices), small messages, grants.
  static int buffer_tag(Tag t) { return static_cast<int>(t.value() << 2); }
  static int message_tag(Tag t) { return static_cast<int>((t.value() << 2) | 1U); }
  static int grant_tag(Tag t) { return static_cast<int>((t.value() << 2) | 2U); }
};

/// MPI_Cancel of `r` (a request of a transfer with `peer`), then waits for it to complete
/// before its bytes may go: a receive not yet matched completes at once, a send once MPI is
/// done with it, which may be never when the peer is dead (OpenMPI cannot cancel a send). So:
/// up to st.cancel_wait_ms for the first such request of a peer, none for its next ones. A
/// request that does not settle is freed to MPI and the peer noted in st.unsettled. Call
/// under st.progress_mutex, with `g` holding st.lock() (let go of while it sleeps).
/// @returns whether the request settled (false: MPI may still use its buffer)
inline bool cancel_request(MpiState& st, MPI_Request& r, Rank peer,
                           std::unique_lock<std::mutex>& g) {
  if (r == MPI_REQUEST_NULL) return true;
  MPI_Cancel(&r);
  const auto wait = st.unsettled.count(peer) != 0
                        ? std::chrono::milliseconds(0)
                        : std::chrono::milliseconds(st.cancel_wait_ms.load());
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int flag = 0;
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    if (flag != 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (g.owns_lock()) g.unlock();  // other threads may need MPI meanwhile
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    g = st.lock();
  }
  MPI_Request_free(&r);
  st.unsettled.insert(peer);
  return false;
}

}  // namespace spillway::detail
