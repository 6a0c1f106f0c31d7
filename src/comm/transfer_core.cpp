#include "comm/detail/transfer_core.hpp"

#include <spillway/core/cuda.hpp>
#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "comm/detail/transfer_wire.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace spillway::detail {

namespace {

using namespace std::chrono_literals;
namespace tx = transfer;
using Kind = TransferWire::Kind;

/// Copies `n` bytes from `src` (of tier `from`) to `dst` (of tier `to`); done when this
/// returns. A copy that involves the GPU goes on `stream`, after what is queued there.
void copy_now(void* dst, MemoryType to, const void* src, MemoryType from, std::size_t n,
              Stream stream) {
  if (n == 0) return;
  if (from == MemoryType::DEVICE || to == MemoryType::DEVICE) {
    cuda::memcpy_async(dst, src, n, stream);
    cuda::stream_synchronize(stream);
  } else {
    std::memcpy(dst, src, n);
  }
}

/// Copies `src` into `dst`, of its size; a copy from the GPU goes after the writes queued on
/// the source's stream.
void copy_now(Buffer& dst, const Buffer& src) {
  const Stream stream = src.mem_type() == MemoryType::DEVICE ? src.stream() : dst.stream();
  copy_now(dst.data(), dst.mem_type(), src.data(), src.mem_type(), src.size(), stream);
}

}  // namespace

bool TransferRecv::progress() {
  return core_->progress(*this);
}
bool TransferRecv::cancel() noexcept {
  core_->cancel(*this);
  return true;
}
bool TransferSend::progress() {
  return core_->progress(*this);
}
bool TransferSend::cancel() noexcept {
  return core_->cancel(*this, 60s);
}

TransferCore::TransferCore(BufferResource& br, Rank me, int nranks, std::string prefix,
                           const tx::EngineOptions& host,
                           const std::optional<tx::EngineOptions>& device, std::size_t window)
    : br_{br},
      me_{me},
      nranks_{nranks},
      prefix_{std::move(prefix)},
      partial_(static_cast<std::size_t>(nranks)),
      dead_(static_cast<std::size_t>(nranks)) {
  host_.engine = std::make_unique<tx::TransferEngine>(host);
  host_.peer_of.assign(static_cast<std::size_t>(nranks), 0);
  device_.peer_of.assign(static_cast<std::size_t>(nranks), 0);
  watch(host_);
  window = window_bytes(window, br, 1);
  if (!device || window == 0) return;
  try {
    window_charge_ = br.try_reserve(MemoryType::DEVICE, window);
    if (!window_charge_) SPILLWAY_FAIL("no room under the device limit", comm_error);
    window_ = std::make_unique<DeviceWindow>(window);
    device_.engine = std::make_unique<tx::TransferEngine>(*device);
    window_region_ = device_.engine->register_memory(window_->data(), window, MemoryType::DEVICE,
                                                     device->device);
    watch(device_);
  } catch (const std::exception& e) {
    SPILLWAY_LOG(warn, prefix_ << "transfer: no device path (" << e.what()
                               << "); device buffers are staged through host memory");
    device_.engine.reset();
    window_.reset();
    window_charge_.reset();
  }
}

void TransferCore::watch(TransferPath& path) {
  path.engine->on_peer_failure([this, &path](tx::PeerId peer, const std::string& why) {
    std::lock_guard lock(dead_mutex_);
    if (const auto it = path.rank_of.find(peer); it != path.rank_of.end()) {
      dead_[static_cast<std::size_t>(it->second)] = why;
      any_dead_.store(true);
    }
  });
}

std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> TransferCore::metadata() const {
  return {host_.engine->metadata(),
          device_.engine ? device_.engine->metadata() : std::vector<std::uint8_t>{}};
}

void TransferCore::connect(const std::vector<std::vector<std::uint8_t>>& host,
                           const std::vector<std::vector<std::uint8_t>>& device) {
  for (Rank r = 0; r < nranks_; ++r) {
    if (r == me_) continue;
    const auto i = static_cast<std::size_t>(r);
    const tx::PeerId p = host_.engine->add_peer(host[i]);
    {
      std::lock_guard lock(dead_mutex_);
      host_.peer_of[i] = p;
      host_.rank_of[p] = r;
    }
    if (!device_.engine || device[i].empty()) continue;
    try {
      const tx::PeerId d = device_.engine->add_peer(device[i]);
      std::lock_guard lock(dead_mutex_);
      device_.peer_of[i] = d;
      device_.rank_of[d] = r;
    } catch (const comm_error& e) {  // another node
      SPILLWAY_LOG(info, prefix_ << "transfer: no device path to rank " << r << ": " << e.what());
    }
  }
}

std::shared_ptr<TransferSend> TransferCore::post_send(Buffer* buffer, Rank dst, Tag tag) {
  auto s = std::make_shared<TransferSend>(shared_from_this(), buffer, dst, tag);
  std::lock_guard lock(mutex_);
  const auto key = transfer_key(dst, tag.value());
  sends_[key].push_back(s);
  match(key);
  return s;
}

std::shared_ptr<TransferRecv> TransferCore::post_recv(Buffer* buffer, Rank src, Tag tag) {
  auto r = std::make_shared<TransferRecv>(shared_from_this(), buffer, src, tag);
  std::lock_guard lock(mutex_);
  r->imm = next_imm_++;
  if (next_imm_ == 0) next_imm_ = 1;
  const std::size_t n = buffer->size();
  if (src == me_) {
    const auto key = transfer_key(me_, tag.value());
    offers_[key].push_back(Offer{n, r->imm, false, {}, r});
    match(key);
    return r;
  }
  try {
    std::vector<std::uint8_t> region;
    bool device = false;
    if (n > 0 && buffer->mem_type() == MemoryType::DEVICE &&
        device_.peer_of[static_cast<std::size_t>(src)] != 0) {
      r->landing.window = window_->take(n);  // nullopt: full, or too big for it
      r->landing.window_bytes = n;
    }
    if (r->landing.window) {
      device = true;
      r->landing.path = &device_;
      region = device_.engine->export_region(window_region_, *r->landing.window, n).to_bytes();
    } else if (n > 0) {
      prepare(r->landing, *buffer, host_);
      region = host_.engine->export_region(r->landing.region, r->landing.offset, n).to_bytes();
    }
    send_locked(src, TransferWire::offer(me_, tag.value(), n, r->imm, device, region));
    recvs_[r->imm] = r;
  } catch (const std::exception& e) {
    release(r->landing);
    r->fail(e.what());
  }
  return r;
}

/// The bytes of `r` are in its landing: a copy out of the window or a staging buffer goes on
/// the buffer's stream (the receive completes when it has), else the receive is done.
void TransferCore::finish(TransferRecv& r) {
  recvs_.erase(r.imm);
  try {
    const void* from = nullptr;
    MemoryType from_type = MemoryType::DEVICE;
    if (r.landing.window) {
      from = window_->data() + *r.landing.window;
    } else if (r.landing.staging) {
      from = r.landing.staging->data();
      from_type = r.landing.staging->mem_type();
    }
    if (from != nullptr && r.buffer->mem_type() == MemoryType::DEVICE) {
      cuda::memcpy_async(r.buffer->data(), from, r.bytes, r.buffer->stream());
      r.copied.record(r.buffer->stream());
      r.state = TransferRecv::State::copying;
      return;
    }
    if (from != nullptr) {
      copy_now(r.buffer->data(), r.buffer->mem_type(), from, from_type, r.bytes,
               r.buffer->stream());
    }
    release(r.landing);
    r.state = TransferRecv::State::done;
  } catch (const std::exception& e) {
    release(r.landing);
    r.fail(e.what());
  }
}

bool TransferCore::progress(TransferRecv& r) {
  std::lock_guard lock(mutex_);
  const auto advance = [&] {
    pump();
    if (r.state == TransferRecv::State::offered && r.landing.path != nullptr &&
        r.landing.path->engine->imm_count(r.imm) > 0) {
      (void)r.landing.path->engine->expect_imm(r.imm, 1);  // takes the arrival
      finish(r);
    }
    if (r.state == TransferRecv::State::copying && r.copied.is_complete()) {
      release(r.landing);
      r.state = TransferRecv::State::done;
    }
    return r.state != TransferRecv::State::offered;
  };
  if (!advance()) {
    if (const std::string why = gone_unless(r.peer, advance); !why.empty()) {
      recvs_.erase(r.imm);
      release(r.landing);
      r.fail("rank " + std::to_string(r.peer) + " is gone (" + why + ")");
    }
  }
  if (r.state == TransferRecv::State::failed) {
    SPILLWAY_FAIL(prefix_ + "the " + r.describe() + " failed: " + r.error, comm_error);
  }
  return r.state == TransferRecv::State::done;
}

bool TransferCore::progress(TransferSend& s) {
  std::lock_guard lock(mutex_);
  const auto advance = [&] {
    pump();
    if (s.state == TransferSend::State::writing) {
      const tx::Status st = s.ticket.poll();
      if (st == tx::Status::ok) {
        release(s.landing);
        s.state = TransferSend::State::done;
      } else if (st != tx::Status::in_progress) {
        release(s.landing);
        s.error =
            std::string("the write ended as ") + tx::to_string(st) + ": " + s.ticket.message();
        s.state = TransferSend::State::failed;
      }
    }
    return s.state != TransferSend::State::queued;
  };
  if (!advance()) {
    if (const std::string why = gone_unless(s.peer, advance); !why.empty()) {
      unqueue_send(s);
      s.error = "rank " + std::to_string(s.peer) + " is gone (" + why + ")";
      s.state = TransferSend::State::failed;
    }
  }
  if (s.state == TransferSend::State::failed) {
    SPILLWAY_FAIL(prefix_ + "the " + s.describe() + " failed: " + s.error, comm_error);
  }
  return s.state == TransferSend::State::done;
}

bool TransferCore::cancel(TransferSend& s, std::chrono::milliseconds timeout) noexcept {
  std::lock_guard lock(mutex_);
  bool settled = true;
  if (s.state == TransferSend::State::queued) {
    unqueue_send(s);
  } else if (s.state == TransferSend::State::writing) {
    // The engine reads the bytes until the write ends (a dead peer's ends as peer gone).
    const tx::Status st = s.ticket.wait(timeout);
    settled = st != tx::Status::timed_out && st != tx::Status::in_progress;
  }
  release(s.landing);
  s.state = TransferSend::State::failed;
  return settled;
}

void TransferCore::cancel(TransferRecv& r) noexcept {
  std::lock_guard lock(mutex_);
  if (r.state == TransferRecv::State::copying) {
    try {
      r.copied.synchronize();  // the copy reads the landing and writes the buffer until then
    } catch (const std::exception& e) {
      SPILLWAY_LOG(warn, prefix_ << "transfer: a dropped receive's copy failed: " << e.what());
    }
    release(r.landing);
    r.state = TransferRecv::State::failed;
    return;
  }
  if (r.state != TransferRecv::State::offered) return;
  recvs_.erase(r.imm);
  if (r.peer == me_) {
    unqueue_offer(transfer_key(me_, r.tag.value()),
                  [&](const Offer& o) { return o.local.get() == &r; });
  } else {
    try {  // so that the sender's next send with the tag takes the next receive
      send_locked(r.peer, TransferWire::answer(Kind::withdraw, me_, r.imm, {}, r.tag.value()));
    } catch (const std::exception&) {
      // The sender is gone: nothing will be matched.
    }
    if (r.landing.window) {
      // A write the sender started before the withdrawal came may still land there: the range
      // is not given back (a registration, unlike the window, refuses writes once removed).
      window_lost_ += r.bytes;
      SPILLWAY_LOG(debug, prefix_ << "transfer: " << window_lost_
                                  << " bytes of the device window held by dropped receives");
      r.landing.window.reset();
    }
  }
  release(r.landing);
  r.state = TransferRecv::State::failed;
}

/// Registers with `path`'s engine the memory a transfer of `buffer` moves through: the buffer
/// itself; or a host staging buffer for device memory on the host path, and for memory that
/// overlaps a registration without lying inside it (an engine takes no overlapping
/// registrations). Memory inside one (views of a buffer sent to several ranks at once)
/// shares it.
void TransferCore::prepare(Landing& landing, Buffer& buffer, TransferPath& path) {
  landing.path = &path;
  auto ptr = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::size_t n = buffer.size();
  auto& regs = path.registrations;
  const bool stage_device = buffer.mem_type() == MemoryType::DEVICE && &path == &host_;
  const auto after = regs.upper_bound(ptr);
  if (!stage_device && after != regs.begin()) {
    const auto at = std::prev(after);
    if (ptr + n <= at->second.end && at->second.region.type == buffer.mem_type()) {
      ++at->second.users;
      landing.region = at->second.region;
      landing.offset = ptr - at->first;
      return;
    }
  }
  const bool overlaps = (after != regs.end() && after->first < ptr + n) ||
                        (after != regs.begin() && std::prev(after)->second.end > ptr);
  MemoryType type = buffer.mem_type();
  if (stage_device || overlaps) {
    type = br_.is_live(MemoryType::PINNED_HOST) ? MemoryType::PINNED_HOST : MemoryType::HOST;
    landing.staging = br_.allocate(type, n, buffer.stream());
    ptr = reinterpret_cast<std::uintptr_t>(landing.staging->data());
  }
  landing.region = path.engine->register_memory(reinterpret_cast<void*>(ptr), n, type,
                                                type == MemoryType::DEVICE ? br_.device() : -1);
  regs[ptr] = TransferPath::Registration{ptr + n, landing.region, 1};
}

void TransferCore::release(Landing& landing) noexcept {
  if (landing.window) {
    window_->give(*landing.window, landing.window_bytes);
  }
  if (landing.region.id != 0 && landing.path != nullptr) {
    auto& regs = landing.path->registrations;
    const auto it = regs.find(reinterpret_cast<std::uintptr_t>(landing.region.ptr));
    if (it != regs.end() && --it->second.users == 0) {
      regs.erase(it);
      try {
        landing.path->engine->deregister_memory(landing.region);
      } catch (const std::exception& e) {
        SPILLWAY_LOG(warn, prefix_ << "transfer: deregistering failed: " << e.what());
      }
    }
  }
  landing.region = {};
  landing.offset = 0;
  landing.window.reset();
  landing.staging.reset();
}

/// Pairs the queued sends of `key` with its offers, oldest first, and starts them.
void TransferCore::match(std::uint64_t key) {
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

/// Starts the write of `s` into what `o` offers: by the device path into a range of the
/// receiver's window, else by the host path.
void TransferCore::start(TransferSend& s, Offer& o) {
  try {
    if (o.size != s.bytes) {
      SPILLWAY_FAIL("rank " + std::to_string(s.peer) + " posted a receive of " +
                        std::to_string(o.size) + " bytes for it",
                    comm_error);
    }
    if (o.local) {  // a send to this rank itself
      copy_now(*o.local->buffer, *s.buffer);
      o.local->state = TransferRecv::State::done;
      s.state = TransferSend::State::done;
      return;
    }
    if (s.bytes == 0) {
      send_locked(s.peer, TransferWire::answer(Kind::empty, me_, o.imm, {}));
      s.state = TransferSend::State::done;
      return;
    }
    SPILLWAY_EXPECTS(!o.device || device_.engine, "an offer of device memory, and no device path",
                     corrupt_data_error);
    TransferPath& path = o.device ? device_ : host_;
    const auto remote = tx::RemoteRegion::from_bytes(o.region);
    prepare(s.landing, *s.buffer, path);
    if (s.landing.staging) copy_now(*s.landing.staging, *s.buffer);
    const tx::Chunk whole{s.landing.offset, 0, s.bytes};
    s.ticket = path.engine->write(s.landing.region, remote, std::span(&whole, 1), o.imm);
    s.state = TransferSend::State::writing;
  } catch (const std::exception& e) {
    release(s.landing);
    s.error = e.what();
    s.state = TransferSend::State::failed;
    if (o.local) {
      o.local->fail("the matching send failed: " + s.error);
      return;
    }
    try {
      send_locked(s.peer, TransferWire::answer(Kind::refuse, me_, o.imm,
                                               "the matching send of " + std::to_string(s.bytes) +
                                                   " bytes failed: " + s.error));
    } catch (const std::exception&) {
      // The receiver is gone too; its receive fails on its own.
    }
  }
}

std::string TransferCore::death_of(Rank r) {
  if (!any_dead_.load()) return {};
  std::lock_guard lock(dead_mutex_);
  return dead_[static_cast<std::size_t>(r)];
}

void TransferCore::unqueue_send(const TransferSend& s) {
  const auto it = sends_.find(transfer_key(s.peer, s.tag.value()));
  if (it == sends_.end()) return;
  auto& q = it->second;
  q.erase(std::remove_if(q.begin(), q.end(), [&](const auto& e) { return e.get() == &s; }),
          q.end());
  if (q.empty()) sends_.erase(it);
}

}  // namespace spillway::detail
