#include <spillway/comm/transfer.hpp>

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/hex.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/options.hpp>
#include <spillway/transfer/engine.hpp>

#include "comm/detail/transfer_wire.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace spillway {

namespace {

using namespace std::chrono_literals;
namespace tx = transfer;
using detail::TransferWire;
using Kind = detail::TransferWire::Kind;

class Core;

/// Where a send's bytes come from, or a receive's land: the buffer itself when it is host
/// memory, else a host staging buffer; `offset` bytes into a registration with the engine
/// while the transfer runs.
struct Landing {
  std::unique_ptr<Buffer> staging;
  tx::Region region;
  std::size_t offset{0};
};

class SendRequest;

/// A receive. Its state is guarded by the core's mutex.
class RecvRequest final : public detail::Request {
 public:
  RecvRequest(std::shared_ptr<Core> core, Buffer* buffer, Rank src, Tag tag)
      : Request(false, src, tag, buffer->size()), buffer{buffer}, core_{std::move(core)} {}
  bool progress() override;
  void cancel() noexcept override;

  enum class State : std::uint8_t { offered, done, failed };
  State state{State::offered};
  std::string error;
  std::uint32_t imm{0};
  Buffer* buffer;
  Landing landing;

 private:
  std::shared_ptr<Core> core_;
};

/// A send. Its state is guarded by the core's mutex.
class SendRequest final : public detail::Request {
 public:
  SendRequest(std::shared_ptr<Core> core, Buffer* buffer, Rank dst, Tag tag)
      : Request(true, dst, tag, buffer->size()), buffer{buffer}, core_{std::move(core)} {}
  bool progress() override;
  void cancel() noexcept override;

  enum class State : std::uint8_t { queued, writing, done, failed };
  State state{State::queued};
  std::string error;
  Buffer* buffer;
  Landing landing;
  tx::Ticket ticket;

 private:
  std::shared_ptr<Core> core_;
};

/// What a receiver offers its sender: a registered range to write into, or (for a receive
/// from this rank itself) the receive.
struct Offer {
  std::uint64_t size{0};
  std::uint32_t imm{0};
  std::vector<std::uint8_t> region;
  std::shared_ptr<RecvRequest> local;
};

std::uint64_t key_of(Rank r, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r)) << 32) | tag;
}

/// Copies `src` into `dst` (of its size, any tiers); done when this returns. A copy from the
/// GPU goes after the writes queued on the source's stream.
void copy_now(Buffer& dst, const Buffer& src) {
  if (src.size() == 0) return;
  if (src.mem_type() == MemoryType::DEVICE || dst.mem_type() == MemoryType::DEVICE) {
    const Stream stream = src.mem_type() == MemoryType::DEVICE ? src.stream() : dst.stream();
    cuda::memcpy_async(dst.data(), src.data(), src.size(), stream);
    cuda::stream_synchronize(stream);
  } else {
    std::memcpy(dst.data(), src.data(), src.size());
  }
}

/// The state of one rank's communicator, shared with its requests (a future may outlive the
/// communicator).
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(BufferResource& br, Rank me, int nranks, std::string prefix, tx::EngineOptions engine)
      : br_{br},
        me_{me},
        nranks_{nranks},
        prefix_{std::move(prefix)},
        partial_(static_cast<std::size_t>(nranks)),
        peer_of_(static_cast<std::size_t>(nranks), 0),
        dead_(static_cast<std::size_t>(nranks)),
        engine_{std::move(engine)} {
    engine_.on_peer_failure([this](tx::PeerId peer, const std::string& why) {
      std::lock_guard lock(dead_mutex_);
      if (const auto it = rank_of_.find(peer); it != rank_of_.end()) {
        dead_[static_cast<std::size_t>(it->second)] = why;
        any_dead_.store(true);
      }
    });
  }
  tx::TransferEngine& engine() { return engine_; }
  [[nodiscard]] Rank me() const { return me_; }

  /// Connects to every other rank's engine (metadata by rank).
  void connect(const std::vector<std::vector<std::uint8_t>>& metadata) {
    for (Rank r = 0; r < nranks_; ++r) {
      if (r == me_) continue;
      const tx::PeerId p = engine_.add_peer(metadata[static_cast<std::size_t>(r)]);
      std::lock_guard lock(dead_mutex_);
      peer_of_[static_cast<std::size_t>(r)] = p;
      rank_of_[p] = r;
    }
  }

  std::shared_ptr<SendRequest> post_send(Buffer* buffer, Rank dst, Tag tag) {
    auto s = std::make_shared<SendRequest>(shared_from_this(), buffer, dst, tag);
    std::lock_guard lock(mutex_);
    const auto key = key_of(dst, tag.value());
    sends_[key].push_back(s);
    match(key);
    return s;
  }

  std::shared_ptr<RecvRequest> post_recv(Buffer* buffer, Rank src, Tag tag) {
    auto r = std::make_shared<RecvRequest>(shared_from_this(), buffer, src, tag);
    std::lock_guard lock(mutex_);
    r->imm = next_imm_++;
    if (next_imm_ == 0) next_imm_ = 1;
    if (src == me_) {
      const auto key = key_of(me_, tag.value());
      offers_[key].push_back(Offer{buffer->size(), r->imm, {}, r});
      match(key);
      return r;
    }
    try {
      std::vector<std::uint8_t> region;
      if (buffer->size() > 0) {
        prepare(r->landing, *buffer);
        region =
            engine_.export_region(r->landing.region, r->landing.offset, buffer->size()).to_bytes();
      }
      send_locked(src, TransferWire::offer(me_, tag.value(), buffer->size(), r->imm, region));
      recvs_[r->imm] = r;
    } catch (const std::exception& e) {
      release(r->landing);
      fail(*r, e.what());
    }
    return r;
  }

  bool progress(RecvRequest& r) {
    std::lock_guard lock(mutex_);
    pump();
    if (r.state == RecvRequest::State::offered && r.peer != me_ && engine_.imm_count(r.imm) > 0) {
      (void)engine_.expect_imm(r.imm, 1);  // takes the arrival
      recvs_.erase(r.imm);
      try {
        if (r.landing.staging) {
          copy_now(*r.buffer, *r.landing.staging);
        }
        release(r.landing);
        r.state = RecvRequest::State::done;
      } catch (const std::exception& e) {
        release(r.landing);
        fail(r, e.what());
      }
    }
    if (r.state == RecvRequest::State::offered) {
      if (const std::string why = death_of(r.peer); !why.empty()) {
        recvs_.erase(r.imm);
        release(r.landing);
        fail(r, "rank " + std::to_string(r.peer) + " is gone (" + why + ")");
      }
    }
    if (r.state == RecvRequest::State::failed) {
      SPILLWAY_FAIL(prefix_ + "the " + r.describe() + " failed: " + r.error, comm_error);
    }
    return r.state == RecvRequest::State::done;
  }

  bool progress(SendRequest& s) {
    std::lock_guard lock(mutex_);
    pump();
    if (s.state == SendRequest::State::writing) {
      const tx::Status st = s.ticket.poll();
      if (st == tx::Status::ok) {
        release(s.landing);
        s.state = SendRequest::State::done;
      } else if (st != tx::Status::in_progress) {
        release(s.landing);
        s.error =
            std::string("the write ended as ") + tx::to_string(st) + ": " + s.ticket.message();
        s.state = SendRequest::State::failed;
      }
    }
    if (s.state == SendRequest::State::queued) {
      if (const std::string why = death_of(s.peer); !why.empty()) {
        unqueue(sends_, key_of(s.peer, s.tag.value()), &s);
        s.error = "rank " + std::to_string(s.peer) + " is gone (" + why + ")";
        s.state = SendRequest::State::failed;
      }
    }
    if (s.state == SendRequest::State::failed) {
      SPILLWAY_FAIL(prefix_ + "the " + s.describe() + " failed: " + s.error, comm_error);
    }
    return s.state == SendRequest::State::done;
  }

  void cancel(SendRequest& s, std::chrono::milliseconds timeout) noexcept {
    std::lock_guard lock(mutex_);
    if (s.state == SendRequest::State::queued) {
      unqueue(sends_, key_of(s.peer, s.tag.value()), &s);
    } else if (s.state == SendRequest::State::writing) {
      (void)s.ticket.wait(timeout);  // the engine reads the bytes until then
    }
    release(s.landing);
    s.state = SendRequest::State::failed;
  }

  void cancel(RecvRequest& r) noexcept {
    std::lock_guard lock(mutex_);
    if (r.state != RecvRequest::State::offered) return;
    recvs_.erase(r.imm);
    if (r.peer == me_) {
      unqueue_offer(key_of(me_, r.tag.value()),
                    [&](const Offer& o) { return o.local.get() == &r; });
    } else {
      try {  // so that the sender's next send with the tag takes the next receive
        send_locked(r.peer, TransferWire::answer(Kind::withdraw, me_, r.imm, {}, r.tag.value()));
      } catch (const std::exception&) {
        // The sender is gone: nothing will be matched.
      }
    }
    release(r.landing);  // a write that comes later meets no registration
    r.state = RecvRequest::State::failed;
  }

  void send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) {
    std::lock_guard lock(mutex_);
    if (dst == me_) {
      messages_[tag.value()].push_back(Message{me_, std::move(data)});
      return;
    }
    std::size_t at = 0;
    do {
      const std::size_t n = std::min(TransferWire::max_piece, data.size() - at);
      const bool last = at + n == data.size();
      send_locked(dst,
                  TransferWire::message(me_, tag.value(), last, std::span(data).subspan(at, n)));
      at += n;
    } while (at < data.size());
  }

  std::optional<Message> recv_any(Tag tag) {
    std::lock_guard lock(mutex_);
    pump();
    const auto it = messages_.find(tag.value());
    if (it == messages_.end()) return std::nullopt;
    Message m = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) messages_.erase(it);
    return m;
  }

  /// Every rank tells rank 0 it has arrived; rank 0 then releases them all.
  void barrier(std::chrono::milliseconds timeout) {
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mutex_);
      generation = ++barrier_generation_;
      if (me_ != 0) send_locked(0, TransferWire::barrier(Kind::arrive, me_, generation));
    }
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        pump();
        if (me_ == 0 && arrivals_[generation] == nranks_ - 1) {
          arrivals_.erase(generation);
          for (Rank r = 1; r < nranks_; ++r) {
            send_locked(r, TransferWire::barrier(Kind::release, me_, generation));
          }
          return;
        }
        if (me_ != 0 && released_ >= generation) return;
        for (Rank r = 0; r < nranks_; ++r) {
          if (me_ != 0 && r != 0) continue;  // only rank 0 matters to the others
          if (const std::string why = death_of(r); !why.empty()) {
            SPILLWAY_FAIL(prefix_ + "barrier: rank " + std::to_string(r) + " is gone (" + why + ")",
                          comm_error);
          }
        }
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > timeout) {
        SPILLWAY_FAIL(prefix_ + "barrier: timed out after " + std::to_string(timeout.count()) +
                          " ms: a rank is dead or stuck",
                      comm_error);
      }
      std::this_thread::sleep_for(waited < 2ms ? 0us : 20us);
    }
  }

 private:
  /// Registers the host memory a transfer of `buffer` moves through: the buffer itself, or a
  /// staging buffer for device memory and for memory that overlaps a registration without
  /// lying inside it (the engine takes no overlapping registrations). Memory inside one
  /// (views of a buffer sent to several ranks at once) shares it.
  void prepare(Landing& landing, Buffer& buffer) {
    auto ptr = reinterpret_cast<std::uintptr_t>(buffer.data());
    const std::size_t n = buffer.size();
    const auto after = registrations_.upper_bound(ptr);
    if (buffer.mem_type() != MemoryType::DEVICE && after != registrations_.begin()) {
      const auto at = std::prev(after);
      if (ptr + n <= at->second.end) {
        ++at->second.users;
        landing.region = at->second.region;
        landing.offset = ptr - at->first;
        return;
      }
    }
    const bool overlaps = (after != registrations_.end() && after->first < ptr + n) ||
                          (after != registrations_.begin() && std::prev(after)->second.end > ptr);
    MemoryType type = buffer.mem_type();
    if (type == MemoryType::DEVICE || overlaps) {
      type = br_.is_live(MemoryType::PINNED_HOST) ? MemoryType::PINNED_HOST : MemoryType::HOST;
      landing.staging = br_.allocate(type, n, buffer.stream());
      ptr = reinterpret_cast<std::uintptr_t>(landing.staging->data());
    }
    landing.region = engine_.register_memory(reinterpret_cast<void*>(ptr), n, type);
    registrations_[ptr] = Registration{ptr + n, landing.region, 1};
  }

  void release(Landing& landing) noexcept {
    if (landing.region.id != 0) {
      const auto it = registrations_.find(reinterpret_cast<std::uintptr_t>(landing.region.ptr));
      if (it != registrations_.end() && --it->second.users == 0) {
        registrations_.erase(it);
        try {
          engine_.deregister_memory(landing.region);
        } catch (const std::exception& e) {
          SPILLWAY_LOG(warn, prefix_ << "transfer: deregistering failed: " << e.what());
        }
      }
      landing.region = {};
      landing.offset = 0;
    }
    landing.staging.reset();
  }

  static void fail(RecvRequest& r, const std::string& why) {
    r.error = why;
    r.state = RecvRequest::State::failed;
  }

  /// Pairs the queued sends of `key` with its offers, oldest first, and starts them.
  void match(std::uint64_t key) {
    auto s_it = sends_.find(key);
    auto o_it = offers_.find(key);
    while (s_it != sends_.end() && o_it != offers_.end() && !s_it->second.empty() &&
           !o_it->second.empty()) {
      auto s = std::move(s_it->second.front());
      s_it->second.pop_front();
      Offer o = std::move(o_it->second.front());
      o_it->second.pop_front();
      start(*s, o);
    }
    if (s_it != sends_.end() && s_it->second.empty()) sends_.erase(s_it);
    if (o_it != offers_.end() && o_it->second.empty()) offers_.erase(o_it);
  }

  /// Starts the write of `s` into what `o` offers.
  void start(SendRequest& s, Offer& o) {
    try {
      if (o.size != s.bytes) {
        SPILLWAY_FAIL("rank " + std::to_string(s.peer) + " posted a receive of " +
                          std::to_string(o.size) + " bytes for it",
                      comm_error);
      }
      if (o.local) {  // a send to this rank itself
        copy_now(*o.local->buffer, *s.buffer);
        o.local->state = RecvRequest::State::done;
        s.state = SendRequest::State::done;
        return;
      }
      if (s.bytes == 0) {
        send_locked(s.peer, TransferWire::answer(Kind::empty, me_, o.imm, {}));
        s.state = SendRequest::State::done;
        return;
      }
      const auto remote = tx::RemoteRegion::from_bytes(o.region);
      prepare(s.landing, *s.buffer);
      if (s.landing.staging) {
        copy_now(*s.landing.staging, *s.buffer);
      }
      const tx::Chunk whole{s.landing.offset, 0, s.bytes};
      s.ticket = engine_.write(s.landing.region, remote, std::span(&whole, 1), o.imm);
      s.state = SendRequest::State::writing;
    } catch (const std::exception& e) {
      release(s.landing);
      s.error = e.what();
      s.state = SendRequest::State::failed;
      if (o.local) {
        fail(*o.local, "the matching send failed: " + s.error);
      } else {
        try {
          send_locked(s.peer,
                      TransferWire::answer(Kind::refuse, me_, o.imm,
                                           "the matching send of " + std::to_string(s.bytes) +
                                               " bytes failed: " + s.error));
        } catch (const std::exception&) {
          // The receiver is gone too; its receive fails on its own.
        }
      }
    }
  }

  void send_locked(Rank dst, const std::vector<std::uint8_t>& bytes) {
    tx::PeerId p = 0;
    {
      std::lock_guard lock(dead_mutex_);
      p = peer_of_[static_cast<std::size_t>(dst)];
    }
    engine_.send_control(p, bytes);
  }

  /// Takes every control message that has arrived, in order.
  void pump() {
    while (auto m = engine_.recv_control(0ms)) {
      Rank from = -1;
      {
        std::lock_guard lock(dead_mutex_);
        if (const auto it = rank_of_.find(m->first); it != rank_of_.end()) from = it->second;
      }
      if (from < 0) {
        SPILLWAY_LOG(warn, prefix_ << "transfer: a control message from engine peer " << m->first
                                   << ", which is no rank, was dropped");
        continue;
      }
      try {
        handle(from, m->second);
      } catch (const std::exception& e) {
        SPILLWAY_LOG(warn,
                     prefix_ << "transfer: rank " << from << " sent a bad message: " << e.what());
        std::lock_guard lock(dead_mutex_);
        dead_[static_cast<std::size_t>(from)] = std::string("sent a bad message: ") + e.what();
        any_dead_.store(true);
      }
    }
  }

  void handle(Rank from, std::span<const std::uint8_t> bytes) {
    const TransferWire::Parsed w = TransferWire::parse(bytes, from);
    switch (w.kind) {
      case Kind::message: {
        auto& part = partial_[static_cast<std::size_t>(from)];
        part.insert(part.end(), w.payload.begin(), w.payload.end());
        if (w.last) {
          messages_[w.tag].push_back(Message{from, std::move(part)});
          part = {};
        }
        break;
      }
      case Kind::offer: {
        const auto key = key_of(from, w.tag);
        offers_[key].push_back(Offer{
            w.size, w.imm, std::vector<std::uint8_t>(w.payload.begin(), w.payload.end()), nullptr});
        match(key);
        break;
      }
      case Kind::refuse:
      case Kind::empty: {
        const auto it = recvs_.find(w.imm);
        if (it == recvs_.end()) break;  // cancelled meanwhile
        RecvRequest& r = *it->second;
        if (r.peer != from) {
          SPILLWAY_FAIL("an answer for a receive from rank " + std::to_string(r.peer),
                        corrupt_data_error);
        }
        if (w.kind == Kind::empty && r.bytes == 0) {
          r.state = RecvRequest::State::done;
        } else {
          fail(r, w.kind == Kind::empty ? "rank " + std::to_string(from) + " sent 0 bytes for it"
                                        : "rank " + std::to_string(from) + " refused it: " +
                                              std::string(w.payload.begin(), w.payload.end()));
        }
        release(r.landing);
        recvs_.erase(it);
        break;
      }
      case Kind::withdraw:
        unqueue_offer(key_of(from, w.tag), [&](const Offer& o) { return o.imm == w.imm; });
        break;
      case Kind::arrive:
        if (me_ != 0)
          SPILLWAY_FAIL("a barrier arrival at rank " + std::to_string(me_), corrupt_data_error);
        ++arrivals_[w.generation];
        break;
      case Kind::release:
        released_ = std::max(released_, w.generation);
        break;
    }
  }

  /// Why rank `r` is gone; empty while it is alive.
  std::string death_of(Rank r) {
    if (!any_dead_.load()) return {};
    std::lock_guard lock(dead_mutex_);
    return dead_[static_cast<std::size_t>(r)];
  }

  template <typename Queues, typename T>
  static void unqueue(Queues& queues, std::uint64_t key, const T* item) {
    const auto it = queues.find(key);
    if (it == queues.end()) return;
    auto& q = it->second;
    q.erase(std::remove_if(q.begin(), q.end(), [&](const auto& e) { return e.get() == item; }),
            q.end());
    if (q.empty()) queues.erase(it);
  }
  template <typename Pred>
  void unqueue_offer(std::uint64_t key, Pred&& which) {
    const auto it = offers_.find(key);
    if (it == offers_.end()) return;
    auto& q = it->second;
    q.erase(std::remove_if(q.begin(), q.end(), which), q.end());
    if (q.empty()) offers_.erase(it);
  }

  BufferResource& br_;
  const Rank me_;
  const int nranks_;
  const std::string prefix_;

  std::mutex mutex_;  // what follows, and the order control messages are taken in
  std::unordered_map<std::uint64_t, std::deque<std::shared_ptr<SendRequest>>> sends_;
  std::unordered_map<std::uint64_t, std::deque<Offer>> offers_;
  std::unordered_map<std::uint32_t, std::shared_ptr<RecvRequest>> recvs_;  // by imm
  std::unordered_map<std::uint32_t, std::deque<Message>> messages_;        // by tag
  std::vector<std::vector<std::uint8_t>> partial_;  // by rank: a message still in pieces
  struct Registration {
    std::uintptr_t end{0};
    tx::Region region;
    int users{0};
  };
  std::map<std::uintptr_t, Registration> registrations_;  // by first byte; none overlap
  std::uint32_t next_imm_{1};
  std::uint64_t barrier_generation_{0};
  std::map<std::uint64_t, int> arrivals_;  // rank 0: ranks at each barrier
  std::uint64_t released_{0};

  std::mutex dead_mutex_;  // the engine's failure callback takes only this one
  std::vector<tx::PeerId> peer_of_;
  std::unordered_map<tx::PeerId, Rank> rank_of_;
  std::vector<std::string> dead_;  // by rank: why it is gone
  std::atomic<bool> any_dead_{false};

  // Last: it goes first, so that its failure callbacks and worker never outlive the above.
  tx::TransferEngine engine_;
};

bool RecvRequest::progress() {
  return core_->progress(*this);
}
void RecvRequest::cancel() noexcept {
  core_->cancel(*this);
}
bool SendRequest::progress() {
  return core_->progress(*this);
}
void SendRequest::cancel() noexcept {
  core_->cancel(*this, 60s);
}

/// How many transfer communicators this rank of `launch` made before: every rank makes them in
/// the same order, so the count names this one's files in the rendezvous directory.
int use_of(const LaunchInfo& launch) {
  static std::mutex mutex;
  static std::map<std::string, int> uses;
  std::lock_guard lock(mutex);
  return uses[launch.dir + "/" + launch.token + "/" + std::to_string(launch.rank)]++;
}

class TransferCommunicator final : public Communicator {
 public:
  TransferCommunicator(BufferResource& br, const LaunchInfo& launch,
                       const TransferCommOptions& options)
      : Communicator(launch.rank, launch.nranks) {
    const OptionValues& o = options::get();
    tx::EngineOptions e;
    e.backend = options.backend.empty() ? o.transfer_backend : options.backend;
    e.provider = options.provider.empty() ? o.transfer_provider : options.provider;
    e.address = options.address;
    e.device = br.device();
    // A killed peer closes its connection at once; silence means a stuck or cut-off one.
    e.peer_timeout = std::min<std::chrono::milliseconds>(timeout(), 30s);
    core_ = std::make_shared<Core>(br, rank(), nranks(), logger().prefix(), std::move(e));

    const std::string key = "transfer-" + std::to_string(use_of(launch)) + "-";
    bootstrap::publish(launch, key + std::to_string(rank()), to_hex(core_->engine().metadata()));
    std::vector<std::vector<std::uint8_t>> metadata(static_cast<std::size_t>(nranks()));
    for (Rank r = 0; r < nranks(); ++r) {
      if (r != rank()) {
        metadata[static_cast<std::size_t>(r)] =
            from_hex(bootstrap::lookup(launch, key + std::to_string(r), r, timeout()));
      }
    }
    core_->connect(metadata);
    core_->barrier(timeout());
  }

  [[nodiscard]] const char* kind() const noexcept override { return "transfer"; }

 private:
  std::unique_ptr<Future> do_send(std::unique_ptr<Buffer> buffer, Rank dst, Tag tag) override {
    auto r = core_->post_send(buffer.get(), dst, tag);
    return std::make_unique<Future>(std::move(r), std::move(buffer));
  }
  std::unique_ptr<Future> do_recv(Rank src, Tag tag, std::unique_ptr<Buffer> buffer) override {
    auto r = core_->post_recv(buffer.get(), src, tag);
    return std::make_unique<Future>(std::move(r), std::move(buffer));
  }
  void do_send_message(std::vector<std::uint8_t> data, Rank dst, Tag tag) override {
    core_->send_message(std::move(data), dst, tag);
  }
  std::optional<Message> do_recv_any(Tag tag) override { return core_->recv_any(tag); }
  void do_barrier() override { core_->barrier(timeout()); }

  std::shared_ptr<Core> core_;
};

}  // namespace

std::unique_ptr<Communicator> make_transfer_communicator(BufferResource& br,
                                                         const LaunchInfo& launch,
                                                         const TransferCommOptions& options) {
  SPILLWAY_EXPECTS(launch.nranks >= 1 && launch.rank >= 0 && launch.rank < launch.nranks,
                   "make_transfer_communicator: rank " + std::to_string(launch.rank) + " of " +
                       std::to_string(launch.nranks));
  return std::make_unique<TransferCommunicator>(br, launch, options);
}

}  // namespace spillway
