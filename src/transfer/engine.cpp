// The transfer engine's public operations: peers, regions, writes, reads, imms and control
// messages. The worker that carries them out is in worker.cpp.

#include <spillway/transfer/engine.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include "transfer/detail/engine_impl.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace spillway::transfer {

using detail::Op;
using detail::Peer;
using detail::RegionRecord;

namespace {

std::string describe(const Region& r) {
  return std::to_string(r.bytes) + " bytes at " +
         std::to_string(reinterpret_cast<std::uintptr_t>(r.ptr));
}

/// Refuses a chunk that is empty or runs past either region, naming it.
void check_chunks(std::span<const Chunk> chunks, std::size_t src_bytes, std::size_t dst_bytes,
                  const char* src_name, const char* dst_name) {
  SPILLWAY_EXPECTS(!chunks.empty(), "transfer: a batch needs at least one chunk");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    const auto where = [&] {
      return "transfer: chunk " + std::to_string(i) + " (src_offset " +
             std::to_string(c.src_offset) + ", dst_offset " + std::to_string(c.dst_offset) +
             ", length " + std::to_string(c.length) + ")";
    };
    SPILLWAY_EXPECTS(c.length > 0, where() + " is empty");
    SPILLWAY_EXPECTS(c.src_offset <= src_bytes && c.length <= src_bytes - c.src_offset,
                     where() + " runs past the " + src_name + " region of " +
                         std::to_string(src_bytes) + " bytes");
    SPILLWAY_EXPECTS(c.dst_offset <= dst_bytes && c.length <= dst_bytes - c.dst_offset,
                     where() + " runs past the " + dst_name + " region of " +
                         std::to_string(dst_bytes) + " bytes");
  }
}

}  // namespace

TransferEngine::Impl::Impl(EngineOptions opts) : options{std::move(opts)} {
  SPILLWAY_EXPECTS(
      options.heartbeat_interval.count() > 0 && options.peer_timeout > options.heartbeat_interval,
      "transfer engine: peer_timeout must exceed heartbeat_interval (> 0)");
  std::string kind = options.backend;
  if (kind == "auto") kind = detail::fabric_compiled() ? "libfabric" : "loopback";
  if (kind == "loopback") {
    backend = detail::make_loopback_backend(*this);
  } else if (kind == "libfabric") {
    backend = detail::make_fabric_backend(*this, options);
  } else if (kind == "cuda_ipc") {
    backend = detail::make_cuda_ipc_backend(*this, options);
  } else {
    SPILLWAY_FAIL("transfer engine: unknown backend '" + options.backend +
                  "' (auto, loopback, libfabric or cuda_ipc)");
  }
  listen_fd = detail::listen_on(options.address, control_address);
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    ::close(listen_fd);
    SPILLWAY_FAIL("transfer engine: eventfd failed", comm_error);
  }
  worker = std::thread([this] { run(); });
}

TransferEngine::Impl::~Impl() {
  stopping = true;
  wake();
  worker.join();
  {
    std::lock_guard lock(mutex);
    for (auto& op : ops) op->ticket->finish(Status::error, "the transfer engine was destroyed");
    for (auto& [imm, list] : expecting) {
      for (auto& e : list) e.ticket->finish(Status::error, "the transfer engine was destroyed");
    }
    peers.clear();  // closes the control connections
    pending.clear();
    for (auto& [id, record] : regions) backend->deregister_region(record);
  }
  // Before any other member goes: a loopback peer may deliver an imm until the backend has
  // left the process's registry.
  backend.reset();
  ::close(listen_fd);
  ::close(wake_fd);
}

void TransferEngine::Impl::wake() const noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof(one));
}

void TransferEngine::Impl::deliver_imm(std::uint32_t imm) {
  std::lock_guard lock(mutex);
  ++arrived[imm];
  ++imms_received;
  satisfy(imm);
}

bool TransferEngine::Impl::send(Peer& peer, detail::FrameType type,
                                std::span<const std::uint8_t> body,
                                const std::function<void()>& first) {
  std::lock_guard send_lock(peer.send_mutex);  // the worker closes connections under it
  int fd = -1;
  {
    std::lock_guard lock(mutex);
    if (peer.alive && !peer.connections.empty()) fd = peer.connections.front()->fd;
  }
  if (fd < 0) return false;
  if (first) first();
  return detail::send_frame(fd, type, body, options.peer_timeout);
}

bool TransferEngine::Impl::send_to_peer(std::uint64_t backend_peer,
                                        std::span<const std::uint8_t> body,
                                        const std::function<void()>& first) {
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard lock(mutex);
    for (auto& [id, p] : peers) {
      if (p->alive && p->backend_peer == backend_peer) peer = p;
    }
  }
  // A failed send is not judged here (the caller holds the backend lock, which failure
  // callbacks may want): the worker's heartbeats find a peer that is gone.
  return peer && send(*peer, detail::FrameType::backend, body, first);
}

void TransferEngine::Impl::satisfy(std::uint32_t imm) {
  const auto it = expecting.find(imm);
  if (it == expecting.end()) return;
  auto& list = it->second;
  auto& count = arrived[imm];
  while (!list.empty()) {
    auto& front = list.front();
    if (front.ticket->ended()) {  // timed out: consumes nothing
      list.pop_front();
      continue;
    }
    if (count < front.count) break;
    count -= front.count;
    front.ticket->finish(Status::ok);
    list.pop_front();
  }
  if (list.empty()) expecting.erase(it);
}

RegionRecord& TransferEngine::Impl::record_of(const Region& region, const char* what) {
  const auto it = regions.find(region.id);
  SPILLWAY_EXPECTS(it != regions.end() && it->second.region.ptr == region.ptr &&
                       it->second.region.bytes == region.bytes,
                   std::string("transfer: the ") + what + " region (" + describe(region) +
                       ") is not registered with this engine");
  return it->second;
}

std::shared_ptr<Peer> TransferEngine::Impl::peer_of(PeerId peer, const char* what) {
  const auto it = peers.find(peer);
  SPILLWAY_EXPECTS(it != peers.end() && it->second->alive,
                   std::string("transfer: ") + what + ": peer " + std::to_string(peer) +
                       " is not a live peer of this engine",
                   comm_error);
  return it->second;
}

std::shared_ptr<Peer> TransferEngine::Impl::peer_of_engine(const detail::EngineId& engine,
                                                           std::string& why) {
  const auto it = by_engine.find(engine);
  if (it != by_engine.end()) return peers.at(it->second);
  SPILLWAY_EXPECTS(gone_engines.contains(engine),
                   "transfer: the remote region belongs to engine " + detail::to_string(engine) +
                       ", which was never a peer of this engine (add_peer it first)");
  why = "the remote region belongs to engine " + detail::to_string(engine) +
        ", which is no longer a peer (it left, died or was removed)";
  return nullptr;
}

Ticket TransferEngine::Impl::submit(std::shared_ptr<Op> op, const RemoteRegion& remote,
                                    std::span<const Chunk> chunks,
                                    std::unique_lock<std::mutex>& lock) {
  Ticket ticket(op->ticket);
  std::string why;
  const auto peer = peer_of_engine(remote.engine, why);
  if (!peer) {
    op->ticket->finish(Status::peer_gone, why);
    return ticket;
  }
  op->peer = peer->id;
  op->backend_peer = peer->backend_peer;
  op->remote = remote;
  op->chunks.assign(chunks.begin(), chunks.end());
  ops.push_back(op);
  // Posted here when nothing submitted before it waits for the worker and the backend is
  // free (try_lock never waits, so taking it under `mutex` cannot deadlock): the copies
  // start without waiting for the worker to wake. The worker then drives it as any other.
  if (unposted == 0 && backend_mutex.try_lock()) {
    lock.unlock();
    {
      std::lock_guard backend_lock(backend_mutex, std::adopt_lock);
      post(op);
    }
    wake();
    return ticket;
  }
  ++unposted;
  submitted.push_back(std::move(op));
  wake();
  return ticket;
}

void TransferEngine::Impl::post(const std::shared_ptr<Op>& op) {
  if (op->ticket->ended()) return;  // its peer went while it waited
  try {
    backend->post(op);
  } catch (const std::exception& e) {
    op->ticket->finish(Status::error, e.what());
  }
}

PeerId TransferEngine::Impl::attach(const detail::EngineMetadata& metadata,
                                    std::unique_ptr<detail::Connection> connection) {
  std::lock_guard backend_lock(backend_mutex);
  std::unique_lock lock(mutex);
  if (const auto it = by_engine.find(metadata.engine); it != by_engine.end()) {
    peers.at(it->second)->connections.push_back(std::move(connection));
    return it->second;
  }
  lock.unlock();
  const std::uint64_t backend_peer = backend->add_peer(metadata.backend_address);
  lock.lock();
  auto peer = std::make_shared<Peer>();
  peer->id = next_peer++;
  peer->metadata = metadata;
  peer->backend_peer = backend_peer;
  peer->connections.push_back(std::move(connection));
  peers[peer->id] = peer;
  by_engine[metadata.engine] = peer->id;
  gone_engines.erase(metadata.engine);
  SPILLWAY_LOG(debug, "transfer: peer " + std::to_string(peer->id) + " is engine " +
                          detail::to_string(metadata.engine) + " at " + metadata.control);
  return peer->id;
}

void TransferEngine::Impl::fail_peer(const std::shared_ptr<Peer>& peer, const std::string& why) {
  std::vector<std::function<void(PeerId, const std::string&)>> callbacks;
  {
    std::lock_guard lock(mutex);
    if (!peer->alive) return;
    peer->alive = false;
    by_engine.erase(peer->metadata.engine);
    gone_engines.insert(peer->metadata.engine);
    const std::string message = "peer " + std::to_string(peer->id) + " (engine " +
                                detail::to_string(peer->metadata.engine) + " at " +
                                peer->metadata.control + ") " + why;
    for (auto& op : ops) {
      if (op->peer == peer->id) op->ticket->finish(Status::peer_gone, message);
    }
    callbacks = failure_callbacks;
  }
  wake();  // the worker closes its connections
  SPILLWAY_LOG(info, "transfer: peer " + std::to_string(peer->id) + " " + why);
  for (auto& cb : callbacks) cb(peer->id, why);
}

// --- the public API -------------------------------------------------------------------------

TransferEngine::TransferEngine(EngineOptions options)
    : impl_{std::make_unique<Impl>(std::move(options))} {}

TransferEngine::~TransferEngine() = default;

std::vector<std::uint8_t> TransferEngine::metadata() const {
  detail::EngineMetadata m;
  m.engine = impl_->id;
  m.backend = impl_->backend->name();
  m.control = impl_->control_address;
  m.backend_address = impl_->backend->address();
  return m.to_bytes();
}

std::string TransferEngine::backend_name() const {
  return impl_->backend->name();
}

PeerId TransferEngine::add_peer(std::span<const std::uint8_t> metadata) {
  const auto m = detail::EngineMetadata::from_bytes(metadata);
  SPILLWAY_EXPECTS(m.engine != impl_->id, "transfer: add_peer with this engine's own metadata");
  SPILLWAY_EXPECTS(m.backend == impl_->backend->name(), "transfer: the peer's backend is " +
                                                            m.backend + ", this engine's is " +
                                                            impl_->backend->name());
  {
    std::lock_guard lock(impl_->mutex);
    if (const auto it = impl_->by_engine.find(m.engine); it != impl_->by_engine.end()) {
      return it->second;
    }
  }
  auto connection = std::make_unique<detail::Connection>();
  connection->fd = detail::connect_to(m.control, impl_->options.peer_timeout);
  const std::vector<std::uint8_t> hello = this->metadata();
  if (!detail::send_frame(connection->fd, detail::FrameType::hello, hello,
                          impl_->options.peer_timeout)) {
    SPILLWAY_FAIL("transfer: the peer at " + m.control + " did not take the hello", comm_error);
  }
  const PeerId id = impl_->attach(m, std::move(connection));
  impl_->wake();
  return id;
}

void TransferEngine::remove_peer(PeerId peer) {
  std::shared_ptr<Peer> p;
  {
    std::lock_guard lock(impl_->mutex);
    p = impl_->peer_of(peer, "remove_peer");
  }
  impl_->fail_peer(p, "was removed");
}

std::vector<PeerId> TransferEngine::peers() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<PeerId> out;
  for (const auto& [engine, id] : impl_->by_engine) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

void TransferEngine::on_peer_failure(std::function<void(PeerId, const std::string&)> callback) {
  std::lock_guard lock(impl_->mutex);
  impl_->failure_callbacks.push_back(std::move(callback));
}

Region TransferEngine::register_memory(void* ptr, std::size_t bytes, MemoryType type, int device) {
  SPILLWAY_EXPECTS(ptr != nullptr, "transfer: register_memory of a null pointer");
  SPILLWAY_EXPECTS(bytes > 0, "transfer: register_memory of zero bytes");
  SPILLWAY_EXPECTS(type != MemoryType::DISK, "transfer: DISK memory cannot be registered");
  SPILLWAY_EXPECTS(type != MemoryType::DEVICE || device >= 0,
                   "transfer: device memory needs its device");
  RegionRecord record;
  record.region = Region{0, ptr, bytes, type, type == MemoryType::DEVICE ? device : -1};
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard backend_lock(impl_->backend_mutex);
  {
    std::lock_guard lock(impl_->mutex);
    for (const auto& [id, r] : impl_->regions) {
      const auto b = reinterpret_cast<std::uintptr_t>(r.region.ptr);
      SPILLWAY_EXPECTS(begin + bytes <= b || b + r.region.bytes <= begin,
                       "transfer: register_memory of " + describe(record.region) +
                           " overlaps region " + std::to_string(id) + " (" + describe(r.region) +
                           ")");
    }
    record.region.id = impl_->next_region++;
  }
  impl_->backend->register_region(record);
  std::lock_guard lock(impl_->mutex);
  impl_->regions[record.region.id] = record;
  return record.region;
}

void TransferEngine::deregister_memory(const Region& region) {
  std::lock_guard backend_lock(impl_->backend_mutex);
  RegionRecord record;
  {
    std::lock_guard lock(impl_->mutex);
    record = impl_->record_of(region, "deregistered");
    impl_->regions.erase(region.id);
  }
  impl_->backend->deregister_region(record);
}

RemoteRegion TransferEngine::export_region(const Region& region, std::size_t offset,
                                           std::size_t length) const {
  std::lock_guard lock(impl_->mutex);
  const RegionRecord& record = impl_->record_of(region, "exported");
  SPILLWAY_EXPECTS(length > 0 && offset <= region.bytes && length <= region.bytes - offset,
                   "transfer: export_region of " + std::to_string(length) + " bytes at " +
                       std::to_string(offset) + " is outside the region of " +
                       std::to_string(region.bytes) + " bytes");
  RemoteRegion out;
  out.engine = impl_->id;
  out.region_id = region.id;
  out.address = record.address + offset;
  out.length = length;
  out.key = record.key;
  out.type = region.type;
  out.device = region.device;
  out.offset = offset;
  out.blob = record.blob;
  return out;
}

Ticket TransferEngine::write(const Region& src, const RemoteRegion& dst,
                             std::span<const Chunk> chunks, std::optional<std::uint32_t> imm,
                             Deadline deadline) {
  auto op = std::make_shared<Op>();
  op->ticket = std::make_shared<detail::TicketState>();
  op->imm = imm;
  op->deadline = deadline;
  std::unique_lock lock(impl_->mutex);
  op->local = impl_->record_of(src, "source");
  check_chunks(chunks, src.bytes, dst.length, "source", "destination");
  return impl_->submit(std::move(op), dst, chunks, lock);
}

Ticket TransferEngine::read(const RemoteRegion& src, const Region& dst,
                            std::span<const Chunk> chunks, Deadline deadline) {
  auto op = std::make_shared<Op>();
  op->ticket = std::make_shared<detail::TicketState>();
  op->is_read = true;
  op->deadline = deadline;
  std::unique_lock lock(impl_->mutex);
  op->local = impl_->record_of(dst, "destination");
  check_chunks(chunks, src.length, dst.bytes, "remote source", "destination");
  return impl_->submit(std::move(op), src, chunks, lock);
}

Ticket TransferEngine::expect_imm(std::uint32_t imm, std::uint32_t count, Deadline deadline) {
  auto state = std::make_shared<detail::TicketState>();
  if (count == 0) {
    state->finish(Status::ok);
    return Ticket(state);
  }
  std::lock_guard lock(impl_->mutex);
  impl_->expecting[imm].push_back({count, state, deadline});
  impl_->satisfy(imm);
  impl_->wake();  // the worker watches the deadline
  return Ticket(state);
}

std::uint64_t TransferEngine::imm_count(std::uint32_t imm) const {
  std::lock_guard lock(impl_->mutex);
  const auto it = impl_->arrived.find(imm);
  return it == impl_->arrived.end() ? 0 : it->second;
}

void TransferEngine::send_control(PeerId peer, std::span<const std::uint8_t> bytes) {
  SPILLWAY_EXPECTS(
      bytes.size() <= (std::size_t{1} << 20),
      "transfer: a control message of " + std::to_string(bytes.size()) + " bytes (at most 1 MiB)");
  std::shared_ptr<Peer> p;
  {
    std::lock_guard lock(impl_->mutex);
    p = impl_->peer_of(peer, "send_control");
  }
  if (!impl_->send(*p, detail::FrameType::control, bytes)) {
    impl_->fail_peer(p, "did not take a control message");
    SPILLWAY_FAIL("transfer: send_control: peer " + std::to_string(peer) + " is gone", comm_error);
  }
}

std::optional<std::pair<PeerId, std::vector<std::uint8_t>>> TransferEngine::recv_control(
    std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  if (!impl_->inbox_ready.wait_for(lock, timeout, [&] { return !impl_->inbox.empty(); })) {
    return std::nullopt;
  }
  auto message = std::move(impl_->inbox.front());
  impl_->inbox.pop_front();
  return message;
}

EngineCounters TransferEngine::counters() const {
  EngineCounters c;
  {
    std::lock_guard backend_lock(impl_->backend_mutex);
    c = impl_->backend->counters();
  }
  std::lock_guard lock(impl_->mutex);
  c.imms_received = impl_->imms_received;
  return c;
}

}  // namespace spillway::transfer
