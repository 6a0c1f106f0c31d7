#include <spillway/comm/mpi.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/core/units.hpp>

#include <mpi.h>

#include <cstdlib>

#include <array>
#include <climits>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace spillway {

namespace mpi {

bool is_compiled() noexcept {
  return true;
}

bool init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return false;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    throw comm_error("MPI_Init_thread failed");
  }
  return true;
}

void finalize() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized != 0 && finalized == 0) MPI_Finalize();
}

int world_rank() noexcept {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void abort(int code) noexcept {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace mpi

namespace {

constexpr std::size_t piece = 16 * MiB;  // bytes per MPI message of a buffer
constexpr std::size_t slots = 4;         // bounce pieces in flight per device transfer

std::size_t pieces(std::size_t bytes) {
  return bytes == 0 ? 1 : (bytes + piece - 1) / piece;
}

class MpiRequest;

/// Transfers that match on the receiving side by post order: the same direction, peer and MPI
/// tag. MPI matches a peer's messages of one tag in the order they were posted, so the pieces
/// of such transfers must be posted transfer after transfer, each in piece order, on both sides.
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
  OwningStream stream{nullptr};  // for the bounce copies
  // Staged (device) transfers advance together: a rank waiting on one of them must keep the
  // others moving, or two ranks each waiting on their own send deadlock.
  std::recursive_mutex progress_mutex;
  std::vector<std::weak_ptr<MpiRequest>> staged;
  /// Per key, the transfers (in start order) that have pieces left to post; only the first
  /// may post. Under progress_mutex.
  std::map<PostKey, std::deque<const MpiRequest*>> posting;

  [[nodiscard]] std::unique_lock<std::mutex> lock() {
    return serialize ? std::unique_lock(mutex) : std::unique_lock<std::mutex>();
  }
  void check(int rc, const std::string& what) const {
    if (rc == MPI_SUCCESS) return;
    std::array<char, MPI_MAX_ERROR_STRING> text{};
    int len = 0;
    MPI_Error_string(rc, text.data(), &len);
    throw comm_error("[rank " + std::to_string(rank) + "] " + what +
                     " failed: " + std::string(text.data(), static_cast<std::size_t>(len)));
  }
  /// Buffers use even MPI tags, small messages odd ones.
  static int buffer_tag(Tag t) { return static_cast<int>(t.value() << 1); }
  static int message_tag(Tag t) { return static_cast<int>((t.value() << 1) | 1U); }
};

/// One buffer transfer, piece by piece. Host buffers: every piece posted at once, straight from
/// or into the buffer. Device buffers: pieces go through `slots` bounce pieces, each cycling
/// copy -> MPI (send) or MPI -> copy (receive).
class MpiRequest final : public detail::Request {
 public:
  MpiRequest(bool is_send, Rank peer, Tag tag, Buffer& buf, std::shared_ptr<MpiState> st)
      : Request(is_send, peer, tag, buf.size()),
        buf_{buf},
        st_{std::move(st)},
        total_{pieces(buf.size())},
        staged_{buf.mem_type() == MemoryType::DEVICE},
        key_{is_send, peer, MpiState::buffer_tag(tag)} {
    if (!staged_) {
      reqs_.resize(total_, MPI_REQUEST_NULL);
      status_.resize(total_);
    }
    {
      std::lock_guard lock(st_->progress_mutex);
      auto& queue = st_->posting[key_];
      queue.push_back(this);
      if (!staged_ && queue.front() == this) post_all();
    }
    if (!staged_) return;
    // The bounce copies run after what is queued on the buffer's stream now: its allocation
    // (a receive) or the writes that made its contents (a send).
    Event ready;
    ready.record(buf.stream());
    ready.wait_on(st_->stream);
    BufferResource& br = *st_->br;
    const MemoryType bounce_tier =
        br.is_live(MemoryType::PINNED_HOST) ? MemoryType::PINNED_HOST : MemoryType::HOST;
    bounce_ = br.allocate(bounce_tier, std::min(total_, slots) * piece);
    slot_.resize(std::min(total_, slots));
  }

  ~MpiRequest() override { cancel(); }

  bool progress() override {
    if (finished_ == total_) return true;
    if (!staged_ && posted_ < total_) {  // waiting for earlier transfers of its key to post
      progress_staged(*st_);
      std::lock_guard lock(st_->progress_mutex);
      if (st_->posting[key_].front() != this) return false;
      post_all();
    }
    auto g = st_->lock();
    if (!staged_) {
      int flag = 0;
      st_->check(MPI_Testall(static_cast<int>(total_), reqs_.data(), &flag, status_.data()),
                 "MPI_Testall (" + describe() + ")");
      if (flag == 0) return false;
      if (!is_send) {
        for (std::size_t i = 0; i < total_; ++i) check_count(status_[i], i);
      }
      finished_ = total_;
      return true;
    }
    if (g.owns_lock()) g.unlock();
    progress_staged(*st_);
    std::lock_guard lock(st_->progress_mutex);
    if (error_) std::rethrow_exception(error_);
    return finished_ == total_;
  }

  /// Advances this staged transfer by one step per slot (under the progress mutex); a failure
  /// is kept for its own progress() to throw.
  void step() noexcept {
    if (finished_ == total_ || error_) return;
    try {
      auto g = st_->lock();
      for (std::size_t s = 0; s < slot_.size(); ++s) advance(s);
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  /// Steps every live staged transfer of the communicator.
  static void progress_staged(MpiState& st) {
    std::lock_guard lock(st.progress_mutex);
    std::erase_if(st.staged, [](const std::weak_ptr<MpiRequest>& w) { return w.expired(); });
    for (std::size_t i = 0; i < st.staged.size(); ++i) {
      if (auto r = st.staged[i].lock()) r->step();
    }
  }

  void cancel() noexcept override {
    std::lock_guard progress(st_->progress_mutex);
    leave_queue();
    if (finished_ == total_) return;
    auto g = st_->lock();
    auto drop = [](MPI_Request& r) {
      if (r == MPI_REQUEST_NULL) return;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    };
    for (auto& r : reqs_) drop(r);
    for (auto& s : slot_) {
      drop(s.req);
      try {
        s.event.synchronize();
      } catch (...) {
      }
    }
    finished_ = total_;
  }

 private:
  enum class Phase { free, copying, transferring };
  struct Slot {
    Phase phase{Phase::free};
    std::size_t index{0};
    MPI_Request req{MPI_REQUEST_NULL};
    Event event;
  };

  [[nodiscard]] std::size_t length(std::size_t i) const {
    return std::min(piece, buf_.size() - std::min(buf_.size(), i * piece));
  }

  /// Whether piece `i` may be posted now: it is the next of this transfer, and every earlier
  /// transfer of the same key has posted all of its pieces. Under progress_mutex.
  [[nodiscard]] bool may_post(std::size_t i) const {
    return i == posted_ && st_->posting[key_].front() == this;
  }

  /// Counts a posted piece; after the last one the next transfer of the key may post.
  void posted() {
    if (++posted_ == total_) leave_queue();
  }

  /// Under progress_mutex.
  void leave_queue() noexcept {
    const auto it = st_->posting.find(key_);
    if (it == st_->posting.end()) return;
    std::erase(it->second, this);
    if (it->second.empty()) st_->posting.erase(it);
  }

  /// A host transfer: every piece at once, straight from or into the buffer.
  void post_all() {
    auto g = st_->lock();
    for (std::size_t i = 0; i < total_; ++i) {
      post(i, buf_.size() > 0 ? buf_.data() + i * piece : nullptr, reqs_[i]);
      posted();
    }
  }

  void post(std::size_t i, void* at, MPI_Request& req) {
    const int n = static_cast<int>(length(i));
    const int mtag = MpiState::buffer_tag(tag);
    if (is_send) {
      st_->check(MPI_Isend(at, n, MPI_BYTE, peer, mtag, st_->comm, &req), "MPI_Isend");
    } else {
      st_->check(MPI_Irecv(at, n, MPI_BYTE, peer, mtag, st_->comm, &req), "MPI_Irecv");
    }
  }

  void check_count(const MPI_Status& status, std::size_t i) const {
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<std::size_t>(got) != length(i)) {
      throw comm_error("[rank " + std::to_string(st_->rank) + "] size mismatch in the " +
                       describe() + ": piece " + std::to_string(i) + " has " + std::to_string(got) +
                       " bytes, expected " + std::to_string(length(i)));
    }
  }

  void advance(std::size_t s) {
    Slot& sl = slot_[s];
    std::byte* bounce = bounce_->data() + s * piece;
    std::byte* device = buf_.size() > 0 ? buf_.data() + sl.index * piece : nullptr;
    switch (sl.phase) {
      case Phase::free:
        if (next_ == total_) return;
        if (!is_send && !may_post(next_)) return;
        sl.index = next_++;
        device = buf_.size() > 0 ? buf_.data() + sl.index * piece : nullptr;
        if (is_send) {
          if (length(sl.index) > 0) {
            cuda::memcpy_async(bounce, device, length(sl.index), st_->stream);
          }
          sl.event.record(st_->stream);
          sl.phase = Phase::copying;
        } else {
          post(sl.index, bounce, sl.req);
          posted();
          sl.phase = Phase::transferring;
        }
        return;
      case Phase::copying:
        if (!sl.event.is_complete()) return;
        if (is_send) {
          if (!may_post(sl.index)) return;
          post(sl.index, bounce, sl.req);
          posted();
          sl.phase = Phase::transferring;
        } else {
          sl.phase = Phase::free;
          ++finished_;
        }
        return;
      case Phase::transferring: {
        int flag = 0;
        MPI_Status status;
        st_->check(MPI_Test(&sl.req, &flag, &status), "MPI_Test (" + describe() + ")");
        if (flag == 0) return;
        if (is_send) {
          sl.phase = Phase::free;
          ++finished_;
          return;
        }
        check_count(status, sl.index);
        if (length(sl.index) > 0) cuda::memcpy_async(device, bounce, length(sl.index), st_->stream);
        sl.event.record(st_->stream);
        sl.phase = Phase::copying;
        return;
      }
    }
  }

  Buffer& buf_;
  std::shared_ptr<MpiState> st_;
  const std::size_t total_;
  const bool staged_;
  const PostKey key_;
  std::size_t posted_{0};  // pieces handed to MPI
  std::vector<MPI_Request> reqs_;
  std::vector<MPI_Status> status_;  // for MPI_Testall, kept across tests
  std::unique_ptr<Buffer> bounce_;
  std::vector<Slot> slot_;
  std::size_t next_{0};
  std::size_t finished_{0};
  std::exception_ptr error_;
};

/// A new transfer; staged ones join the communicator's progress and take their first step.
std::shared_ptr<MpiRequest> start(bool is_send, Rank peer, Tag tag, Buffer& buf,
                                  const std::shared_ptr<MpiState>& st) {
  auto req = std::make_shared<MpiRequest>(is_send, peer, tag, buf, st);
  if (buf.mem_type() == MemoryType::DEVICE) {
    {
      std::lock_guard lock(st->progress_mutex);
      st->staged.push_back(req);
    }
    MpiRequest::progress_staged(*st);
  }
  return req;
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(std::shared_ptr<MpiState> st)
      : Communicator(st->rank, st->size), st_{std::move(st)} {}

  ~MpiCommunicator() override {
    // Small messages still on their way: give them the timeout, then let go.
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    auto pending = [&] {
      std::lock_guard out(outgoing_mutex_);
      return !outgoing_.empty();
    };
    while (pending() && std::chrono::steady_clock::now() < deadline) {
      reap();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    auto g = st_->lock();
    MPI_Comm_free(&st_->comm);
  }

  [[nodiscard]] Rank rank() const noexcept override { return st_->rank; }
  [[nodiscard]] int nranks() const noexcept override { return st_->size; }
  [[nodiscard]] const char* kind() const noexcept override { return "mpi"; }

  std::unique_ptr<Future> send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) override {
    check_rank(dst, "send");
    check_buffer(buffer.get(), "send");
    if (buffer->mem_type() == MemoryType::PINNED_HOST) {  // MPI reads it: writes must land
      buffer->wait();
      buffer->stream().synchronize();
    } else if (buffer->mem_type() == MemoryType::DEVICE) {
      buffer->wait();  // then the bounce copies wait for its stream on the GPU
    }
    auto req = start(true, dst, tag, *buffer, st_);
    return std::make_unique<Future>(std::move(req), std::move(buffer));
  }

  std::unique_ptr<Future> recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) override {
    check_rank(src, "recv");
    check_buffer(buffer.get(), "recv");
    auto req = start(false, src, tag, *buffer, st_);
    return std::make_unique<Future>(std::move(req), std::move(buffer));
  }

  void send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) override {
    check_rank(dst, "send_message");
    SPILLWAY_EXPECTS(data.size() <= static_cast<std::size_t>(INT_MAX),
                     "send_message: messages are limited to 2 GiB; send a Buffer instead");
    reap();
    std::lock_guard out(outgoing_mutex_);  // several threads send messages
    auto g = st_->lock();
    outgoing_.emplace_back(std::move(data), MPI_REQUEST_NULL);
    auto& [bytes, req] = outgoing_.back();
    st_->check(MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dst,
                         MpiState::message_tag(tag), st_->comm, &req),
               "MPI_Isend of a message");
  }

  std::optional<Message> recv_any(Tag tag) override {
    reap();
    auto g = st_->lock();
    int flag = 0;
    MPI_Status status;
    st_->check(MPI_Iprobe(MPI_ANY_SOURCE, MpiState::message_tag(tag), st_->comm, &flag, &status),
               "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    Message m{status.MPI_SOURCE, std::vector<std::uint8_t>(static_cast<std::size_t>(count))};
    st_->check(MPI_Recv(m.data.data(), count, MPI_BYTE, status.MPI_SOURCE,
                        MpiState::message_tag(tag), st_->comm, MPI_STATUS_IGNORE),
               "MPI_Recv of a message");
    return m;
  }

  void barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      auto g = st_->lock();
      st_->check(MPI_Ibarrier(st_->comm, &req), "MPI_Ibarrier");
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout();
    for (;;) {
      int flag = 0;
      {
        auto g = st_->lock();
        st_->check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test (barrier)");
      }
      if (flag != 0) return;
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        throw comm_error(logger().prefix() + "barrier timed out after " +
                         std::to_string(timeout().count()) + " ms: a peer is dead or stuck");
      }
      if (now - start < std::chrono::milliseconds(2)) {  // as Communicator::wait
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  /// Frees the small messages that have been sent.
  void reap() {
    std::lock_guard out(outgoing_mutex_);
    auto g = st_->lock();
    for (auto it = outgoing_.begin(); it != outgoing_.end();) {
      int flag = 0;
      MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE);
      it = flag != 0 ? outgoing_.erase(it) : std::next(it);
    }
  }

  std::shared_ptr<MpiState> st_;
  std::mutex outgoing_mutex_;
  std::list<std::pair<std::vector<std::uint8_t>, MPI_Request>> outgoing_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(BufferResource& br) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  SPILLWAY_EXPECTS(initialized != 0, "make_mpi_communicator: MPI is not initialized (mpi::init)");
  auto st = std::make_shared<MpiState>();
  int level = 0;
  MPI_Query_thread(&level);
  SPILLWAY_EXPECTS(level >= MPI_THREAD_SERIALIZED,
                   "the MPI communicator needs MPI_THREAD_SERIALIZED or better");
  st->serialize = level < MPI_THREAD_MULTIPLE;
  st->check(MPI_Comm_dup(MPI_COMM_WORLD, &st->comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(st->comm, &st->rank);
  MPI_Comm_size(st->comm, &st->size);
  void* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(st->comm, MPI_TAG_UB, &ub, &found);
  const long tag_ub = found != 0 ? *static_cast<int*>(ub) : 32767;
  SPILLWAY_EXPECTS(
      tag_ub >= (1L << 25) - 1,
      "this MPI allows tags up to " + std::to_string(tag_ub) + "; spillway needs 2^25 - 1");
  st->br = &br;
  if (br.is_live(MemoryType::DEVICE)) st->stream = OwningStream();
  return std::make_unique<MpiCommunicator>(std::move(st));
}

}  // namespace spillway
