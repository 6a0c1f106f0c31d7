// The transfer engine's public operations: peers, writes, reads, imms and control messages.
// Registered memory is in regions.cpp, the choice of backend in backends.cpp, and the worker
// that carries the operations out in worker.cpp.

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
using detail::Registration;

namespace {

/// The longest an engine's end waits for its peers to close their side of the connections.
constexpr std::chrono::milliseconds kShutDown{1000};

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
  SPILLWAY_EXPECTS(options.ipc_kernel_share >= 0 && options.ipc_kernel_share < 1,
                   "transfer engine: ipc_kernel_share is a share of a batch's bytes, in (0, 1), "
                   "or 0 for the default by chunk size; got " +
                       std::to_string(options.ipc_kernel_share));
  open_backends();
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
  std::vector<int> fds;  // the control connections
  {
    std::lock_guard lock(mutex);
    for (auto& op : ops) op->ticket->finish(Status::error, "the transfer engine was destroyed");
    for (auto& [imm, list] : expecting) {
      for (auto& e : list) e.ticket->finish(Status::error, "the transfer engine was destroyed");
    }
    for (auto& [id, peer] : peers) {
      for (auto& c : peer->connections) fds.push_back(c->fd);
    }
  }
  // What was last sent to a peer arrives before the connection closes (a barrier's release).
  // Not under the mutex: the wait may take up to kShutDown, and the worker has ended.
  detail::shut_down(fds, std::min<std::chrono::milliseconds>(options.peer_timeout, kShutDown));
  {
    std::lock_guard lock(mutex);
    peers.clear();  // closes the control connections
    pending.clear();
    for (auto& [id, registration] : regions) {
      for (std::size_t i = 0; i < backends.size(); ++i) {
        if (registration.records[i]) backends[i]->deregister_region(*registration.records[i]);
      }
    }
  }
  // Before any other member goes: a loopback peer may deliver an imm until the backend has
  // left the process's registry.
  backends.clear();
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

bool TransferEngine::Impl::send_to_peer(std::size_t index, std::uint64_t backend_peer,
                                        std::span<const std::uint8_t> body,
                                        const std::function<void()>& first) {
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard lock(mutex);
    for (auto& [id, p] : peers) {
      if (p->alive && p->backend_peers[index] == backend_peer) peer = p;
    }
  }
  if (!peer) return false;
  // The frame names the backend it is for (the peer's list may be in another order).
  const std::string name = backends[index]->name();
  std::vector<std::uint8_t> frame;
  frame.reserve(1 + name.size() + body.size());
  frame.push_back(static_cast<std::uint8_t>(name.size()));
  frame.insert(frame.end(), name.begin(), name.end());
  frame.insert(frame.end(), body.begin(), body.end());
  // A failed send is not judged here (the caller holds the backend lock, which failure
  // callbacks may want): the worker's heartbeats find a peer that is gone.
  return send(*peer, detail::FrameType::backend, frame, first);
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

Ticket TransferEngine::Impl::submit(std::shared_ptr<Op> op, const Registration& local,
                                    const RemoteRegion& remote, std::span<const Chunk> chunks,
                                    std::unique_lock<std::mutex>& lock) {
  Ticket ticket(op->ticket);
  std::string why;
  const auto peer = peer_of_engine(remote.engine, why);
  if (!peer) {
    op->ticket->finish(Status::peer_gone, why);
    return ticket;
  }
  op->backend = choose(*peer, local, remote, why);
  SPILLWAY_EXPECTS(op->backend != npos,
                   "transfer: no backend of this engine can carry the batch to peer " +
                       std::to_string(peer->id) + " (" + why + ")");
  const std::string name = backends[op->backend]->name();
  op->peer = peer->id;
  op->backend_peer = *peer->backend_peers[op->backend];
  op->local = *local.records[op->backend];
  op->remote = remote;
  op->remote_key = *std::find_if(remote.keys.begin(), remote.keys.end(),
                                 [&](const RemoteKey& k) { return k.backend == name; });
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
    backends[op->backend]->post(op);
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
  // Every backend both have: each batch then takes the first that can carry it.
  std::vector<std::optional<std::uint64_t>> backend_peers(backends.size());
  std::string why;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const detail::BackendAddress* address = metadata.backend(backends[i]->name());
    if (address == nullptr) continue;
    try {
      backend_peers[i] = backends[i]->add_peer(address->address);
    } catch (const comm_error& e) {  // unreachable by this backend (cuda_ipc on another node)
      why += std::string(why.empty() ? "" : "; ") + e.what();
    }
  }
  SPILLWAY_EXPECTS(std::any_of(backend_peers.begin(), backend_peers.end(),
                               [](const auto& b) { return b.has_value(); }),
                   "transfer: engine " + detail::to_string(metadata.engine) + " at " +
                       metadata.control + " has backends " + metadata.backend_names() +
                       ", this engine " + backend_names() + ", and none of them reaches it" +
                       (why.empty() ? std::string() : ": " + why),
                   comm_error);
  lock.lock();
  auto peer = std::make_shared<Peer>();
  peer->id = next_peer++;
  peer->metadata = metadata;
  peer->backend_peers = std::move(backend_peers);
  peer->connections.push_back(std::move(connection));
  peers[peer->id] = peer;
  by_engine[metadata.engine] = peer->id;
  gone_engines.erase(metadata.engine);
  SPILLWAY_LOG(debug, "transfer: peer " + std::to_string(peer->id) + " is engine " +
                          detail::to_string(metadata.engine) + " at " + metadata.control);
  lock.unlock();
  for (std::size_t i = 0; i < backends.size(); ++i) {
    if (peer->backend_peers[i]) backends[i]->peer_added(*peer->backend_peers[i]);
  }
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
  m.control = impl_->control_address;
  for (const auto& b : impl_->backends) m.backends.push_back({b->name(), b->address()});
  return m.to_bytes();
}

std::string TransferEngine::backend_name() const {
  return impl_->backend_names();
}

PeerId TransferEngine::add_peer(std::span<const std::uint8_t> metadata) {
  const auto m = detail::EngineMetadata::from_bytes(metadata);
  SPILLWAY_EXPECTS(m.engine != impl_->id, "transfer: add_peer with this engine's own metadata");
  SPILLWAY_EXPECTS(impl_->shares_a_backend(m), "transfer: the peer's backends are " +
                                                   m.backend_names() + ", this engine's are " +
                                                   impl_->backend_names() + ": none in common");
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

Ticket TransferEngine::write(const Region& src, const RemoteRegion& dst,
                             std::span<const Chunk> chunks, std::optional<std::uint32_t> imm,
                             Deadline deadline) {
  auto op = std::make_shared<Op>();
  op->ticket = std::make_shared<detail::TicketState>();
  op->imm = imm;
  op->deadline = deadline;
  std::unique_lock lock(impl_->mutex);
  const Registration& local = impl_->registration_of(src, "source");
  check_chunks(chunks, src.bytes, dst.length, "source", "destination");
  return impl_->submit(std::move(op), local, dst, chunks, lock);
}

Ticket TransferEngine::read(const RemoteRegion& src, const Region& dst,
                            std::span<const Chunk> chunks, Deadline deadline) {
  auto op = std::make_shared<Op>();
  op->ticket = std::make_shared<detail::TicketState>();
  op->is_read = true;
  op->deadline = deadline;
  std::unique_lock lock(impl_->mutex);
  const Registration& local = impl_->registration_of(dst, "destination");
  check_chunks(chunks, src.length, dst.bytes, "remote source", "destination");
  return impl_->submit(std::move(op), local, src, chunks, lock);
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
    for (const auto& b : impl_->backends) {
      const EngineCounters one = b->counters();
      c.chunks_posted += one.chunks_posted;
      c.eagain += one.eagain;
    }
  }
  std::lock_guard lock(impl_->mutex);
  c.imms_received = impl_->imms_received;
  return c;
}

}  // namespace spillway::transfer
