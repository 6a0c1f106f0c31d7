// One endpoint of the libfabric backend and its thread (detail/fabric_lane.hpp).
//
// A batch goes out as fi_writemsg / fi_readmsg calls of up to four chunks each (as many as the
// provider's iov and RMA iov limits allow), posted with FI_MORE while more follow; what the
// provider refuses with -FI_EAGAIN stays queued and is posted again after the completion queue
// is polled. The imm travels as remote CQ data on the batch's last write. Where the provider
// places writes in order (FI_ORDER_WAW; tcp and shm do), the whole batch goes out at once and
// only the last write asks for delivery completion, which vouches for the batch; elsewhere the
// last write is held back until every other write of the batch has completed
// (FI_DELIVERY_COMPLETE where the provider offers it). Either way the target sees the imm only
// when all of the batch's bytes are in place, and the initiator's ticket ends then too.

#include "transfer/detail/fabric_lane.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

namespace spillway::transfer::detail {

namespace {

/// The most pieces one message carries (tcp and shm offer 4 iovs and 4 RMA iovs in 1.17).
constexpr std::size_t kMaxIov = 8;
/// A message takes more pieces only while it holds fewer bytes than this: larger chunks go
/// one per message, which pipelines better (tcp at 1 MiB, docs/decisions/transfer.md).
constexpr std::size_t kGroupBelow = std::size_t{256} << 10;
/// After the lane last did something it keeps polling without sleeping this long: shm has no
/// wait fd, and its target progresses peers' writes only when polled.
constexpr auto kSpinAfterActivity = std::chrono::milliseconds(20);
/// How long another thread waits for the lane's lock before it takes the lane as stuck (its
/// thread holds it for one pass of posting and polling); once stuck, not at all. Registrations
/// wait so while the engine's backend lock is held: a longer wait stopped the engine's worker
/// long enough for live peers to time out.
constexpr auto kLockWait = std::chrono::milliseconds(100);
/// How long a lane's end waits for its thread.
constexpr auto kJoinWait = std::chrono::milliseconds(1000);

/// Throws comm_error naming the call and libfabric's message when `rc` is an error.
void check(int rc, const char* call) {
  if (rc < 0) {
    SPILLWAY_FAIL(std::string("libfabric: ") + call + " failed: " + fi_strerror(-rc) + " (" +
                      std::to_string(rc) + ")",
                  comm_error);
  }
}

template <typename Fid>
void close_fid(Fid*& f) noexcept {
  if (f != nullptr) fi_close(&f->fid);
  f = nullptr;
}

/// The context of one posted write or read; fi_context2 first, as the provider expects.
struct Context {
  fi_context2 fi{};
  std::shared_ptr<Op> op;
  std::size_t chunks{0};  // the chunks this message ends
};

bool connection_error(int err) {
  return err == FI_ECONNREFUSED || err == FI_ECONNRESET || err == FI_ECONNABORTED ||
         err == FI_EHOSTUNREACH || err == FI_ENOTCONN || err == FI_EADDRNOTAVAIL ||
         err == FI_ETIMEDOUT || err == FI_EIO || err == EPIPE;
}

/// Whether a failed completion says the peer can no longer be reached. The tcp provider
/// ends the ops of a connection it lost as FI_ECANCELED, with the socket's errno as the
/// provider's errno (ENOTCONN, ECONNRESET, EPIPE); the engine never cancels an op itself.
bool peer_unreachable(const fi_cq_err_entry& err) {
  if (connection_error(err.err)) return true;
  if (err.err != FI_ECANCELED) return false;
  const int e = err.prov_errno < 0 ? -err.prov_errno : err.prov_errno;
  return e == ENOTCONN || e == ECONNRESET || e == EPIPE || e == ECONNABORTED || e == ECONNREFUSED ||
         e == EHOSTUNREACH || e == ETIMEDOUT;
}

/// fi_getinfo for an RDM endpoint with RMA of `o.provider`. The imm must not arrive before the
/// batch's bytes, and a ticket should end only once they are in place. Best: writes placed in
/// order (FI_ORDER_WAW) and completions that mean "placed" (FI_DELIVERY_COMPLETE): the batch
/// goes out at once and only its last write asks for delivery completion. Then either of the
/// two: without ordering, the last write (with the imm) is held back until the others have
/// completed. Else neither. shm asks for a counter of remote writes (FI_RMA_EVENT), which tells
/// a target without a wait fd that it is being written into, so that it keeps polling. With
/// requested keys (region ids) every lane of an engine gives a region the key it was exported
/// with.
fi_info* lane_info(const LaneOptions& o) {
  fi_info* hints = fi_allocinfo();
  SPILLWAY_EXPECTS(hints != nullptr, "libfabric: fi_allocinfo failed", comm_error);
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_ENDPOINT |
                                (o.requested_keys ? 0 : FI_MR_PROV_KEY);
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (o.tx_queue_depth > 0) hints->tx_attr->size = o.tx_queue_depth;
  hints->fabric_attr->prov_name = strdup(o.provider.c_str());
  const bool shm = o.provider == "shm";
  if (shm) {
    hints->addr_format = FI_ADDR_STR;
    hints->src_addr = strdup(o.name.c_str());
    hints->src_addrlen = o.name.size() + 1;
  }
  // tcp and verbs bind to the engine's address; shm and efa pick their own.
  const bool by_address = o.provider == "tcp" || o.provider == "verbs" || o.provider == "sockets";
  const char* node = by_address ? o.address.c_str() : nullptr;
  const std::uint64_t flags = by_address ? FI_SOURCE : 0;
  fi_info* info = nullptr;
  const auto getinfo = [&](std::uint64_t caps) {
    hints->caps = caps;
    int rc = -FI_ENODATA;
    for (const auto& [order, op_flags] :
         {std::pair<std::uint64_t, std::uint64_t>{FI_ORDER_WAW, FI_DELIVERY_COMPLETE},
          {0, FI_DELIVERY_COMPLETE},
          {FI_ORDER_WAW, 0},
          {0, 0}}) {
      hints->tx_attr->msg_order = order;
      hints->tx_attr->op_flags = op_flags;
      rc = fi_getinfo(FI_VERSION(1, 17), node, nullptr, flags, hints, &info);
      if (rc != -FI_ENODATA) break;
    }
    return rc;
  };
  const std::uint64_t caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  int rc = getinfo(shm ? caps | FI_RMA_EVENT : caps);
  if (shm && rc == -FI_ENODATA) rc = getinfo(caps);  // an shm without the counter
  fi_freeinfo(hints);
  SPILLWAY_EXPECTS(rc == 0 && info != nullptr,
                   "libfabric: provider '" + o.provider +
                       "' offers no RDM endpoint with RMA here (fi_getinfo: " +
                       std::string(fi_strerror(-rc)) + "); try tcp or shm",
                   comm_error);
  return info;
}

}  // namespace

class LaneState;

namespace {

/// The lanes whose threads never came back from the provider: kept, so that what they use is
/// still reachable (and not a leak to the sanitizers) while they spin.
std::vector<std::shared_ptr<LaneState>>& left_behind() {
  static auto* lanes = new std::vector<std::shared_ptr<LaneState>>;  // never destroyed
  return *lanes;
}
std::mutex& left_behind_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

}  // namespace

/// Everything a lane's thread uses: kept alive by that thread too, so that a thread stuck in
/// the provider outlives the Lane without touching freed memory.
class LaneState {
 public:
  LaneState(BackendHost& host, const LaneOptions& o)
      : host_{&host},
        provider_{o.provider},
        name_{o.name},
        requested_keys_{o.requested_keys},
        one_peer_{o.one_peer},
        posting_{!o.one_peer} {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    SPILLWAY_EXPECTS(wake_fd_ >= 0, "libfabric: eventfd failed", comm_error);
    try {
      info_ = lane_info(o);
      open(o);
    } catch (...) {
      close_all();
      throw;
    }
  }
  ~LaneState() { close_all(); }
  LaneState(const LaneState&) = delete;
  LaneState& operator=(const LaneState&) = delete;

  [[nodiscard]] std::vector<std::uint8_t> address() const { return address_; }

  LaneKey register_region(const Region& r) {
    auto lock = provider_lock("register memory");
    fi_mr_attr attr{};
    iovec iov{r.ptr, r.bytes};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    attr.requested_key = r.id;
    if (r.type == MemoryType::DEVICE) {
      SPILLWAY_EXPECTS((info_->caps & FI_HMEM) != 0,
                       "libfabric: provider " + provider_ +
                           " has no FI_HMEM here, so device memory cannot be registered "
                           "with it; register pinned host memory instead");
      attr.iface = FI_HMEM_CUDA;
      attr.device.cuda = r.device;
    }
    fid_mr* mr = nullptr;
    check(
        fi_mr_regattr(domain_, &attr, r.type == MemoryType::DEVICE ? FI_HMEM_DEVICE_ONLY : 0, &mr),
        "fi_mr_regattr");
    if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      const int b = fi_mr_bind(mr, &ep_->fid, 0);
      const int e = b == 0 ? fi_mr_enable(mr) : b;
      if (e != 0) {
        fi_close(&mr->fid);
        check(e, "fi_mr_bind/fi_mr_enable");
      }
    }
    const LaneKey key{fi_mr_key(mr), (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
                                         ? reinterpret_cast<std::uintptr_t>(r.ptr)
                                         : 0};
    if (requested_keys_ && key.key != r.id) {
      fi_close(&mr->fid);
      SPILLWAY_FAIL("libfabric: provider " + provider_ + " gave region " + std::to_string(r.id) +
                        " key " + std::to_string(key.key) + " instead of the key asked for",
                    comm_error);
    }
    mrs_[r.id] = {mr, fi_mr_desc(mr)};
    return key;
  }

  void deregister_region(std::uint64_t id) noexcept {
    const auto lock = try_provider_lock();
    if (!lock.owns_lock()) return;  // stuck: left as it is
    const auto it = mrs_.find(id);
    if (it == mrs_.end()) return;
    fi_close(&it->second.first->fid);
    mrs_.erase(it);
  }

  std::uint64_t add_peer(std::span<const std::uint8_t> address) {
    auto lock = provider_lock("add a peer");
    fi_addr_t addr = FI_ADDR_UNSPEC;
    const int n = fi_av_insert(av_, address.data(), 1, &addr, 0, nullptr);
    SPILLWAY_EXPECTS(n == 1, "libfabric: fi_av_insert refused the peer's address", comm_error);
    return addr;
  }

  void remove_peer(std::uint64_t backend_peer) noexcept {
    const auto lock = try_provider_lock();
    if (!lock.owns_lock()) return;
    fi_addr_t addr = backend_peer;
    fi_av_remove(av_, &addr, 1, 0);
  }

  void post(std::shared_ptr<Op> op) {
    {
      std::lock_guard lock(inbox_mutex_);
      inbox_.push_back(std::move(op));
    }
    wake();
  }

  void start_posting(std::span<const std::uint8_t> address) {
    if (posting_.load()) return;
    only_peer_ = add_peer(address);  // (read by the thread once it sees posting_)
    posting_ = true;
    wake();
  }

  void add_counters(EngineCounters& c) const {
    c.chunks_posted += chunks_posted_.load(std::memory_order_relaxed);
    c.eagain += eagain_.load(std::memory_order_relaxed);
  }

  /// The thread's loop: posts and polls while there is work, else sleeps on the completion
  /// queue's wait fd (or, without one, polls once a millisecond) until woken.
  void run() {
    tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
    auto last_activity = Clock::now();
    while (!stop_.load()) {
      bool active = false;
      try {
        std::lock_guard lock(mutex_);
        active = progress();
      } catch (const std::exception& e) {
        // A provider failure ends what is in flight on this lane rather than the process.
        SPILLWAY_LOG(error, "transfer: libfabric/" + provider_ + ": " + e.what());
        std::lock_guard lock(mutex_);
        fail_all(e.what());
      }
      const auto now = Clock::now();
      if (active) {
        last_activity = now;
        continue;
      }
      if (now - last_activity < kSpinAfterActivity) {
        std::this_thread::yield();  // on 2 cores a spinning target kept writers off the CPU
        continue;
      }
      sleep();
    }
    {
      std::lock_guard lock(exit_mutex_);
      exited_ = true;
    }
    exit_cv_.notify_all();
  }

  void retire() noexcept {
    stop_ = true;
    wake();
  }
  void demote() noexcept {
    const sched_param none{};
    if (const pid_t tid = tid_.load(); tid > 0) ::sched_setscheduler(tid, SCHED_IDLE, &none);
  }
  [[nodiscard]] bool stopped() noexcept {
    std::lock_guard lock(exit_mutex_);
    return exited_;
  }

  /// Stops the thread; whether it left run() within `wait`. A thread that did not is cut off
  /// from the engine (it calls back nothing once it returns).
  bool stop(std::chrono::milliseconds wait) {
    retire();
    std::unique_lock lock(exit_mutex_);
    if (exit_cv_.wait_for(lock, wait, [&] { return exited_; })) return true;
    std::lock_guard host_lock(host_mutex_);
    host_ = nullptr;
    return false;
  }

  [[nodiscard]] const std::string& provider() const noexcept { return provider_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  /// The lane's lock, for a call from another thread; empty when the lane is stuck.
  std::unique_lock<std::timed_mutex> try_provider_lock() {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (stuck_.load() ? lock.try_lock() : lock.try_lock_for(kLockWait)) {
      stuck_ = false;
    } else {
      stuck_ = true;
    }
    return lock;
  }
  std::unique_lock<std::timed_mutex> provider_lock(const char* what) {
    auto lock = try_provider_lock();
    SPILLWAY_EXPECTS(lock.owns_lock(),
                     "libfabric/" + provider_ + ": cannot " + what +
                         ": an endpoint has not come back from the provider (a dead peer's lock?)",
                     comm_error);
    return lock;
  }

  void wake() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof(one));
  }

  void sleep() {
    std::array<pollfd, 2> fds{pollfd{wake_fd_, POLLIN, 0}, pollfd{wait_fd_, POLLIN, 0}};
    nfds_t n = 1;
    int timeout = 1;  // without a wait fd, progress happens only when polled
    if (wait_fd_ >= 0) {
      std::lock_guard lock(mutex_);
      fid* f = &cq_->fid;
      if (fi_trywait(fabric_, &f, 1) != FI_SUCCESS) return;
      n = 2;
      timeout = 50;
    }
    if (::poll(fds.data(), n, timeout) > 0 && fds[0].revents != 0) {
      std::uint64_t v = 0;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &v, sizeof(v));
    }
  }

  /// One pass: what was posted to the lane, completions, then posting. Whether to go on
  /// without sleeping.
  bool progress() {
    {
      std::lock_guard lock(inbox_mutex_);
      while (!inbox_.empty()) {
        queue_.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
    }
    bool did = poll_completions();
    if (!posting_.load()) return did;
    did = post_queued() || did;
    if (written_ != nullptr) {  // peers' writes placed here since the last look
      const std::uint64_t n = fi_cntr_read(written_);
      did = did || n != written_seen_;
      written_seen_ = n;
    }
    // Without a wait fd, writes in flight complete only while polled.
    return did || !queue_.empty() || (wait_fd_ < 0 && inflight_total() > 0);
  }

  void fail_all(const std::string& why) {
    for (auto& c : all_) {
      if (c->op) c->op->ticket->finish(Status::error, why);
    }
    for (auto& op : queue_) op->ticket->finish(Status::error, why);
  }

  void deliver_imm(std::uint32_t imm) {
    std::lock_guard lock(host_mutex_);
    if (host_ != nullptr) host_->deliver_imm(imm);
  }

  void open(const LaneOptions& o) {
    check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
      cq_attr.wait_obj = FI_WAIT_NONE;
      check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
    } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
      wait_fd_ = -1;
    }
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    if ((info_->caps & FI_RMA_EVENT) != 0) {
      fi_cntr_attr cntr_attr{};
      cntr_attr.events = FI_CNTR_EVENTS_COMP;
      cntr_attr.wait_obj = FI_WAIT_NONE;
      check(fi_cntr_open(domain_, &cntr_attr, &written_, nullptr), "fi_cntr_open");
      check(fi_ep_bind(ep_, &written_->fid, FI_REMOTE_WRITE | FI_REMOTE_READ), "fi_ep_bind(cntr)");
    }
    check(fi_enable(ep_), "fi_enable");
    std::size_t len = 0;
    fi_getname(&ep_->fid, nullptr, &len);
    address_.resize(len);
    check(fi_getname(&ep_->fid, address_.data(), &len), "fi_getname");
    address_.resize(len);
    max_msg_ = std::max<std::size_t>(info_->ep_attr->max_msg_size, 4096);
    inject_ = info_->tx_attr->inject_size;
    iov_per_msg_ = std::clamp<std::size_t>(
        std::min(info_->tx_attr->iov_limit, info_->tx_attr->rma_iov_limit), 1, kMaxIov);
    tx_size_ = std::max<std::size_t>(info_->tx_attr->size, 1);
    ordered_ = (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0;
    delivery_complete_ = (info_->tx_attr->op_flags & FI_DELIVERY_COMPLETE) != 0;
    SPILLWAY_EXPECTS(info_->domain_attr->cq_data_size >= 4,
                     "libfabric: provider " + provider_ + " carries no 4-byte remote CQ data",
                     comm_error);
    SPILLWAY_LOG(debug, "libfabric: " + std::string(info_->fabric_attr->prov_name) + " tx queue " +
                            std::to_string(tx_size_) + ", " + std::to_string(iov_per_msg_) +
                            " pieces a message, inject " + std::to_string(inject_) +
                            ", largest message " + std::to_string(max_msg_) +
                            (ordered_ ? ", writes ordered" : ", writes unordered") +
                            (delivery_complete_ ? ", delivery complete" : ", transmit complete") +
                            (wait_fd_ >= 0 ? ", wait fd" : ", polled") + " (tx depth asked " +
                            std::to_string(o.tx_queue_depth) + ")");
  }

  void close_all() noexcept {
    for (auto& [id, mr] : mrs_) fi_close(&mr.first->fid);
    mrs_.clear();
    close_fid(ep_);
    close_fid(written_);
    close_fid(av_);
    close_fid(cq_);
    close_fid(domain_);
    close_fid(fabric_);
    if (info_ != nullptr) fi_freeinfo(info_);
    info_ = nullptr;
    if (wake_fd_ >= 0) ::close(wake_fd_);
    wake_fd_ = -1;
  }

  Context* acquire(std::shared_ptr<Op> op) {
    if (free_.empty()) {
      all_.push_back(std::make_unique<Context>());
      free_.push_back(all_.back().get());
    }
    Context* c = free_.back();
    free_.pop_back();
    c->op = std::move(op);
    return c;
  }
  void release(Context* c) {
    c->op.reset();
    free_.push_back(c);
  }

  /// Ends `op` well once everything of it has been posted and completed.
  static void maybe_done(Op& op) {
    if (op.next == op.chunks.size() && op.inflight == 0) op.ticket->finish(Status::ok);
  }

  bool poll_completions();
  void read_error();
  bool post_queued();
  int post_some(const std::shared_ptr<Op>& sp);
  [[nodiscard]] std::size_t inflight_total() const noexcept { return all_.size() - free_.size(); }
  /// Where `op` goes: the engine's address of its peer, or a lane of one peer's own.
  [[nodiscard]] std::uint64_t addr_of(const Op& op) const noexcept {
    return one_peer_ ? only_peer_ : op.backend_peer;
  }

  std::mutex host_mutex_;
  BackendHost* host_;  // null once the lane is cut off (stop)
  std::string provider_;
  std::string name_;  // shm: the endpoint's region
  bool requested_keys_;
  bool one_peer_;
  std::uint64_t only_peer_{0};  // a lane of one peer: its address, once posting_
  std::atomic<bool> posting_;
  std::timed_mutex mutex_;          // over every provider call of the lane
  std::atomic<bool> stuck_{false};  // another thread found mutex_ held for over kLockWait
  std::atomic<bool> stop_{false};
  std::atomic<pid_t> tid_{0};  // the thread's, for demote()
  std::mutex exit_mutex_;
  std::condition_variable exit_cv_;
  bool exited_{false};
  int wake_fd_{-1};

  fi_info* info_{nullptr};
  fid_fabric* fabric_{nullptr};
  fid_domain* domain_{nullptr};
  fid_cq* cq_{nullptr};
  fid_av* av_{nullptr};
  fid_ep* ep_{nullptr};
  fid_cntr* written_{nullptr};  // peers' writes and reads here (FI_RMA_EVENT), or none
  std::uint64_t written_seen_{0};
  int wait_fd_{-1};
  std::vector<std::uint8_t> address_;
  std::map<std::uint64_t, std::pair<fid_mr*, void*>> mrs_;  // by region id: handle, descriptor
  std::size_t max_msg_{0};
  std::size_t iov_per_msg_{1};  // pieces per message: the provider's iov and rma_iov limits
  std::size_t inject_{0};       // the provider's inject size
  std::size_t tx_size_{1};
  bool ordered_{false};
  bool delivery_complete_{false};

  std::mutex inbox_mutex_;
  std::deque<std::shared_ptr<Op>> inbox_;                    // posted, not yet taken by the thread
  std::deque<std::shared_ptr<Op>> queue_;                    // the thread's: not yet all posted
  std::unordered_map<std::uint64_t, std::size_t> per_peer_;  // posted, not completed
  std::vector<std::unique_ptr<Context>> all_;
  std::vector<Context*> free_;
  std::atomic<std::uint64_t> chunks_posted_{0};
  std::atomic<std::uint64_t> eagain_{0};
};

bool LaneState::poll_completions() {
  bool did = false;
  fi_cq_data_entry entries[64];
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = fi_cq_read(cq_, entries, 64);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      read_error();
      did = true;
      continue;
    }
    check(static_cast<int>(n < 0 ? n : 0), "fi_cq_read");
    did = true;
    for (ssize_t i = 0; i < n; ++i) {
      const auto& e = entries[i];
      if ((e.flags & FI_REMOTE_CQ_DATA) && !(e.flags & (FI_WRITE | FI_READ))) {
        deliver_imm(static_cast<std::uint32_t>(e.data));  // a peer's batch landed
        continue;
      }
      auto* c = static_cast<Context*>(e.op_context);
      if (c == nullptr) continue;
      Op& op = *c->op;
      --op.inflight;
      --per_peer_[addr_of(op)];
      op.completed += c->chunks;
      maybe_done(op);
      release(c);
    }
    if (n < 64) break;
  }
  return did;
}

void LaneState::read_error() {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(cq_, &err, 0) != 1) return;
  if ((err.flags & FI_REMOTE_CQ_DATA) && !(err.flags & (FI_WRITE | FI_READ))) return;
  auto* c = static_cast<Context*>(err.op_context);
  if (c == nullptr) return;
  Op& op = *c->op;
  --op.inflight;
  --per_peer_[addr_of(op)];
  const char* text = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
  const std::string why = "libfabric/" + provider_ + ": a " + (op.is_read ? "read" : "write") +
                          " failed: " + fi_strerror(err.err) + " (" + (text ? text : "") + ")";
  op.ticket->finish(peer_unreachable(err) ? Status::peer_gone : Status::error, why);
  release(c);
}

bool LaneState::post_queued() {
  bool did = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    Op& op = **it;
    if (op.ticket->ended()) {
      if (op.inflight == 0) {
        it = queue_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    const int r = post_some(*it);
    did = did || r > 0;
    if (r < 0) break;  // the provider's queue is full
    if (op.next == op.chunks.size()) {
      it = queue_.erase(it);  // all posted; completions end it
      continue;
    }
    ++it;
  }
  return did;
}

/// Posts `op`'s next pieces: as many as the transmit queue has room for, the last of them
/// without FI_MORE. @returns the count posted, or -1 when the provider refused one
int LaneState::post_some(const std::shared_ptr<Op>& sp) {
  Op& op = *sp;
  int posted = 0;
  // A peer may hold at most a quarter of the transmit queue: a peer that dies with writes
  // outstanding (which a provider such as shm never completes) leaves room for the others.
  const std::uint64_t addr = addr_of(op);
  std::size_t& mine = per_peer_[addr];
  const std::size_t cap = std::max<std::size_t>(1, tx_size_ / 4);
  const std::size_t total = inflight_total();
  const std::size_t room =
      std::min(tx_size_ > total ? tx_size_ - total : 0, cap > mine ? cap - mine : 0);
  if (room == 0) return 0;
  const auto local_mr = mrs_.find(op.local.region.id);
  void* const local_desc = local_mr == mrs_.end() ? nullptr : local_mr->second.second;
  for (std::size_t burst = 0; op.next < op.chunks.size() && burst < room; ++burst) {
    // One message carries up to iov_per_msg_ pieces (chunks, or parts of chunks over the
    // largest message): the provider's cost is per message, not per byte.
    std::array<iovec, kMaxIov> iov{};
    std::array<void*, kMaxIov> desc{};
    std::array<fi_rma_iov, kMaxIov> rma{};
    std::size_t count = 0;
    std::size_t bytes = 0;
    std::size_t next = op.next;
    std::size_t next_byte = op.next_byte;
    bool last_piece = false;
    while (count < iov_per_msg_ && next < op.chunks.size() && bytes < kGroupBelow) {
      const Chunk& c = op.chunks[next];
      const std::size_t length = std::min(c.length - next_byte, max_msg_);
      if (count > 0 && bytes + length > max_msg_) break;
      // A piece the provider can inject goes alone: grouped, it lost that fast path.
      const bool injectable = length <= inject_;
      if (count > 0 && injectable) break;
      const bool last = next + 1 == op.chunks.size() && next_byte + length == c.length;
      // Unless writes are placed in order, the imm goes after the rest have completed.
      if (last && op.imm && !(ordered_ && !op.is_read) && (op.inflight > 0 || count > 0)) break;
      const std::size_t local_at = (op.is_read ? c.dst_offset : c.src_offset) + next_byte;
      const std::size_t remote_at = (op.is_read ? c.src_offset : c.dst_offset) + next_byte;
      iov[count] = {static_cast<std::uint8_t*>(op.local.region.ptr) + local_at, length};
      desc[count] = local_desc;
      rma[count] = {op.remote_key.address + remote_at, length, op.remote_key.key};
      ++count;
      bytes += length;
      last_piece = last;
      next_byte += length;
      if (next_byte == c.length) {
        ++next;
        next_byte = 0;
      }
      if (injectable) break;
    }
    if (count == 0) break;  // the imm's write waits for the others
    const bool more = !last_piece && burst + 1 < room;
    Context* ctx = acquire(sp);
    ctx->chunks = next - op.next;
    fi_msg_rma msg{};
    msg.msg_iov = iov.data();
    msg.desc = desc.data();
    msg.iov_count = count;
    msg.addr = addr;
    msg.rma_iov = rma.data();
    msg.rma_iov_count = count;
    msg.context = &ctx->fi;
    std::uint64_t flags = FI_COMPLETION | (more ? FI_MORE : 0);
    // In order, the last write's delivery vouches for the batch; else each write's does.
    if (!op.is_read && delivery_complete_ && (last_piece || !ordered_)) {
      flags |= FI_DELIVERY_COMPLETE;
    }
    if (last_piece && op.imm) {
      msg.data = *op.imm;
      flags |= FI_REMOTE_CQ_DATA;
    }
    const ssize_t rc = op.is_read ? fi_readmsg(ep_, &msg, flags) : fi_writemsg(ep_, &msg, flags);
    if (rc == -FI_EAGAIN) {
      release(ctx);
      eagain_.fetch_add(1, std::memory_order_relaxed);
      return -1;
    }
    if (rc != 0) {
      release(ctx);
      op.ticket->finish(connection_error(static_cast<int>(-rc)) ? Status::peer_gone : Status::error,
                        "libfabric/" + provider_ + ": " +
                            (op.is_read ? "fi_readmsg" : "fi_writemsg") +
                            " failed: " + fi_strerror(static_cast<int>(-rc)));
      return posted;
    }
    ++op.inflight;
    ++mine;
    ++posted;
    chunks_posted_.fetch_add(count, std::memory_order_relaxed);
    op.next = next;
    op.next_byte = next_byte;
  }
  return posted;
}

// --- Lane -----------------------------------------------------------------------------------

Lane::Lane(BackendHost& host, const LaneOptions& options)
    : state_{std::make_shared<LaneState>(host, options)} {
  thread_ = std::thread([s = state_] { s->run(); });
}

Lane::~Lane() {
  if (state_->stop(kJoinWait)) {
    thread_.join();
    return;
  }
  SPILLWAY_LOG(error, "transfer: libfabric/" + state_->provider() +
                          ": an endpoint's thread has not come back from the provider for " +
                          std::to_string(kJoinWait.count()) +
                          " ms (spinning on a lock of a dead peer?): left behind, with its "
                          "endpoint, at idle priority");
  state_->demote();
  thread_.detach();  // it holds the state, and so does the list of lanes left behind
  {
    std::lock_guard lock(left_behind_mutex());
    left_behind().push_back(state_);
  }
  // Its shared-memory region would outlive the process; its thread keeps its own mapping.
  if (!state_->name().empty()) ::shm_unlink(state_->name().c_str());
}

std::vector<std::uint8_t> Lane::address() const {
  return state_->address();
}
LaneKey Lane::register_region(const Region& region) {
  return state_->register_region(region);
}
void Lane::deregister_region(std::uint64_t region_id) noexcept {
  state_->deregister_region(region_id);
}
std::uint64_t Lane::add_peer(std::span<const std::uint8_t> address) {
  return state_->add_peer(address);
}
void Lane::remove_peer(std::uint64_t backend_peer) noexcept {
  state_->remove_peer(backend_peer);
}
void Lane::post(std::shared_ptr<Op> op) {
  state_->post(std::move(op));
}
void Lane::add_counters(EngineCounters& c) const {
  state_->add_counters(c);
}
void Lane::start_posting(std::span<const std::uint8_t> address) {
  state_->start_posting(address);
}
void Lane::retire() noexcept {
  state_->retire();
}
void Lane::demote() noexcept {
  state_->demote();
}
bool Lane::stopped() const noexcept {
  return state_->stopped();
}

}  // namespace spillway::transfer::detail
