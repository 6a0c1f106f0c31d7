#include <spillway/comm/local.hpp>
#include <spillway/comm/single.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/event.hpp>
#include <spillway/memory/buffer_resource.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace spillway {

namespace detail {

class LocalRequest;

/// The unmatched requests of one receiving rank, queued by (sending rank, tag) in posting order:
/// matching looks at one queue, not at every request (a shuffle of many partitions has
/// thousands in flight).
class RequestQueues {
 public:
  void push(Rank origin, Tag tag, std::shared_ptr<LocalRequest> r) {
    queues_[key(origin, tag)].push_back(std::move(r));
  }
  /// The oldest request from `origin` with `tag`, taken out; null when there is none.
  std::shared_ptr<LocalRequest> take(Rank origin, Tag tag) {
    auto it = queues_.find(key(origin, tag));
    if (it == queues_.end()) return nullptr;
    auto r = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
    return r;
  }
  /// Takes `r` out if it is still queued.
  void erase(Rank origin, Tag tag, const LocalRequest* r) {
    auto it = queues_.find(key(origin, tag));
    if (it == queues_.end()) return;
    auto& q = it->second;
    for (auto e = q.begin(); e != q.end(); ++e) {
      if (e->get() == r) {
        q.erase(e);
        break;
      }
    }
    if (q.empty()) queues_.erase(it);
  }

 private:
  static std::uint64_t key(Rank origin, Tag tag) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(origin)) << 32) | tag.value();
  }
  std::unordered_map<std::uint64_t, std::deque<std::shared_ptr<LocalRequest>>> queues_;
};

/// What the ranks of one group share: the unmatched sends and receives, the small messages,
/// the barrier and who has left.
struct LocalHub {
  explicit LocalHub(int n)
      : nranks{n}, gone(static_cast<std::size_t>(n)), pending(n), posted(n), messages(n) {}
  const int nranks;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::atomic<bool>> gone;
  // Indexed by the receiving rank.
  std::vector<RequestQueues> pending;  // sends waiting for a receive
  std::vector<RequestQueues> posted;   // receives waiting for a send
  std::vector<std::deque<std::pair<Tag, Message>>> messages;
  std::size_t barrier_waiting{0};
  std::uint64_t barrier_generation{0};
  /// Per GPU, the stream of the copies into (or out of) its memory: apart from the ranks' own
  /// streams, so a transfer does not wait behind a rank's kernels, nor they behind it.
  std::vector<OwningStream> copy_streams;
};

/// One side of a transfer. Once matched, both sides share the copy's completion.
class LocalRequest final : public Request {
 public:
  LocalRequest(bool is_send, Rank self, Rank peer, Tag tag, Buffer* buffer,
               std::shared_ptr<LocalHub> hub)
      : Request(is_send, peer, tag, buffer->size()),
        self{self},
        buffer{buffer},
        hub_{std::move(hub)} {}

  bool progress() override {
    const int s = state.load(std::memory_order_acquire);
    if (s == failed) SPILLWAY_FAIL(error, comm_error);
    if (s == copying) {
      if (!event->is_complete()) return false;
      state.store(done, std::memory_order_release);
      return true;
    }
    if (s == done) return true;
    if (s == matched) return false;  // the copy is being issued
    if (hub_->gone[static_cast<std::size_t>(peer)].load()) {
      // Matched meanwhile? Look again under the lock, where matching happens.
      std::lock_guard lock(hub_->mutex);
      if (state.load() == queued) {
        SPILLWAY_FAIL("rank " + std::to_string(peer) + " left the communicator before the " +
                          describe() + " was matched",
                      comm_error);
      }
    }
    return false;
  }

  bool cancel() noexcept override {
    {
      std::lock_guard lock(hub_->mutex);
      if (state.load() == queued) {
        if (is_send) {
          hub_->pending[static_cast<std::size_t>(peer)].erase(self, tag, this);
        } else {
          hub_->posted[static_cast<std::size_t>(self)].erase(peer, tag, this);
        }
        return true;
      }
    }
    while (state.load() == matched) std::this_thread::yield();  // the copy is being issued
    if (state.load() == copying) {
      try {
        event->synchronize();
      } catch (...) {  // nothing better to do in a destructor path
      }
    }
    return true;
  }

  static constexpr int queued = 0, matched = 1, copying = 2, done = 3, failed = 4;
  const Rank self;
  Buffer* const buffer;
  std::atomic<int> state{queued};
  Event ready;  // the buffer's stream when posted: its allocation and pending writes
  std::shared_ptr<Event> event;
  std::string error;

 private:
  std::shared_ptr<LocalHub> hub_;
};

namespace {

/// Sets the current device for the scope (no-op without a GPU).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (device < 0) return;
    old_ = cuda::current_device();
    if (old_ != device) cuda::set_device(device);
  }
  ~DeviceScope() {
    if (old_ >= 0) {
      try {
        cuda::set_device(old_);
      } catch (...) {
      }
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int old_{-1};
};

/// Moves the bytes of a matched pair (outside the hub lock).
void transfer(LocalHub& hub, LocalRequest& send, LocalRequest& recv) {
  if (send.bytes != recv.bytes) {
    const std::string msg = "size mismatch: rank " + std::to_string(send.self) + " sent " +
                            std::to_string(send.bytes) + " bytes with " + to_string(send.tag) +
                            " but rank " + std::to_string(recv.self) + " posted a receive of " +
                            std::to_string(recv.bytes);
    send.error = recv.error = msg;
    send.state.store(LocalRequest::failed);
    recv.state.store(LocalRequest::failed);
    return;
  }
  Buffer& src = *send.buffer;
  Buffer& dst = *recv.buffer;
  const bool gpu = src.mem_type() == MemoryType::DEVICE || dst.mem_type() == MemoryType::DEVICE;
  if (!gpu || send.bytes == 0) {
    send.ready.synchronize();  // pinned buffers may have GPU work pending
    recv.ready.synchronize();
    if (send.bytes > 0) std::memcpy(dst.data(), src.data(), send.bytes);
    send.state.store(LocalRequest::done, std::memory_order_release);
    recv.state.store(LocalRequest::done, std::memory_order_release);
    return;
  }
  // On the copy stream of the GPU of the side in device memory, the sender's if both are (a
  // push: NVLink writes ran 5-10% faster than reads of the peer's memory, bench/NOTES.md),
  // after what was queued on both buffers' streams when they were posted.
  const Buffer& owner = src.mem_type() == MemoryType::DEVICE ? src : dst;
  const int device = owner.resource().device();
  DeviceScope scope(device);
  const Stream stream = hub.copy_streams.at(static_cast<std::size_t>(device));
  send.ready.wait_on(stream);
  recv.ready.wait_on(stream);
  send.ready = Event{};  // (back to the pool now, not when the requests go)
  recv.ready = Event{};
  auto event = std::make_shared<Event>();
  cuda::memcpy_async(dst.data(), src.data(), send.bytes, stream);
  event->record(stream);
  send.event = recv.event = event;
  send.state.store(LocalRequest::copying, std::memory_order_release);
  recv.state.store(LocalRequest::copying, std::memory_order_release);
}

}  // namespace

}  // namespace detail

std::vector<std::unique_ptr<Communicator>> LocalCommunicator::create(int nranks) {
  SPILLWAY_EXPECTS(nranks >= 1, "a local communicator needs at least one rank");
  const int gpus = cuda::device_count();
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a != b) cuda::enable_peer_access(a, b);
    }
  }
  auto hub = std::make_shared<detail::LocalHub>(nranks);
  for (int d = 0; d < gpus; ++d) {
    detail::DeviceScope scope(d);
    hub->copy_streams.emplace_back();
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (Rank r = 0; r < nranks; ++r) out.push_back(std::make_unique<LocalCommunicator>(hub, r));
  return out;
}

int LocalCommunicator::device_of(Rank rank) noexcept {
  const int gpus = cuda::device_count();
  return gpus > 0 ? rank % gpus : -1;
}

std::unique_ptr<Communicator> make_single_communicator() {
  return std::move(LocalCommunicator::create(1).front());
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<detail::LocalHub> hub, Rank rank)
    : Communicator(rank, hub->nranks), hub_{std::move(hub)} {}

LocalCommunicator::~LocalCommunicator() {
  leave();
}

void LocalCommunicator::leave() noexcept {
  hub_->gone[static_cast<std::size_t>(rank())].store(true);
  hub_->cv.notify_all();
}

bool LocalCommunicator::do_has_left(Rank peer) const noexcept {
  return hub_->gone[static_cast<std::size_t>(peer)].load();
}

std::unique_ptr<Future> LocalCommunicator::do_send(std::unique_ptr<Buffer> buffer, Rank dst,
                                                   Tag tag) {
  auto req = std::make_shared<detail::LocalRequest>(true, rank(), dst, tag, buffer.get(), hub_);
  if (buffer->mem_type() != MemoryType::HOST) {  // the copy waits for writes queued on its stream
    buffer->wait();
    req->ready.record(buffer->stream());
  }
  return post(std::move(req), std::move(buffer));
}

std::unique_ptr<Future> LocalCommunicator::do_recv(Rank src, Tag tag,
                                                   std::unique_ptr<Buffer> buffer) {
  auto req = std::make_shared<detail::LocalRequest>(false, rank(), src, tag, buffer.get(), hub_);
  if (buffer->mem_type() != MemoryType::HOST) req->ready.record(buffer->stream());  // allocation
  return post(std::move(req), std::move(buffer));
}

std::unique_ptr<Future> LocalCommunicator::post(std::shared_ptr<detail::LocalRequest> req,
                                                std::unique_ptr<Buffer> buffer) {
  // A send looks for a posted receive of its destination, a receive for a pending send to
  // this rank; unmatched, each waits in its own queue of the receiving rank.
  const auto receiver = static_cast<std::size_t>(req->is_send ? req->peer : rank());
  auto& matches = req->is_send ? hub_->posted[receiver] : hub_->pending[receiver];
  auto& queue = req->is_send ? hub_->pending[receiver] : hub_->posted[receiver];
  std::shared_ptr<detail::LocalRequest> match;
  {
    std::lock_guard lock(hub_->mutex);
    // Requests are filed under their sending rank and tag: a send's, this rank; a receive's,
    // the rank it receives from.
    match = matches.take(req->is_send ? rank() : req->peer, req->tag);
    if (match) {
      // Claimed under the lock, so that neither side reports the peer gone meanwhile.
      req->state.store(detail::LocalRequest::matched);
      match->state.store(detail::LocalRequest::matched);
    } else {
      queue.push(req->is_send ? rank() : req->peer, req->tag, req);
    }
  }
  if (match) {
    req->is_send ? detail::transfer(*hub_, *req, *match) : detail::transfer(*hub_, *match, *req);
  }
  return std::make_unique<Future>(std::move(req), std::move(buffer));
}

void LocalCommunicator::do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) {
  std::lock_guard lock(hub_->mutex);
  hub_->messages[static_cast<std::size_t>(dst)].emplace_back(tag, Message{rank(), std::move(data)});
}

std::optional<Message> LocalCommunicator::do_recv_any(Tag tag) {
  std::lock_guard lock(hub_->mutex);
  auto& q = hub_->messages[static_cast<std::size_t>(rank())];
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (it->first == tag) {
      Message m = std::move(it->second);
      q.erase(it);
      return m;
    }
  }
  return std::nullopt;
}

void LocalCommunicator::do_barrier() {
  std::unique_lock lock(hub_->mutex);
  const std::uint64_t gen = hub_->barrier_generation;
  if (++hub_->barrier_waiting == static_cast<std::size_t>(hub_->nranks)) {
    hub_->barrier_waiting = 0;
    ++hub_->barrier_generation;
    hub_->cv.notify_all();
    return;
  }
  auto someone_gone = [&] {
    for (Rank r = 0; r < hub_->nranks; ++r) {
      if (hub_->gone[static_cast<std::size_t>(r)].load()) return r;
    }
    return -1;
  };
  const bool passed = hub_->cv.wait_for(
      lock, timeout(), [&] { return hub_->barrier_generation != gen || someone_gone() >= 0; });
  if (hub_->barrier_generation != gen) return;
  --hub_->barrier_waiting;
  if (const Rank r = someone_gone(); r >= 0) {
    SPILLWAY_FAIL(
        logger().prefix() + "barrier: rank " + std::to_string(r) + " left the communicator",
        comm_error);
  }
  if (!passed) {
    SPILLWAY_FAIL(logger().prefix() + "barrier timed out after " +
                      std::to_string(timeout().count()) + " ms: a peer is dead or stuck",
                  comm_error);
  }
}

}  // namespace spillway
