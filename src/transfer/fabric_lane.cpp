// One endpoint of the libfabric backend and its thread (detail/fabric_lane.hpp): the endpoint
// (fabric_endpoint.cpp) and its batches on the wire (fabric_batches.cpp) are the thread's; other
// threads register memory and add peers under the lane's lock, which they wait for a bounded
// time.

#include "transfer/detail/fabric_lane.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "transfer/detail/fabric_batches.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace spillway::transfer::detail {

namespace {

/// After the lane last did something it keeps polling without sleeping this long: shm has no
/// wait fd, and its target progresses peers' writes only when polled.
constexpr auto kSpinAfterActivity = std::chrono::milliseconds(20);
/// A pass of posting and polling (the lane's thread holds its lock for one) that has lasted
/// this long is not coming back: another thread waiting for the lock then takes the lane as
/// stuck, and later ones do not wait at all. A busy pass is not stuck: tcp moving 16 MiB
/// messages between three processes on two cores held the lock for over 100 ms.
constexpr auto kStuckAfter = std::chrono::milliseconds(2000);
/// How long a lane's end waits for its thread.
constexpr auto kJoinWait = std::chrono::milliseconds(1000);

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
        name_{o.name},
        posting_{!o.one_peer},
        endpoint_{o},
        batches_{endpoint_, [this](std::uint32_t imm) { deliver_imm(imm); }, o.one_peer} {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    SPILLWAY_EXPECTS(wake_fd_ >= 0, "libfabric: eventfd failed", comm_error);
  }
  ~LaneState() { ::close(wake_fd_); }
  LaneState(const LaneState&) = delete;
  LaneState& operator=(const LaneState&) = delete;

  [[nodiscard]] std::vector<std::uint8_t> address() const { return endpoint_.address; }

  LaneKey register_region(const Region& r) {
    const auto lock = provider_lock("register memory");
    return endpoint_.register_region(r);
  }

  void deregister_region(std::uint64_t id) noexcept {
    const auto lock = try_provider_lock();
    if (lock.owns_lock()) endpoint_.deregister_region(id);  // (stuck: left as it is)
  }

  std::uint64_t add_peer(std::span<const std::uint8_t> address) {
    const auto lock = provider_lock("add a peer");
    return endpoint_.add_peer(address);
  }

  void remove_peer(std::uint64_t backend_peer) noexcept {
    const auto lock = try_provider_lock();
    if (lock.owns_lock()) endpoint_.remove_peer(backend_peer);
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
    {
      const auto lock = provider_lock("add a peer");
      batches_.set_peer(endpoint_.add_peer(address));
    }
    posting_ = true;
    wake();
  }

  void add_counters(EngineCounters& c) const { batches_.add_counters(c); }

  /// The thread's loop: posts and polls while there is work, else sleeps on the completion
  /// queue's wait fd (or, without one, polls once a millisecond) until woken.
  void run() {
    tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
    auto last_activity = Clock::now();
    while (!stop_.load()) {
      bool active = false;
      try {
        std::lock_guard lock(mutex_);
        pass_began_ = now_ns();
        active = progress();
        pass_began_ = 0;
      } catch (const std::exception& e) {
        pass_began_ = 0;
        // A provider failure ends what is in flight on this lane rather than the process.
        SPILLWAY_LOG(error, "transfer: libfabric/" + endpoint_.provider + ": " + e.what());
        std::lock_guard lock(mutex_);
        batches_.fail_all(e.what());
      }
      // A thread that waits for the lock (a registration) gets it between two passes.
      for (int i = 0; i < 1000 && waiters_.load() > 0; ++i) std::this_thread::yield();
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
    // Under exit_mutex_ and only while the thread has not left run(): its tid is then still
    // its own, not one the system gave again to another thread.
    std::lock_guard lock(exit_mutex_);
    const sched_param none{};
    if (const pid_t tid = tid_.load(); tid > 0 && !exited_) {
      ::sched_setscheduler(tid, SCHED_IDLE, &none);
    }
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

  [[nodiscard]] const std::string& provider() const noexcept { return endpoint_.provider; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  /// The lane's lock, for a call from another thread; empty when the lane is stuck.
  std::unique_lock<std::mutex> try_provider_lock() {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (stuck_.load()) {
      stuck_ = !lock.try_lock();
      return lock;
    }
    // Polled, not timed: ThreadSanitizer does not see a timed mutex's lock (it has no
    // interceptor for pthread_mutex_clocklock) and then reports its unlock.
    waiters_.fetch_add(1);
    while (!lock.try_lock()) {
      const std::int64_t began = pass_began_.load();
      if (began != 0 && now_ns() - began > ns(kStuckAfter)) {
        stuck_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    waiters_.fetch_sub(1);
    return lock;
  }
  static std::int64_t now_ns() noexcept { return ns(Clock::now().time_since_epoch()); }
  static std::int64_t ns(Clock::duration d) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  }
  std::unique_lock<std::mutex> provider_lock(const char* what) {
    auto lock = try_provider_lock();
    SPILLWAY_EXPECTS(lock.owns_lock(),
                     "libfabric/" + endpoint_.provider + ": cannot " + what +
                         ": an endpoint has not come back from the provider (a dead peer's lock?)",
                     comm_error);
    return lock;
  }

  void wake() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof(one));
  }

  void sleep() {
    std::array<pollfd, 2> fds{pollfd{wake_fd_, POLLIN, 0}, pollfd{endpoint_.wait_fd, POLLIN, 0}};
    nfds_t n = 1;
    int timeout = 1;  // without a wait fd, progress happens only when polled
    if (endpoint_.wait_fd >= 0) {
      std::lock_guard lock(mutex_);
      if (!endpoint_.may_sleep()) return;
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
        batches_.push(std::move(inbox_.front()));
        inbox_.pop_front();
      }
    }
    bool did = batches_.poll_completions();
    if (!posting_.load()) return did;
    did = batches_.post_queued() || did;
    if (endpoint_.written != nullptr) {  // peers' writes placed here since the last look
      const std::uint64_t n = fi_cntr_read(endpoint_.written);
      did = did || n != written_seen_;
      written_seen_ = n;
    }
    // Without a wait fd, writes in flight complete only while polled.
    return did || batches_.queued() || (endpoint_.wait_fd < 0 && batches_.inflight() > 0);
  }

  void deliver_imm(std::uint32_t imm) {
    std::lock_guard lock(host_mutex_);
    if (host_ != nullptr) host_->deliver_imm(imm);
  }

  std::mutex host_mutex_;
  BackendHost* host_;  // null once the lane is cut off (stop)
  std::string name_;   // shm: the endpoint's region
  std::atomic<bool> posting_;
  std::mutex mutex_;                         // over every provider call of the lane
  std::atomic<bool> stuck_{false};           // another thread found a pass longer than kStuckAfter
  std::atomic<std::int64_t> pass_began_{0};  // the current pass's start (ns), or 0
  std::atomic<int> waiters_{0};              // threads waiting for mutex_
  std::atomic<bool> stop_{false};
  std::atomic<pid_t> tid_{0};  // the thread's, for demote()
  std::mutex exit_mutex_;
  std::condition_variable exit_cv_;
  bool exited_{false};
  int wake_fd_{-1};
  std::uint64_t written_seen_{0};
  std::mutex inbox_mutex_;
  std::deque<std::shared_ptr<Op>> inbox_;  // posted, not yet taken by the thread
  FabricEndpoint endpoint_;
  FabricBatches batches_;
};

// --- Lane -----------------------------------------------------------------------------------

Lane::Lane(BackendHost& host, const LaneOptions& options)
    : state_{std::make_shared<LaneState>(host, options)} {
  if (options.threaded) thread_ = std::thread([s = state_] { s->run(); });
}

Lane::~Lane() {
  if (!thread_.joinable()) return;
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
void Lane::start_posting(std::span<const std::uint8_t> address) {
  state_->start_posting(address);
}
void Lane::add_counters(EngineCounters& c) const {
  state_->add_counters(c);
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
